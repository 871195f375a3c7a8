"""nodereg: a database-backed registry of node performance profiles and application traces.

The package follows the data flow: `inventory` and `profile` describe nodes, `trace` describes
applications, `match` and `models` predict, `db` stores everything, `cli` is the front door.
"""

__version__ = "0.7.0"


def __getattr__(name):
    """`registry.phase("name")`: the phase-marker context manager, imported on first use so that
    `import registry` stays cheap inside the applications being traced."""
    if name == "phase":
        from registry.trace.markers import phase

        return phase
    raise AttributeError(f"module 'registry' has no attribute {name!r}")
