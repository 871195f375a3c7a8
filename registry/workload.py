"""Which input a run or a trace of an application used: its workload identity.

An app's name says which program ran, not on what: runs of one program on a small and a large
input are different quantities, and mixing them into a base time or an accuracy check compares
unlike things. A run or trace carries an `input`: the user's label (`--input LABEL`), else
'cmd:' and a digest of the command line and of the size of every argument that names a file
(a file's content is not read: inputs may be gigabytes; same path and size is taken as the same
input). NULL (runs added by hand or imported without a label) is unknown and compatible with any.
"""

import hashlib
import json
import os

from registry.db.names import check_name


def identity(argv: list[str], label: str | None = None) -> str:
    """The input of a command: `label` (checked like a name) when given, else the command's digest."""
    if label is not None:
        return check_name(label, "input")
    named = []
    for arg in argv[1:]:
        try:
            if os.path.isfile(arg):
                named.append([arg, os.path.getsize(arg)])
        except (OSError, ValueError):      # a path the OS refuses (NUL, too long) is an argument, not a file
            continue
    doc = json.dumps({"argv": argv, "files": named}, sort_keys=True)
    return "cmd:" + hashlib.sha256(doc.encode()).hexdigest()[:12]


def same_input(a: str | None, b: str | None) -> bool:
    """Whether two workloads may be compared: equal inputs, or either unknown."""
    return a is None or b is None or a == b
