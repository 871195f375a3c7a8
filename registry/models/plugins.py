"""Finding model plugins: entry points of the group ``nodereg.models``.

Any installed distribution can add a model by declaring, in its pyproject.toml::

    [project.entry-points."nodereg.models"]
    mymodel = "mypackage.models:MyModel"

where ``MyModel`` subclasses ``registry.models.ProjectionModel`` or ``ScalingModel`` and keeps the
contract (registry.models.contract; docs/models.md, "Writing a model"). A plugin that fails to import
(a missing dependency, a typo) or breaks the contract must not take the whole tool down: listing
reports it as one line, not usable, with the reason, and every other model keeps working.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points

from registry.errors import UserError
from registry.models.base import Model
from registry.models.options import Option, resolve

GROUP = "nodereg.models"


@dataclass
class ModelInfo:
    name: str
    kind: str
    version: str
    description: str
    needs: list[str]
    target: str          # 'module:Class' the entry point names
    distribution: str | None
    options: tuple[Option, ...] = ()


@functools.cache
def _entry_points() -> list[EntryPoint]:
    """The group's entry points, read once per process (each read scans every installed distribution)."""
    return sorted(entry_points(group=GROUP), key=lambda ep: ep.name)


def installed_names() -> list[str]:
    """Names of the declared plugins, without importing any of them."""
    return sorted({ep.name for ep in _entry_points()})


def _load(ep: EntryPoint) -> type[Model]:
    """The plugin's class, or a TypeError saying why it is not usable (registry.models.contract); a
    name must say which class it loads, so one installed for two targets is not usable."""
    from registry.models.contract import problems

    others = sorted({other.value for other in _entry_points() if other.name == ep.name} - {ep.value})
    if others:
        raise TypeError(f"the name is also installed for {', '.join(others)}: which one is meant is unknown")
    cls = ep.load()
    found = problems(cls, ep.name)
    if found:
        raise TypeError("; ".join(found))
    return cls


def _failure(ep: EntryPoint, exc: BaseException) -> str:
    detail = " ".join(str(exc).split())[:300]
    if isinstance(exc, TypeError):
        return f"model plugin {ep.name!r} ({ep.value}) is not usable: {detail}"
    return f"model plugin {ep.name!r} ({ep.value}) could not be loaded: {type(exc).__name__}: {detail}"


def discover() -> tuple[list[ModelInfo], list[str]]:
    """Every usable plugin, and one line for each one that is not (it fails to load or breaks the
    contract; a name installed twice makes both unusable)."""
    infos, warnings, seen = [], [], set()
    for ep in _entry_points():
        if (ep.name, ep.value) in seen:
            continue
        seen.add((ep.name, ep.value))
        try:
            cls = _load(ep)
        except Exception as exc:  # noqa: BLE001 - a broken plugin is reported, never fatal
            warnings.append(_failure(ep, exc))
            continue
        dist = getattr(getattr(ep, "dist", None), "name", None)
        infos.append(ModelInfo(ep.name, cls.kind, str(cls.version), cls.description, sorted(cls.needs),
                               ep.value, dist, tuple(cls.options)))
    return infos, warnings


def model_class(name: str, kind: str | None = None) -> type[Model]:
    """The plugin class called `name` (optionally required to be of `kind`), or a UserError naming the choices."""
    matches = [ep for ep in _entry_points() if ep.name == name]
    if not matches:
        names = installed_names()
        listed = ", ".join(names) if names else "none: is nodereg installed (pip install -e .)?"
        raise UserError(f"unknown model {name!r} (installed: {listed})")
    try:
        cls = _load(matches[0])
    except Exception as exc:  # noqa: BLE001
        raise UserError(_failure(matches[0], exc)) from None
    if kind is not None and cls.kind != kind:
        raise UserError(f"model {name!r} is a {cls.kind} model; this needs a {kind} model "
                        f"(installed: {', '.join(names_of_kind(kind))})")
    return cls


def names_of_kind(kind: str) -> list[str]:
    infos, _ = discover()
    return [i.name for i in infos if i.kind == kind]


def create(name: str, kind: str | None = None, options: Mapping[str, object] | None = None) -> Model:
    """A fresh, unfitted instance of the named model with `options` (texts from the command line or
    values; the rest at their defaults). A bad option is a UserError naming the model and the key."""
    cls = model_class(name, kind)
    return instantiate(cls, options)


def instantiate(cls: type[Model], options: Mapping[str, object] | None = None) -> Model:
    """`cls` with its options resolved (registry.models.options.resolve); what its own __init__
    refuses (a combination of values, a bound the declaration could not say) is a UserError too."""
    values = resolve(cls.name, cls.options, options or {})
    try:
        return cls(**values)
    except (UserError, ValueError) as exc:
        raise UserError(f"model {cls.name!r}: {exc}") from None
