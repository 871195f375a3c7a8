"""Declared model options: typed, with defaults, bounds and help, settable as `--option KEY=VALUE`.

After Extra-P's modelers: a model says which knobs it has (``Model.options``, a tuple of
``Option``), each one a keyword argument of its ``__init__``; the command line, `nodereg models
NAME` and the conformance check (registry.models.contract) read that declaration, so a plugin gets
options on `match`, `scaling` and `evaluate` without any code of its own. A value from the command
line is parsed by the declared type and checked against the bounds and choices; anything wrong is
one line for the user, naming the model, the key and what would be accepted.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from registry.errors import UserError

TYPES = (int, float, str, bool, tuple)   # tuple: comma-separated words
_TRUE, _FALSE = {"true", "yes", "on", "1"}, {"false", "no", "off", "0"}


@dataclass(frozen=True)
class Option:
    """One keyword argument of a model's ``__init__`` that users may set.

    ``default`` None means "decided by the model from the data" (say so in ``help``); ``low`` and
    ``high`` are inclusive bounds of a number; ``choices`` the allowed words of a str or tuple.
    """

    name: str
    type: type
    default: Any
    help: str
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] | None = None

    def parse(self, text: str) -> Any:
        """The value of `text` (from the command line), or a ValueError saying what is accepted."""
        text = text.strip()
        if self.type is bool:
            if text.lower() not in _TRUE | _FALSE:
                raise ValueError("expected true or false")
            return text.lower() in _TRUE
        if self.type is tuple:
            return self.check(tuple(w.strip() for w in text.split(",") if w.strip()))
        try:
            value = self.type(text)
        except ValueError:
            raise ValueError(f"expected {'an integer' if self.type is int else 'a number'}") from None
        return self.check(value)

    def check(self, value: Any) -> Any:
        """`value` in the declared type (a JSON list back as a tuple), within bounds and choices."""
        if value is None:
            return None
        if self.type is tuple:
            value = tuple(value)
        if self.type in (int, float):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"expected a finite {self.type.__name__}")
            if self.type is int and value != int(value):
                raise ValueError("expected an integer")
            value = self.type(value)
            if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
                raise ValueError(f"out of range {self.range_text()}")
        words = value if self.type is tuple else (value,) if self.type is str else ()
        bad = [w for w in words if self.choices is not None and w not in self.choices]
        if bad:
            raise ValueError(f"{', '.join(map(str, bad))} is not among {', '.join(self.choices)}")
        return value

    def range_text(self) -> str:
        if self.choices is not None:
            return f"{{{', '.join(self.choices)}}}"
        if self.low is None and self.high is None:
            return ""
        lo = "-inf" if self.low is None else f"{self.low:g}"
        hi = "inf" if self.high is None else f"{self.high:g}"
        return f"[{lo}, {hi}]"

    def describe(self) -> dict:
        """A row for `nodereg models NAME`."""
        default = ",".join(self.default) if self.type is tuple and self.default is not None else self.default
        return {"option": self.name, "type": self.type.__name__, "default": "(from the data)" if default is None
                else default, "range": self.range_text(), "help": self.help}


def defaults(options: Iterable[Option]) -> dict[str, Any]:
    return {o.name: o.default for o in options}


def parse_assignments(texts: Iterable[str] | None, flag: str = "--option") -> dict[str, str]:
    """`KEY=VALUE` texts as a dict (a later KEY wins), or a UserError for one without '='."""
    out = {}
    for text in texts or ():
        key, eq, value = text.partition("=")
        if not eq or not key.strip():
            raise UserError(f"{flag} takes KEY=VALUE, not {text!r}")
        out[key.strip()] = value
    return out


def resolve(model: str, options: tuple[Option, ...], given: Mapping[str, Any]) -> dict[str, Any]:
    """Every declared option's value: the defaults, overridden by `given` (texts are parsed, other
    values checked). An unknown key, a bad value or one out of range is a UserError."""
    declared = {o.name: o for o in options}
    unknown = sorted(set(given) - set(declared))
    if unknown:
        known = ", ".join(declared) or "none"
        raise UserError(f"model {model!r} has no option {unknown[0]!r} (its options: {known})")
    values = defaults(options)
    for key, value in given.items():
        opt = declared[key]
        try:
            values[key] = opt.parse(value) if isinstance(value, str) and opt.type is not str else opt.check(value)
        except ValueError as exc:
            raise UserError(f"model {model!r} option {key}={value}: {exc}") from None
    return values
