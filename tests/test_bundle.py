"""Bundles: lossless round trip, idempotent import, name clashes, corrupt input."""

import json
import zipfile

import pytest
import sqlalchemy as sa
from conftest import assert_one_line_error, both_backends
from registry_data import populate

from registry.db import open_registry

# every stored fact, joined to the identities its surrogate ids stand for (the ids are then dropped)
CANONICAL = {
    "nodes": "SELECT * FROM nodes",
    "node_caches": "SELECT n.name AS node, c.* FROM node_caches c JOIN nodes n ON n.node_id = c.node_id",
    "profile": "SELECT * FROM v_profile",
    "streams": "SELECT c.config_key, s.* FROM ub_streams s JOIN ub_configs c ON c.config_id = s.config_id",
    "profiles": "SELECT n.name AS node, p.* FROM profiles p JOIN nodes n ON n.node_id = p.node_id",
    "reps": "SELECT p.uid, c.config_key, x.rep, x.time_s FROM profile_reps x JOIN profile_runs r ON r.run_id = x.run_id "
            "JOIN profiles p ON p.profile_id = r.profile_id JOIN ub_configs c ON c.config_id = r.config_id",
    "run_sigs": "SELECT p.uid, c.config_key, s.source, s.metric, s.value FROM signatures s "
                "JOIN profile_runs r ON s.owner_kind = 'profile_run' AND r.run_id = s.owner_id "
                "JOIN profiles p ON p.profile_id = r.profile_id JOIN ub_configs c ON c.config_id = r.config_id",
    "phase_sigs": "SELECT t.uid, ph.idx, s.source, s.metric, s.value FROM signatures s "
                  "JOIN phases ph ON s.owner_kind = 'phase' AND ph.phase_id = s.owner_id "
                  "JOIN traces t ON t.trace_id = ph.trace_id",
    "traces": "SELECT a.name AS app, n.name AS node, t.* FROM traces t JOIN apps a ON a.app_id = t.app_id "
              "JOIN nodes n ON n.node_id = t.node_id",
    "samples": "SELECT t.uid, s.* FROM trace_samples s JOIN traces t ON t.trace_id = s.trace_id",
    "phases": "SELECT t.uid, ph.* FROM phases ph JOIN traces t ON t.trace_id = ph.trace_id",
    "phase_streams": "SELECT t.uid, ph.idx, s.* FROM phase_streams s JOIN phases ph ON ph.phase_id = s.phase_id "
                     "JOIN traces t ON t.trace_id = ph.trace_id",
    "runs": "SELECT a.name AS app, n.name AS node, r.* FROM runs r JOIN apps a ON a.app_id = r.app_id "
            "JOIN nodes n ON n.node_id = r.node_id",
    "models": "SELECT * FROM models",
    "predictions": "SELECT t.uid AS trace, a.name AS app, n.name AS node, p.* FROM predictions p "
                   "JOIN apps a ON a.app_id = p.app_id JOIN nodes n ON n.node_id = p.node_id "
                   "LEFT JOIN traces t ON t.trace_id = p.trace_id",
}
SURROGATE = {"node_id", "ub_id", "config_id", "profile_id", "run_id", "app_id", "trace_id", "phase_id", "model_id",
             "prediction_id", "owner_id"}


def canonical(url: str) -> dict:
    reg = open_registry(url)
    out = {}
    with reg.connect() as conn:
        for name, query in CANONICAL.items():
            result = conn.execute(sa.text(query))
            keep = [i for i, k in enumerate(result.keys()) if k not in SURROGATE]
            out[name] = sorted(tuple(repr(row[i]) for i in keep) for row in result)
    reg.close()
    return out


@pytest.fixture
def source_url(tmp_path):
    url = f"duckdb:///{tmp_path / 'source.duckdb'}"
    reg = open_registry(url)
    with reg.begin() as conn:
        populate(conn, node="n1", app="a1", tpi=0.01)
        populate(conn, node="n2", app="a2", model="Other CPU", tpi=0.02)
    reg.close()
    return url


