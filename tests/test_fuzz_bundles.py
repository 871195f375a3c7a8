"""Fuzzing the bundle reader: damaged bundles end in a clear error or a correct import."""

import pytest
from fuzz_bundles import damage, run_case
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from registry_data import populate

from registry.bundle import export_bundle
from registry.db import open_registry


@pytest.fixture(scope="module")
def good_bundle(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    reg = open_registry(f"duckdb:///{root / 'src.duckdb'}")
    with reg.begin() as conn:
        populate(conn)
    with reg.connect() as conn:
        export_bundle(conn, root / "good")
    reg.close()
    return root


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(damage(), min_size=1, max_size=3))
def test_damaged_bundles(good_bundle, edits):
    outcome = run_case(good_bundle / "good", good_bundle / "work", f"duckdb:///{good_bundle / 'dst.duckdb'}", edits)
    assert outcome in ("rejected", "imported")
