"""The node's MPI for the tests that launch ranks (test_mpi_kernels, test_pmpi_shim, test_jacobi): a skip with
the reason where it is missing, a failure with NODEREG_REQUIRE_MPI=1 (.ci/run installs Open MPI)."""

import os
from pathlib import Path

import pytest

from registry.microbench import mpi


@pytest.fixture(scope="module")
def node_mpi(tmp_path_factory):
    """The node's MPI, with a temporary build cache (NODEREG_BUILD_CACHE) for the module's builds."""
    why = mpi.missing()
    if why:
        if os.environ.get("NODEREG_REQUIRE_MPI"):
            pytest.fail(f"NODEREG_REQUIRE_MPI is set but {why}")
        pytest.skip(f"{why}: {mpi.INSTALL_HINT}")
    old = os.environ.get("NODEREG_BUILD_CACHE")
    os.environ["NODEREG_BUILD_CACHE"] = str(tmp_path_factory.mktemp("mpi-build"))
    yield mpi.find()
    if old is None:
        del os.environ["NODEREG_BUILD_CACHE"]
    else:
        os.environ["NODEREG_BUILD_CACHE"] = old


@pytest.fixture
def path_without_mpi(tmp_path, monkeypatch):
    """PATH as it is, less every MPI program (a directory of links to everything else)."""
    bare = tmp_path / "bin"
    bare.mkdir()
    for folder in os.environ["PATH"].split(os.pathsep):
        for entry in Path(folder).glob("*") if Path(folder).is_dir() else ():
            name = entry.name
            if not name.startswith(("mpi", "orte", "ompi", "oshrun")) and not (bare / name).exists():
                (bare / name).symlink_to(entry)
    monkeypatch.setenv("PATH", str(bare))
    monkeypatch.delenv("NODEREG_MPIRUN", raising=False)
