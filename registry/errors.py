"""The one exception type users see.

Anything a user can cause (bad URL, unknown node, corrupt file, ...) raises `UserError` with a
message that fits on one line; the CLI prints it as `error: <message>` and exits non-zero.
"""


class UserError(Exception):
    """A problem the user can fix; its message is printed as is, on one line."""

    exit_code = 1

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(" ".join(str(message).split()))
        if exit_code is not None:
            self.exit_code = exit_code


class StorageError(UserError):
    """The registry's storage refused a write (disk full, read-only, locked): not the data's fault."""


class RegistryLocked(StorageError):
    """Another process holds the registry's write lock (DuckDB): worth waiting for with --wait."""