@both_backends
@pytest.mark.parametrize("name", ["bundle", "bundle.zip"])
def test_round_trip_is_lossless_and_idempotent(cli, tmp_path, source_url, db_url, name):
    path = tmp_path / name
    assert cli("--db", source_url, "export", path).code == 0
    manifest = json.loads(zipfile.ZipFile(path).read("manifest.json")) if name.endswith(".zip") else \
        json.loads((path / "manifest.json").read_text())
    assert manifest["format"] == "nodereg-bundle" and manifest["schema_version"] >= 2
    assert manifest["tool_version"] and manifest["created_at"] and manifest["tables"]["nodes"] == 2
    first = cli("import", "bundle", path, "--json")
    assert first.code == 0, first.err
    assert json.loads(first.out)["added"]["profile_reps"] == 12
    assert canonical(db_url) == canonical(source_url)
    again = cli("import", "bundle", path, "--json")
    assert json.loads(again.out)["added"] == {}
    assert canonical(db_url) == canonical(source_url)


@both_backends
def test_import_merges_into_existing_registry(cli, tmp_path, source_url, sql_reader, db_url):
    reg = open_registry(db_url)
    with reg.begin() as conn:
        populate(conn, node="n1", app="a1", tpi=0.01)  # same node hardware, its own profile
    reg.close()
    cli("--db", source_url, "export", tmp_path / "b")
    res = json.loads(cli("import", "bundle", tmp_path / "b", "--json").out)
    assert res["added"]["nodes"] == 1 and res["added"]["profiles"] == 2  # n2 new; both profiles are new facts
    counts = json.loads(cli("sql", "SELECT (SELECT count(*) FROM profiles) p, (SELECT count(*) FROM nodes) n",
                            "-f", "json").out)[0]
    assert counts == {"p": 3, "n": 2}


@both_backends
def test_name_clash_needs_rename(cli, tmp_path, source_url, db_url):
    reg = open_registry(db_url)
    with reg.begin() as conn:
        populate(conn, node="n2", app="other", model="Different CPU")
    reg.close()
    cli("--db", source_url, "export", tmp_path / "b")
    before = canonical(db_url)
    assert_one_line_error(cli("import", "bundle", tmp_path / "b"), "node 'n2' exists", "--rename")
    assert canonical(db_url) == before  # nothing half-written
    res = json.loads(cli("import", "bundle", tmp_path / "b", "--rename", "--json").out)
    assert res["renamed"] == {"n2": "n2-2"}
    names = [r["name"] for r in json.loads(cli("nodes", "--json").out)]
    assert names == ["n1", "n2", "n2-2"]
    model = json.loads(cli("nodes", "show", "n2-2", "--json").out)["cpu_model"]
    assert model == "Other CPU"


def test_bad_bundles(cli, tmp_path, source_url):
    assert_one_line_error(cli("import", "bundle", tmp_path / "missing"), "does not exist")
    junk = tmp_path / "junk.zip"
    junk.write_bytes(b"PK\x03\x04 not really a zip")
    assert_one_line_error(cli("import", "bundle", junk), "not a readable directory or zip")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_one_line_error(cli("import", "bundle", empty), "manifest.json")
    cli("--db", source_url, "export", tmp_path / "b")
    (tmp_path / "b" / "profiles.parquet").write_bytes(b"garbage")
    assert_one_line_error(cli("import", "bundle", tmp_path / "b"), "profiles.parquet is unreadable")
    cli("--db", source_url, "export", tmp_path / "c")
    manifest = json.loads((tmp_path / "c" / "manifest.json").read_text())
    (tmp_path / "c" / "manifest.json").write_text(json.dumps({**manifest, "schema_version": 999}))
    assert_one_line_error(cli("import", "bundle", tmp_path / "c"), "newer nodereg")
    assert_one_line_error(cli("--db", source_url, "export", tmp_path / "c"), "already exists")
