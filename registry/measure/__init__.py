"""Measurement shared by `profile` and `trace`: /proc sampling, counters, cachegrind, the
command runner and its watchdog, and the signatures computed from what they record."""
