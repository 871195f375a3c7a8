"""Finding model plugins: entry points of the group ``nodereg.models``.

Any installed distribution can add a model by declaring, in its pyproject.toml::

    [project.entry-points."nodereg.models"]
    mymodel = "mypackage.models:MyModel"

where ``MyModel`` subclasses ``registry.models.base.ProjectionModel`` or ``ScalingModel``.
A plugin that fails to import (a missing dependency, a typo) must not take the whole tool down:
listing reports it as one warning line and every other model keeps working.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points

from registry.errors import UserError
from registry.models.base import Model

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


def _entry_points() -> list[EntryPoint]:
    return sorted(entry_points(group=GROUP), key=lambda ep: ep.name)


def installed_names() -> list[str]:
    """Names of the declared plugins, without importing any of them."""
    return sorted({ep.name for ep in _entry_points()})


def _load(ep: EntryPoint) -> type[Model]:
    cls = ep.load()
    if not (isinstance(cls, type) and issubclass(cls, Model)):
        raise TypeError(f"{ep.value} is not a registry.models.base.Model subclass")
    for attr in ("name", "kind", "description"):
        if not isinstance(getattr(cls, attr, None), str):
            raise TypeError(f"{ep.value} does not set the class attribute {attr!r}")
    return cls


def _failure(ep: EntryPoint, exc: BaseException) -> str:
    detail = " ".join(str(exc).split())[:200]
    return f"model plugin {ep.name!r} ({ep.value}) could not be loaded: {type(exc).__name__}: {detail}"


def discover() -> tuple[list[ModelInfo], list[str]]:
    """Every plugin that loads, and one warning line for each one that does not."""
    infos, warnings = [], []
    for ep in _entry_points():
        try:
            cls = _load(ep)
        except Exception as exc:  # noqa: BLE001 - a broken plugin is reported, never fatal
            warnings.append(_failure(ep, exc))
            continue
        dist = getattr(getattr(ep, "dist", None), "name", None)
        infos.append(ModelInfo(ep.name, cls.kind, str(cls.version), cls.description, sorted(cls.needs),
                               ep.value, dist))
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


def create(name: str, kind: str | None = None, **options) -> Model:
    """A fresh, unfitted instance of the named model."""
    return model_class(name, kind)(**options)
