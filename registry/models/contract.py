"""The plugin contract: what a model class must declare, and the conformance check that runs it.

``problems(cls, entry_name)`` reads the class only (no fit): `nodereg models` and every command that
loads a plugin call it, and a class with a problem is reported as not usable, with the reasons,
instead of failing later in the middle of a command. ``check_model(cls)`` goes further, in the spirit
of scikit-learn's estimator checks: it fits the model on a small built-in fixture of its kind,
predicts, stores and reloads it, and tries the errors a user can make (registry.models.fixtures).
The test suite runs it on every installed plugin; a plugin's author runs it in their own tests::

    from registry.models import check_model
    check_model(MyModel)      # raises ModelCheckError listing every failure
"""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from registry.models.base import KINDS, NEEDS, Model, NotFittedError, ProjectionModel, ScalingModel
from registry.models.options import TYPES, Option, resolve


def problems(cls: object, entry_name: str | None = None) -> list[str]:
    """What keeps `cls` from being a usable model plugin (empty: nothing); `entry_name` is the name
    it is installed under, which must be the class's `name` (stored models are loaded by it)."""
    if not (isinstance(cls, type) and issubclass(cls, Model)):
        return ["not a registry.models.base.Model subclass"]
    out = [f"the class attribute {attr!r} is not set (a str)" for attr in ("name", "kind", "description")
           if not isinstance(getattr(cls, attr, None), str)]
    if out:
        return out
    base = {"projection": ProjectionModel, "scaling": ScalingModel}.get(cls.kind)
    if base is None:
        out.append(f"kind {cls.kind!r} is not one of {', '.join(KINDS)}")
    elif not issubclass(cls, base):
        out.append(f"kind {cls.kind!r} but not a {base.__name__} subclass")
    if entry_name is not None and cls.name != entry_name:
        out.append(f"installed as {entry_name!r} but its class attribute name is {cls.name!r}")
    if inspect.isabstract(cls):
        out.append(f"does not implement {', '.join(sorted(cls.__abstractmethods__))}")
    unknown = sorted(set(cls.needs) - NEEDS)
    if unknown:
        out.append(f"needs {', '.join(unknown)}, not among {', '.join(sorted(NEEDS))}")
    out.extend(_option_problems(cls))
    return out


def _option_problems(cls: type[Model]) -> list[str]:
    try:
        accepted = inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        accepted = {}
    anything = any(p.kind is p.VAR_KEYWORD for p in accepted.values())
    if not isinstance(cls.options, tuple):
        return [f"options must be a tuple of registry.models.Option, not {type(cls.options).__name__}"]
    out, seen = [], set()
    for opt in cls.options:
        if not isinstance(opt, Option):
            out.append(f"options holds {opt!r}, not a registry.models.Option")
            continue
        if opt.name in seen:
            out.append(f"option {opt.name!r} is declared twice")
        seen.add(opt.name)
        if opt.type not in TYPES:
            out.append(f"option {opt.name!r} has type {opt.type!r}, not one of int, float, str, bool, tuple")
            continue
        if not (anything or opt.name in accepted):
            out.append(f"option {opt.name!r} is not a keyword argument of __init__")
        try:
            opt.check(opt.default)
        except ValueError as exc:
            out.append(f"option {opt.name!r}: its default {opt.default!r} is invalid: {exc}")
    return out


class ModelCheckError(AssertionError):
    """A model failed the conformance check; the message lists every failed step."""


@dataclass
class CheckReport:
    model: str
    passed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"check_model({self.model}): {len(self.passed)} passed, {len(self.failed)} failed, "
                 f"{len(self.skipped)} skipped"]
        lines += [f"  FAILED {s}" for s in self.failed] + [f"  skipped {s}" for s in self.skipped]
        return "\n".join(lines)


def check_model(cls: type[Model]) -> CheckReport:
    """Run the conformance checks on `cls`; the report of what passed and what was skipped, or a
    ModelCheckError listing what failed. The fits run with one thread per pool (OpenMP, BLAS): on a
    fixture this small, thread pools only oversubscribe the CPUs (as in `nodereg evaluate`)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        return _check(cls)


def _check(cls: type[Model]) -> CheckReport:
    from registry.models.fixtures import fixture_for

    report = CheckReport(getattr(cls, "name", repr(cls)))
    found = problems(cls)
    if found:
        report.failed.extend(f"contract: {p}" for p in found)
        raise ModelCheckError(str(report))
    report.passed.append("contract")
    defaults = resolve(cls.name, cls.options, {})
    _step(report, "options round trip", lambda: _options_round_trip(cls, defaults))
    _step(report, "bad options are refused", lambda: _bad_options(cls))
    _step(report, "predict before fit", lambda: _unfitted(cls, defaults))
    fixture = fixture_for(cls)
    if isinstance(fixture, str):
        report.skipped.append(f"fit, predict, save/load: {fixture}")
    else:
        fitted: list[Model] = []

        def fit_and_predict() -> None:
            fitted.append(fixture.fit(cls(**defaults)))
            fixture.check(fitted[0])

        _step(report, "fit and predict", fit_and_predict)
        if fitted:
            _step(report, "save/load predicts identically", lambda: _save_load(cls, fixture, fitted[0]))
        else:
            report.skipped.append("save/load: the fit failed")
    if report.failed:
        raise ModelCheckError(str(report))
    return report


def _step(report: CheckReport, what: str, run: Callable[[], None]) -> None:
    try:
        run()
    except Exception as exc:  # noqa: BLE001 - every failure is reported, the other steps still run
        report.failed.append(f"{what}: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}")
    else:
        report.passed.append(what)


def _options_round_trip(cls: type[Model], defaults: dict) -> None:
    values = cls(**defaults).option_values()
    if values != defaults:
        raise AssertionError(f"option_values() gives {values}, the declared defaults are {defaults}")
    for opt in cls.options:
        if opt.default is not None and opt.type is not str:
            text = ",".join(opt.default) if opt.type is tuple else str(opt.default).lower()
            if opt.parse(text) != opt.default:
                raise AssertionError(f"option {opt.name}: the default {opt.default!r} does not parse back "
                                     f"from {text!r}")


def _bad_options(cls: type[Model]) -> None:
    from registry.errors import UserError

    tries = [{"no_such_option_": "1"}]
    tries += [{o.name: "not-a-value"} for o in cls.options if o.type in (int, float, bool) or o.choices]
    for given in tries:
        try:
            resolve(cls.name, cls.options, given)
        except UserError:
            continue
        raise AssertionError(f"the option {given} was accepted")


def _unfitted(cls: type[Model], defaults: dict) -> None:
    from registry.models.fixtures import unfitted_call

    try:
        unfitted_call(cls(**defaults))
    except NotFittedError:
        return
    except Exception as exc:
        raise AssertionError(f"predict before fit raised {type(exc).__name__}: {exc}, not NotFittedError") from None
    raise AssertionError("predict before fit returned instead of raising NotFittedError")


def _save_load(cls: type[Model], fixture, model: Model) -> None:
    from registry.values import finite_json

    text = json.dumps(finite_json(model.params()), allow_nan=False, sort_keys=True)
    back = cls.from_params(json.loads(text))
    if back.option_values() != model.option_values():
        raise AssertionError(f"options after loading {back.option_values()} differ from {model.option_values()}")
    before, after = fixture.predictions(model), fixture.predictions(back)
    if len(before) != len(after) or not all(_same(a, b) for a, b in zip(before, after)):
        raise AssertionError(f"the loaded model predicts {after}, the fitted one {before}")


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-300)
