"""Command-line values of plain types, read without pydantic.

typer (0.26 and later) checks every parameter's value through a pydantic TypeAdapter, built when
the value is first read: importing pydantic and building the adapters of one command took about
0.1 s of CPU, a third of the 0.3 s start-up target (issue 30, scripts/bench_startup.py). Here a
value of a plain type (str, int, float, a flag's bool, or a list of one of them) that reads cleanly and lies in
its range is taken as it is; anything else (a value that is not a number, one out of range, any
other type) goes to typer's own adapter, so that every error message stays typer's. With a typer
that has no adapters (click converts the values itself), or whose private adapter classes no longer
take the fields used here, nothing is changed: the start-up is slower, every value still checked.
"""

import re
from dataclasses import dataclass
from typing import Any, get_args, get_origin

from registry.cli.argv import parameters, walk

try:
    from typer._coercion import RuntimeParam, build_runtime_param
except ImportError:  # pragma: no cover - typer before 0.26: no adapters to spare
    RuntimeParam = None

PLAIN = (str, int, float, bool)
_INT = re.compile(r"-?\d+")
_FLOAT = re.compile(r"-?(\d+(\.\d*)?|\.\d+)")
_UNREAD = object()


def read(kind: type, value: Any) -> Any:
    """`value` as `kind` (one of PLAIN) where it reads cleanly, else _UNREAD."""
    if kind in (str, bool):
        return value if isinstance(value, kind) else _UNREAD
    if isinstance(value, bool):
        return _UNREAD
    if kind is int:
        if isinstance(value, int):
            return value
        return int(value) if isinstance(value, str) and _INT.fullmatch(value) else _UNREAD
    if isinstance(value, (int, float)):
        return float(value)
    return float(value) if isinstance(value, str) and _FLOAT.fullmatch(value) else _UNREAD


def _plain_kind(annotation: Any) -> tuple[type | None, bool]:
    """(the plain type, whether the parameter is a list of it); (None, False) for anything else."""
    if annotation in PLAIN:
        return annotation, False
    if get_origin(annotation) is list and len(get_args(annotation)) == 1 and get_args(annotation)[0] in PLAIN:
        return get_args(annotation)[0], True
    return None, False


if RuntimeParam is not None:
    @dataclass(frozen=True)
    class PlainParam(RuntimeParam):
        """A plain parameter's coercion: clean values here, the rest through typer's adapter."""

        kind: type
        many: bool
        descriptor: Any

        def _coerce_value(self, value: Any, param, ctx) -> Any:
            values = [read(self.kind, v) for v in (value if self.many else [value])]
            if any(v is _UNREAD or not self._in_range(v) for v in values):
                return build_runtime_param(self.descriptor)._coerce_value(value, param=param, ctx=ctx)
            return values if self.many else values[0]

        def _in_range(self, v: Any) -> bool:
            low, high = self.parameter_info.min, self.parameter_info.max
            return (low is None or v >= low) and (high is None or v <= high)


def install(command) -> None:
    """Give every plain parameter of `command` and its subcommands the coercion above."""
    if RuntimeParam is None:
        return
    for cmd in walk(command):
        for param in parameters(cmd):
            desc = getattr(param, "type_descriptor", None)
            if desc is None or getattr(param, "_runtime_param", _UNREAD) is not None:
                continue
            kind, many = _plain_kind(desc.annotation)
            info = desc.parameter_info
            if kind is None or desc.is_file or desc.is_path or desc.is_choice or info.parser is not None \
                    or info.clamp:
                continue
            try:
                param._runtime_param = PlainParam(parameter_info=info, annotation=desc.annotation, kind=kind,
                                                  many=many, descriptor=desc)
            except TypeError:  # pragma: no cover - a typer whose RuntimeParam has other fields
                return
