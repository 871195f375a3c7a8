"""Linux CPU-list syntax ('0-3,8,10-11'), used by --cpus, sysfs and taskset alike."""

from registry.errors import UserError


def parse(text: str) -> list[int]:
    """'0-2,5' -> [0, 1, 2, 5] (sorted, unique). Raises UserError on malformed text."""
    cpus: set[int] = set()
    for part in str(text).replace(" ", "").split(","):
        if not part:
            continue
        try:
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                if lo > hi or lo < 0:
                    raise ValueError
                cpus.update(range(lo, hi + 1))
            else:
                value = int(part)
                if value < 0:
                    raise ValueError
                cpus.add(value)
        except ValueError:
            raise UserError(f"malformed CPU list {text!r}: expected e.g. 0,1 or 0-3") from None
    if not cpus:
        raise UserError(f"empty CPU list {text!r}")
    return sorted(cpus)


def named(cpus) -> str:
    """[0] -> 'CPU 0', [0, 1] -> 'CPUs 0-1' (a list or its text): what prose says, not `CPU(s)`."""
    cpus = parse(cpus) if isinstance(cpus, str) else sorted(set(cpus))
    return f"{'CPU' if len(cpus) == 1 else 'CPUs'} {format(cpus)}"


def format(cpus) -> str:
    """[0, 1, 2, 5] -> '0-2,5'."""
    cpus = sorted(set(cpus))
    parts, start, prev = [], None, None
    for c in cpus + [None]:
        if start is None:
            start = prev = c
        elif c is not None and c == prev + 1:
            prev = c
        else:
            parts.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = c
    return ",".join(parts)
