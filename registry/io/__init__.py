"""Bringing external data into the registry: the Lumos cloud dataset (``lumos``) and its ``sar`` traces."""
