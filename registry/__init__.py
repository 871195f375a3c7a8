"""nodereg: a database-backed registry of node performance profiles and application traces.

The package follows the data flow: `inventory` and `profile` describe nodes, `trace` describes
applications, `match` and `models` predict, `db` stores everything, `cli` is the front door.
"""

__version__ = "0.1.0"
