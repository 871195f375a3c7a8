"""Plugin discovery, stored models, and the scaling + projection combination."""

import json
from importlib.metadata import EntryPoint

import numpy as np
import pytest
import sqlalchemy as sa

from registry.db import open_registry
from registry.errors import UserError
from registry.models import plugins
from registry.models.amdahl import AmdahlModel
from registry.models.base import NodePrediction, ScalingContext
from registry.models.combine import project_scaling
from registry.models.downey import DowneyModel
from registry.models.ensemble import EnsembleModel
from registry.models.loglog import LogLogModel
from registry.models.store import list_models, load_model, save_model
from registry.models.usl import UslModel

BUILT_IN = {"amdahl": "scaling", "downey": "scaling", "loglog": "scaling", "usl": "scaling", "ensemble": "scaling",
            "gbt": "projection", "mob": "projection"}


def fake_entry_points(monkeypatch, extra: list[EntryPoint]):
    real = plugins._entry_points()
    monkeypatch.setattr(plugins, "_entry_points", lambda: sorted(real + extra, key=lambda e: e.name))


def test_built_in_models_are_discovered_with_their_kind():
    infos, _ = plugins.discover()
    found = {i.name: i.kind for i in infos}
    for name, kind in BUILT_IN.items():
        assert found[name] == kind
    assert all(i.description for i in infos)


def test_a_broken_plugin_is_a_warning_not_a_crash(monkeypatch):
    fake_entry_points(monkeypatch, [
        EntryPoint("ghost", "registry.models.does_not_exist:Ghost", plugins.GROUP),
        EntryPoint("notamodel", "registry.errors:UserError", plugins.GROUP)])
    infos, warnings = plugins.discover()
    assert {"loglog", "downey"} <= {i.name for i in infos}
    assert any("'ghost'" in w and "ModuleNotFoundError" in w for w in warnings)
    assert any("'notamodel'" in w and "not a registry.models.base.Model" in w for w in warnings)
    with pytest.raises(UserError, match="'ghost'.*could not be loaded"):
        plugins.model_class("ghost")


def test_unknown_model_lists_the_installed_ones():
    with pytest.raises(UserError) as exc:
        plugins.model_class("nosuchmodel")
    assert "unknown model 'nosuchmodel'" in str(exc.value)
    assert "downey" in str(exc.value) and "loglog" in str(exc.value)


def test_kind_mismatch_is_a_user_error():
    with pytest.raises(UserError, match="'gbt' is a projection model; this needs a scaling model"):
        plugins.model_class("gbt", kind="scaling")
    assert isinstance(plugins.create("amdahl", kind="scaling"), AmdahlModel)


@pytest.fixture
def registry(tmp_path):
    reg = open_registry(f"duckdb:///{tmp_path / 'models.duckdb'}")
    yield reg
    reg.close()


@pytest.mark.parametrize("make", [
    lambda: AmdahlModel().fit([1, 2, 4, 8], [10.0, 5.6, 3.3, 2.2]),
    lambda: LogLogModel().fit([1, 2, 4, 8, 16], [10.0, 5.6, 3.3, 2.2, 1.8],
                              ScalingContext(comm_s={"MAX": np.array([0.1, 0.2, 0.3, 0.5, 0.7])})),
    lambda: DowneyModel().fit([1, 2, 4, 8], [10.0, 5.6, 3.3, 2.2]),
    lambda: UslModel().fit([1, 2, 4, 8], [10.0, 5.6, 3.3, 2.9]),
    lambda: EnsembleModel().fit([1, 2, 4, 8], [10.0, 5.6, 3.3, 2.2]),
], ids=["amdahl", "loglog", "downey", "usl", "ensemble"])
def test_stored_models_round_trip(registry, make):
    model = make()
    before = [p.predicted_s for p in model.predict([8, 32])]
    with registry.begin() as conn:
        uid = save_model(conn, model, "app=x node=y")
    with registry.connect() as conn:
        back = load_model(conn, uid)
        rows = list_models(conn, "app=x node=y")
    assert type(back) is type(model)
    assert [p.predicted_s for p in back.predict([8, 32])] == pytest.approx(before, rel=1e-12)
    assert rows[0]["uid"] == uid and rows[0]["name"] == model.name


def test_loading_a_missing_or_stale_model_is_a_user_error(registry):
    with registry.connect() as conn, pytest.raises(UserError, match="no stored model"):
        load_model(conn, "nope")
    with registry.begin() as conn:
        uid = save_model(conn, AmdahlModel().fit([1, 2, 4], [3.0, 2.0, 1.5]), None)
        conn.execute(sa.text("UPDATE models SET version = '0' WHERE uid = :u"), {"u": uid})
    with registry.connect() as conn, pytest.raises(UserError, match="version 0.*refit"):
        load_model(conn, uid)
    with registry.begin() as conn:
        conn.execute(sa.text("UPDATE models SET version = :v, params_json = :p WHERE uid = :u"),
                     {"u": uid, "v": AmdahlModel.version, "p": json.dumps({"bogus": 1})})
    with registry.connect() as conn, pytest.raises(UserError, match="unreadable parameters"):
        load_model(conn, uid)


def test_project_scaling_moves_the_base_curve_to_the_target_node():
    n = np.array([1, 2, 4, 8])
    base = AmdahlModel().fit(n, 2.0 + 80.0 / n)                  # the base node has 8 cores
    on_x = NodePrediction("big", predicted_s=6.0, low_s=5.0, high_s=7.2, warnings=["projection note"])
    preds = project_scaling(base, 8, on_x, [16, 64], node_cpus=32)
    shape = (2.0 + 80.0 / 16) / (2.0 + 80.0 / 8)
    assert preds[0].predicted_s == pytest.approx(6.0 * shape)
    assert preds[0].low_s < preds[0].predicted_s < preds[0].high_s
    assert preds[0].high_s / preds[0].predicted_s == pytest.approx(1.2, rel=1e-6)   # only the projection is uncertain
    assert "projection note" in preds[0].warnings
    assert any("exceed the 32 CPUs" in w for w in preds[1].warnings)
    assert not any("exceed" in w for w in preds[0].warnings)
