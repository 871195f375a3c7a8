"""scripts/crossarch_errors.py: a model's cross-node error split by app kind, vCPU extrapolation and
architecture, each slice's share of the tail (predictions above the overall 90th percentile)."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("crossarch_errors", ROOT / "scripts" / "crossarch_errors.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_errors_split_by_kind_extrapolation_and_tail_share(script):
    nodes = pd.DataFrame({"architecture": ["x86_64", "x86_64", "aarch64", "aarch64"],
                          "cpu_family": ["Zen 4", "Zen 3", "Graviton3", "Graviton4"],
                          "n_cpus": [2, 4, 64, 8]}, index=["a", "b", "big", "c"])
    rows = []
    for i in range(20):   # a one-CPU app predicted well everywhere, an all-CPU one 2x too fast on the big node
        rows.append(("m", "compression:zstd-1:compress:1t", "c", "a;b", 1.05, 1.0))
        rows.append(("m", "compression:zstd-1:compress:all", "c", "a;b", 1.1, 1.0))
        if i < 4:
            rows.append(("m", "compression:zstd-1:compress:all", "big", "a;b", 0.5, 1.0))
    frame = script.annotate(pd.DataFrame(rows, columns=["model", "app", "node", "calibration", "predicted_s",
                                                        "actual_s"]), nodes)
    kinds = {r["kind"]: r for r in script.split(frame, "kind")}
    assert kinds["compression:1t"]["median err %"] == pytest.approx(5.0)
    assert kinds["compression:all"]["tail share %"] == 100.0 and kinds["compression:1t"]["tail share %"] == 0.0
    bins = {r["vcpus_over_calibration"]: r for r in script.split(frame, "vcpus_over_calibration")}
    assert list(bins) == ["1-2", "> 8"]          # in the bins' order: 8 / 4 and 64 / 4 vCPUs
    assert bins["> 8"]["median log error"] == pytest.approx(np.log(0.5), abs=1e-3)
    assert {r["architecture"] for r in script.split(frame, "architecture")} == {"aarch64"}
    assert script.app_kind("geekbench:clang:multi") == "geekbench:multi" and script.app_kind("myapp") == "all CPUs"


def test_bad_input_is_a_one_line_error(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    for args in ([str(tmp_path / "missing.csv")], [str(bad)]):
        out = subprocess.run([sys.executable, str(ROOT / "scripts" / "crossarch_errors.py"), *args, "--db",
                              f"duckdb:///{tmp_path}/none.duckdb"], capture_output=True, text=True)
        assert out.returncode != 0 and out.stderr.startswith("error: ") and len(out.stderr.strip().splitlines()) == 1
