"""Fuzzing the runs CSV, Lumos, Spare Cores and trace-file readers: damaged inputs end in a clear error or a
correct import."""

import os
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from fuzz_readers import (TraceTemplate, check_lumos_case, check_runs_case, check_trace_case, lumos_case,
                          runs_csv, trace_file)
from fuzz_sparecores import check_case as check_sparecores_case
from fuzz_sparecores import sparecores_case
from hypothesis import HealthCheck, event, given, settings
from registry_data import profile_at_speeds, three_phase_trace

from registry import doctor
from registry.db import open_registry

# 60 cases per reader and run (docs/storage.md counts them); NODEREG_FUZZ_EXAMPLES=N searches longer
EXAMPLES = int(os.environ.get("NODEREG_FUZZ_EXAMPLES", 60))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def empty_registry(tmp_path_factory):
    """A migrated, empty registry file: each case works on a copy."""
    path = tmp_path_factory.mktemp("fuzz-readers") / "empty.duckdb"
    open_registry(f"duckdb:///{path}").close()
    return path


@FUZZ
@given(case=runs_csv())
def test_damaged_runs_csv(cli, empty_registry, case):
    with tempfile.TemporaryDirectory(dir=empty_registry.parent) as work:
        event(check_runs_case(cli, empty_registry, Path(work), case))


@FUZZ
@given(case=lumos_case())
def test_damaged_lumos_folders(cli, empty_registry, case):
    with tempfile.TemporaryDirectory(dir=empty_registry.parent) as work:
        event(check_lumos_case(cli, empty_registry, Path(work), case))


@FUZZ
@given(case=sparecores_case())
def test_damaged_sparecores_folders(cli, empty_registry, case):
    with tempfile.TemporaryDirectory(dir=empty_registry.parent) as work:
        event(check_sparecores_case(cli, empty_registry, Path(work), case))


@pytest.fixture(scope="module")
def profiled_registry(tmp_path_factory):
    """Three profiled nodes (registry_data.profile_at_speeds), no apps or predictions yet; and a valid trace document on the base."""
    path = tmp_path_factory.mktemp("fuzz-trace") / "profiled.duckdb"
    reg = open_registry(f"duckdb:///{path}")
    with reg.begin() as conn:
        for node, cpus in (("b", 2), ("fast", 2), ("one", 1)):
            profile_at_speeds(conn, node, cpus, base=node == "b")
    with reg.connect() as conn:
        problems = doctor.check(conn)       # its profiles have no repetitions: 'incomplete'
    reg.close()
    trace = replace(three_phase_trace(), samples={"t_s": [0.1, 0.2, 0.3], "cpu_util": [1.9, 2.0, None]})
    return TraceTemplate(path, problems, trace.to_dict())


@FUZZ
@given(case=trace_file())
def test_damaged_trace_files(cli, profiled_registry, case):
    with tempfile.TemporaryDirectory(dir=profiled_registry.registry.parent) as work:
        event(check_trace_case(cli, profiled_registry, Path(work), case))
