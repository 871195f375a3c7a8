"""The limits of a bundle import, apart from the bundle code (pandas, pyarrow) so that the command line
reads its defaults without loading it."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """What one bundle may hold, checked before anything is unpacked or read: a bundle comes from
    elsewhere, and a zip of a few kB can unpack to terabytes (a zip bomb)."""

    max_bytes: int = 8 * 2**30        # unpacked, all members together
    max_members: int = 256            # files (a bundle has one per table and its manifest)
    max_rows: int = 100_000_000       # per table
