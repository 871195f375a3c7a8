"""Values on their way out of Python: plain scalars, JSON without NaN, and short text for people.

One home for what the CLI's JSON and tables, the HTML reports, the trace files, the stored model
parameters and PostgreSQL's COPY writer all need: numpy and Decimal scalars become Python ones,
dates become ISO text, and NaN or infinities become null (JSON has neither).
"""

import math
from datetime import date, datetime
from decimal import Decimal


def plain(value):
    """A scalar as Python's own type: numpy scalars unwrapped, Decimal as float, dates as ISO text,
    NaN and infinities as None. Anything else is returned as is."""
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Decimal):
        value = float(value)
    elif hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()  # numpy scalar
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def finite_json(obj):
    """`obj` with every scalar made plain, recursively (dict keys as text): NaN and infinities are
    not JSON, they become null."""
    if isinstance(obj, dict):
        return {str(k): finite_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_json(v) for v in obj]
    return plain(obj)


def fmt_value(value) -> str:
    """A value as table text: four significant digits, thousands separated, tiny and huge in
    exponent notation, times to the second, missing as empty."""
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    value = plain(value)
    if value is None:
        return ""
    if isinstance(value, float):
        if value == 0 or 1e-3 <= abs(value) < 1e6:
            return f"{value:.4g}" if abs(value) < 1000 else f"{value:,.0f}"
        return f"{value:.3e}"
    return str(value)


def plural(n: int, word: str, words: str | None = None) -> str:
    """`1 thread`, `2 threads` (`words`: the plural where adding an s is wrong)."""
    return f"{n} {word if n == 1 else words or word + 's'}"


def listed(items, word: str, words: str | None = None) -> str:
    """`column time_s`, `columns app, node`: the noun as many as the items are, then the items (no
    `column(s)`)."""
    items = [str(i) for i in items]
    return f"{word if len(items) == 1 else words or word + 's'} {', '.join(items)}"


def command_line(*words) -> str:
    """A command to suggest, in backquotes, each word quoted as a POSIX shell needs it (a node called
    `it's` is written 'it'"'"'s'), so that it can be pasted as it stands."""
    import shlex

    return "`" + shlex.join(str(w) for w in words) + "`"
