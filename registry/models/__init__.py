"""Prediction models: the plugin API (`base`, `options`), plugin discovery (`plugins`), the contract
and its conformance check (`contract`), storage (`store`) and the built-ins (one module each;
`corredor/` for Corredor 2011). See docs/models.md, "Writing a model".

The public API for plugin authors is importable from here (``from registry.models import
ScalingModel, Option, check_model``); the names are imported on first use, so that importing a
submodule (as every command does) does not import them all.
"""

from importlib import import_module

_PUBLIC = {
    "registry.models.base": ("Model", "ProjectionModel", "ScalingModel", "NotFittedError", "ReferenceSet", "Query",
                             "Matrix", "NodePrediction", "ScalingPrediction", "ScalingContext", "CacheLevel",
                             "MODEL_FAILURES", "NEEDS", "NEEDS_SIGNATURES", "NEEDS_NODE_FEATURES", "NEEDS_STREAMS",
                             "NEEDS_SCALING_RUNS", "check_targets", "log_interval"),
    "registry.models.options": ("Option",),
    "registry.models.contract": ("check_model", "CheckReport", "ModelCheckError"),
}
_WHERE = {name: module for module, names in _PUBLIC.items() for name in names}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module 'registry.models' has no attribute {name!r}")
    return getattr(import_module(_WHERE[name]), name)
