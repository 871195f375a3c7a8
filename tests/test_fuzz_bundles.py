"""Fuzzing the bundle reader: damaged bundles end in a clear error or a correct import."""

import shutil

import pytest
import sqlalchemy as sa
from fuzz_bundles import damage, expected_rows, run_case
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from registry_data import populate

from registry.io.bundle import export_bundle
from registry.db import open_registry


@pytest.fixture(scope="module")
def good_bundle(tmp_path_factory):
    """A valid bundle ('good') and an empty registry ('empty.duckdb') that each case copies."""
    root = tmp_path_factory.mktemp("fuzz")
    reg = open_registry(f"duckdb:///{root / 'src.duckdb'}")
    with reg.begin() as conn:
        populate(conn)
    with reg.connect() as conn:
        export_bundle(conn, root / "good")
    reg.close()
    open_registry(f"duckdb:///{root / 'empty.duckdb'}").close()
    return root


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(damage(), min_size=1, max_size=3))
def test_damaged_bundles(good_bundle, edits):
    shutil.copyfile(good_bundle / "empty.duckdb", good_bundle / "dst.duckdb")
    outcome = run_case(good_bundle / "good", good_bundle / "work", f"duckdb:///{good_bundle / 'dst.duckdb'}", edits)
    event(outcome)
    assert outcome in ("rejected", "imported")


def test_the_undamaged_bundle_imports_exactly(good_bundle, tmp_path):
    """The oracle holds on the intact bundle (no edit), and it sees a row the import would lose."""
    shutil.copyfile(good_bundle / "empty.duckdb", tmp_path / "dst.duckdb")
    assert run_case(good_bundle / "good", tmp_path / "work", f"duckdb:///{tmp_path / 'dst.duckdb'}", []) == "imported"
    expected = expected_rows(good_bundle / "good")
    assert all(len(expected[t]) > 0 for t in ("nodes", "profile_reps", "signatures", "phase_streams", "predictions"))
    reg = open_registry(f"duckdb:///{tmp_path / 'dst.duckdb'}")
    with reg.begin() as conn:
        conn.execute(sa.text("DELETE FROM profile_reps WHERE rep = 2"))
    reg.close()
    with pytest.raises(AssertionError, match="profile_reps"):
        run_case(good_bundle / "good", tmp_path / "work", f"duckdb:///{tmp_path / 'dst.duckdb'}", [])
