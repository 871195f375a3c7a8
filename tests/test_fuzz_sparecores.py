"""Fuzzing the Spare Cores reader: damaged server folders import what is intact and skip the rest."""

import os
import tempfile
from pathlib import Path

import pytest
from fuzz_sparecores import check_case, sparecores_case
from hypothesis import HealthCheck, event, given, settings

from registry.db import open_registry

# 60 cases per run, as the other readers; NODEREG_FUZZ_EXAMPLES=N searches longer
EXAMPLES = int(os.environ.get("NODEREG_FUZZ_EXAMPLES", 60))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def empty_registry(tmp_path_factory):
    path = tmp_path_factory.mktemp("fuzz-sparecores") / "empty.duckdb"
    open_registry(f"duckdb:///{path}").close()
    return path


@FUZZ
@given(case=sparecores_case())
def test_damaged_sparecores_folders(cli, empty_registry, case):
    with tempfile.TemporaryDirectory(dir=empty_registry.parent) as work:
        event(check_case(cli, empty_registry, Path(work), case))
