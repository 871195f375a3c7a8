"""From registry rows (a real DuckDB registry) to the corredor model's inputs, and a match on them."""

import pytest
import sqlalchemy as sa

from registry.db import open_registry, utcnow
from registry.db.write import insert_rows
from registry.models.corredor.model import CorredorModel
from registry.models.corredor.rows import phases_from_rows, profiles_from_rows
from registry.models.corredor.zones import load_zones


def stream(owner_col, owner, idx, size, stride, access):
    return {owner_col: owner, "stream_index": idx, "size_elems": size, "stride_bytes": stride, "dtype": "f64",
            "elem_bytes": 8, "access": access, "pattern": "seq"}


@pytest.fixture
def registry(tmp_path):
    reg = open_registry(f"duckdb:///{tmp_path / 'r.duckdb'}")
    now = utcnow()
    with reg.begin() as conn:
        insert_rows(conn, "microbenchmarks", [{"ub_id": 1, "name": "mbw2", "family": "thesis", "n_streams": 2}])
        insert_rows(conn, "ub_configs", [
            {"config_id": 1, "ub_id": 1, "config_key": "mbw2/a", "threads": 2, "placement": "compact"},
            {"config_id": 2, "ub_id": 1, "config_key": "mbw2/b", "threads": 2, "placement": "compact"}])
        # stored out of order on purpose: pairing follows stream_index, not row order
        insert_rows(conn, "ub_streams", [stream("config_id", 1, 1, 4_000_000, 8, "P"),
                                         stream("config_id", 1, 0, 16_000_000, 8, "C"),
                                         stream("config_id", 2, 0, 16_000_000, 8, "C"),
                                         stream("config_id", 2, 1, 4_000_000, 8, "C")])
        insert_rows(conn, "nodes", [{"node_id": 1, "name": "two", "source": "profile", "created_at": now}])
        insert_rows(conn, "apps", [{"app_id": 1, "name": "mm", "created_at": now}])
        insert_rows(conn, "traces", [{"trace_id": 1, "uid": "t1", "app_id": 1, "node_id": 1, "status": "ok",
                                      "source": "trace", "started_at": now, "wall_s": 12.0}])
        insert_rows(conn, "phases", [
            {"phase_id": 1, "trace_id": 1, "idx": 0, "name": "kernel", "method": "omp", "start_s": 1.0,
             "end_s": 11.0, "weight": 10 / 12, "time_s": 10.0, "iterations": 2e9},
            {"phase_id": 2, "trace_id": 1, "idx": 1, "name": "init", "method": "omp", "start_s": 0.0,
             "end_s": 1.0, "weight": 1 / 12, "time_s": 1.0, "iterations": None}])
        insert_rows(conn, "phase_streams", [stream("phase_id", 1, 0, 16_100_000, 8, "C"),
                                            stream("phase_id", 1, 1, 4_000_000, 8, "P")])
    yield reg
    reg.close()


def test_rows_to_profiles_phases_and_a_match(registry):
    with registry.connect() as conn:
        ub_rows = conn.execute(sa.text("SELECT c.config_key, s.* FROM ub_streams s "
                                       "JOIN ub_configs c ON c.config_id = s.config_id")).mappings().all()
        phase_rows = conn.execute(sa.text("SELECT * FROM phases")).mappings().all()
        ps_rows = conn.execute(sa.text("SELECT * FROM phase_streams")).mappings().all()
        zones = load_zones(conn)
    profiles = profiles_from_rows(ub_rows, {"mbw2/a": 0.005, "mbw2/b": 0.005, "absent": 1.0})
    assert [p.config for p in profiles] == ["mbw2/a", "mbw2/b"]
    assert [s.access for s in profiles[0].streams] == ["C", "P"]          # by stream_index
    phases = phases_from_rows(phase_rows, ps_rows)
    assert [p.name for p in phases] == ["kernel"]                          # 'init' has no streams
    assert phases[0].tpi_us == pytest.approx(0.005) and phases[0].weight == pytest.approx(10 / 12)  # 10 s / 2e9
    model = CorredorModel(zones).fit(profiles=profiles, base_node="two",
                                     node_tpi={"mbw2/a": {"two": 0.005, "one": 0.009}})
    (pred,) = model.predict_phases(phases, ["one"], total_s=12.0)
    assert pred.explanation["phases"][0]["winner"] == "mbw2/a"           # C,P beats C,C on access
    assert pred.explanation["phases"][0]["estimate_s"] == pytest.approx(18.0)
    assert pred.explanation["coverage"] == pytest.approx(10 / 12)
