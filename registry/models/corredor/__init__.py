"""Corredor (2011): stream descriptors, the similarity index of Table 3.21, zones and estimation."""
