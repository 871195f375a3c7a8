"""Packed profiles (registry.profile.vectors): what `nodereg match` reads of each profile is the same
whether it comes from the packed row or from the profile's runs through SQL, on both backends;
writers pack, bundles carry nothing packed and the importer packs again, removals take it along."""

import numpy as np
import pytest
import sqlalchemy as sa
from conftest import both_backends
from fleet_data import host_record, memory_only, store_hosts
from registry_data import profile_at_speeds

from registry.db import open_registry
from registry.doctor import check, fix
from registry.errors import UserError
from registry.io.bundle import export_bundle, import_bundle
from registry.match import references as refs_mod
from registry.profile.store import store_profile
from registry.profile.vectors import store_vectors

FIELDS = ("node", "key", "threads", "placement", "combo", "throughput")


def _profiles(reg, base: str) -> dict:
    with reg.connect() as conn:
        p = refs_mod.load_profiles(conn, base)
    names = p.node_names.astype(str)
    # runs as sets of rows with names for codes: codes depend on what each read met first
    rows = sorted(zip(names[p.node].tolist(), p.key_names[p.key].astype(str).tolist(), p.threads.tolist(),
                      p.placement_names[p.placement].astype(str).tolist(), p.combo.tolist(),
                      p.throughput.tolist()))
    return {"rows": rows, "features": p.features.values.tolist(), "cpus": p.n_cpus}


def _summaries(reg) -> list[tuple]:
    """v_profile_summary (counts of runs, unstable runs, runs with a cv; their cv's squares summed)."""
    with reg.connect() as conn:
        return [(p, r, u, k, round(c, 12)) for p, r, u, k, c in conn.execute(sa.text(
            "SELECT profile_id, runs, unstable, cv_runs, cv2_sum FROM v_profile_summary ORDER BY profile_id"))]


def _count(reg, table: str) -> int:
    with reg.connect() as conn:
        return conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar()


@both_backends
def test_packed_profiles_read_as_their_runs_do(db_url):
    """Nodes written row by row (not packed: the SQL path) are packed afterwards: load_profiles
    gives the same runs, levels and throughputs to the last bit, and reads the packed rows."""
    reg = open_registry(db_url)
    with reg.begin() as conn:
        for node, cpus in (("fast", 2), ("b", 2), ("one", 1)):
            profile_at_speeds(conn, node, cpus, base=node == "b")
        # dispersion and unstable flags as real profiles have them (some runs without a cv)
        conn.execute(sa.text("UPDATE profile_runs SET cv = CASE WHEN run_id % 4 = 0 THEN NULL ELSE 0.01 * (run_id % 5) "
                             "END, unstable = (run_id % 3 = 0)"))
    unpacked, summaries = _profiles(reg, "b"), _summaries(reg)
    with reg.begin() as conn:
        ids = conn.execute(sa.text("SELECT profile_id FROM profiles")).scalars().all()
        assert store_vectors(conn, ids) == 3
    packed = _profiles(reg, "b")
    assert packed == unpacked
    assert _summaries(reg) == summaries and all(s[1] > 0 and s[3] > 0 for s in summaries)
    assert len(packed["rows"]) == _count(reg, "profile_runs")
    # the packed rows are what is read: damage one and the read changes
    with reg.begin() as conn:
        conn.execute(sa.text("UPDATE profile_vectors SET data = :d, runs = 1 WHERE profile_id = :p"),
                     {"d": np.zeros(1, dtype=[("c", "<i4"), ("l", "<i1"), ("t", "<f8")]).tobytes(), "p": ids[0]})
    assert _profiles(reg, "b") != unpacked
    reg.close()


@both_backends
def test_packed_runs_are_read_a_chunk_at_a_time_into_arrays_of_any_bound(db_url, monkeypatch):
    """load_profiles fills its arrays a chunk of packed rows at a time (one row per chunk here), sized
    by a bound read before: one too small (profiles stored after it was read) grows them, one too
    large leaves the rest unused; either way the same runs are read."""
    from registry.db import read as read_mod
    from registry.profile import vectors as vectors_mod

    reg = open_registry(db_url)
    with reg.begin() as conn:
        for node, cpus in (("fast", 2), ("b", 2), ("one", 1)):
            profile_at_speeds(conn, node, cpus, base=node == "b")
    unpacked = _profiles(reg, "b")
    with reg.begin() as conn:
        assert store_vectors(conn, conn.execute(sa.text("SELECT profile_id FROM profiles")).scalars().all()) == 3
    chunks = []

    def one_row_each(conn, sql, params=None, rows=1000):
        for chunk in read_mod.fetch_chunks(conn, sql, params, rows=1):
            chunks.append(len(chunk))
            yield chunk
    monkeypatch.setattr(vectors_mod, "fetch_chunks", one_row_each)
    for bound in ("SELECT 1, 0, 0", "SELECT 10 * sum(runs), 0, 0 FROM profile_vectors", refs_mod._PACKED_BOUND):
        monkeypatch.setattr(refs_mod, "_PACKED_BOUND", bound)
        chunks.clear()
        assert _profiles(reg, "b") == unpacked, bound
        assert chunks == [1, 1, 1]
    reg.close()


def test_freed_arrays_are_reused_without_page_faults():
    """After registry.match.heap.keep_freed_memory (glibc), an array of 3 million entries made again
    after it was freed reuses the freed pages: no page faults, where the C library's default
    returns them to the kernel and faults them in again."""
    import subprocess
    import sys

    code = """import resource, sys
import numpy as np
from registry.match.heap import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
a = np.ones(3_000_000); del a
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    a = np.ones(3_000_000); del a
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)"""
    faults = {how: int(subprocess.run([sys.executable, "-c", code, how], capture_output=True, text=True,
                                      check=True).stdout) for how in ("keep", "default")}
    assert faults["keep"] * 4 < faults["default"], faults


def test_match_loads_numpy_with_one_blas_thread_unless_told_otherwise():
    """registry.match.blas.one_blas_thread, called before numpy loads: OpenBLAS starts no thread of
    its own (the process has one thread, where the default starts one per CPU on a machine of
    several); a count the user set is kept; once numpy is loaded it changes nothing."""
    import os
    import subprocess
    import sys

    code = """import os, sys
from registry.match.blas import one_blas_thread
if sys.argv[1] == "late":
    import numpy
print(one_blas_thread(), os.environ.get("OPENBLAS_NUM_THREADS"))
import numpy
print(len(os.listdir("/proc/self/task")))"""

    def run(how: str, **env: str) -> list[str]:
        clean = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                                                                   "OMP_NUM_THREADS")}
        return subprocess.run([sys.executable, "-c", code, how], capture_output=True, text=True, check=True,
                              env={**clean, **env}).stdout.split("\n")[:2]

    assert run("early") == ["True 1", "1"]
    assert run("early", OPENBLAS_NUM_THREADS="3")[0] == "True 3"
    late = run("late")
    assert late[0] == "False None"
    if (os.cpu_count() or 1) > 1:   # the default: a BLAS thread per CPU
        assert int(late[1]) > 1


def test_a_stored_profile_is_packed_and_a_node_of_several_hosts_is_read_through_sql(db_url):
    """store_profile packs what it stores; a node profiled on two hosts takes the median over them
    (SQL), whether or not its profiles are packed."""
    reg = open_registry(db_url)
    store_hosts(reg, "single", {"h0": 1.0})
    store_hosts(reg, "twin", {"h1": 1.0, "h2": memory_only(0.5)})
    assert _count(reg, "profile_vectors") == 3
    with reg.connect() as conn:
        packed_runs = conn.execute(sa.text("SELECT sum(runs) FROM profile_vectors")).scalar()
    assert packed_runs == _count(reg, "profile_runs")
    with_packed = _profiles(reg, "single")
    with reg.begin() as conn:
        conn.execute(sa.text("DELETE FROM profile_vectors"))
    assert _profiles(reg, "single") == with_packed
    twin = [r for r in with_packed["rows"] if r[0] == "twin"]
    single = {r[1:5]: r[5] for r in with_packed["rows"] if r[0] == "single"}
    memory = [r for r in twin if "memory" in r[1]]
    assert memory and all(r[5] == pytest.approx(single[r[1:5]] * 0.75) for r in memory)   # median of 1 and 0.5
    with reg.begin() as conn:    # packed again, one host not known: a host of its own, as v_latest_profile has it
        assert store_vectors(conn, conn.execute(sa.text("SELECT profile_id FROM profiles")).scalars().all()) == 3
        conn.execute(sa.text("UPDATE profiles SET host = NULL WHERE host = 'h2'"))
    assert _profiles(reg, "single") == with_packed
    reg.close()


def test_bundles_leave_packed_rows_out_and_the_importer_packs_again(tmp_path):
    src = open_registry(f"duckdb:///{tmp_path / 'src.duckdb'}")
    store_hosts(src, "n1", {"h0": 1.0})
    store_hosts(src, "n2", {"h1": 2.0})
    with src.connect() as conn:
        manifest = export_bundle(conn, tmp_path / "bundle")
    assert "profile_vectors" not in manifest["tables"]
    dst = open_registry(f"duckdb:///{tmp_path / 'dst.duckdb'}")
    store_hosts(dst, "other", {"h9": 3.0})   # ids of the two registries differ
    dst.write(lambda conn: import_bundle(conn, tmp_path / "bundle"))
    assert _count(dst, "profile_vectors") == 3
    ours = [r for r in _profiles(dst, "n1")["rows"] if r[0] != "other"]
    theirs = _profiles(src, "n1")["rows"]
    assert [r[:4] + r[5:] for r in ours] == [r[:4] + r[5:] for r in theirs]   # config ids are the registry's own
    src.close()
    dst.close()


def test_removing_a_node_removes_its_packed_profiles(cli, db_url):
    reg = open_registry(db_url)
    store_hosts(reg, "keep", {"h0": 1.0})
    store_hosts(reg, "gone", {"h1": 1.0})
    reg.close()
    assert cli("nodes", "rm", "gone", "--yes").code == 0
    reg = open_registry(db_url)
    with reg.connect() as conn:
        left = conn.execute(sa.text("SELECT n.name FROM profile_vectors v JOIN profiles p ON p.profile_id = "
                                    "v.profile_id JOIN nodes n ON n.node_id = p.node_id")).scalars().all()
        orphans = conn.execute(sa.text("SELECT count(*) FROM profile_vectors WHERE profile_id NOT IN "
                                       "(SELECT profile_id FROM profiles)")).scalar()
    assert left == ["keep"] and orphans == 0
    reg.close()


def test_a_record_of_the_wrong_length_is_a_clear_error(db_url):
    reg = open_registry(db_url)
    record = host_record("n", "h")
    reg.write(lambda conn: store_profile(conn, record))
    with reg.begin() as conn:
        conn.execute(sa.text("UPDATE profile_vectors SET runs = runs + 1"))
    with reg.connect() as conn, pytest.raises(UserError, match="do not hold their counts of runs.*doctor --fix"):
        refs_mod.load_profiles(conn, "n")
    with reg.connect() as conn:
        assert [(p.kind, p.table) for p in check(conn)] == [("incomplete", "profile_vectors")]
    reg.write(fix)   # the damaged packed row goes; the profile is read from its runs
    runs = _count(reg, "profile_runs")
    with reg.connect() as conn:
        assert check(conn) == [] and refs_mod.load_profiles(conn, "n").combo.size == runs
    reg.close()


@both_backends
def test_the_quick_readers_stop_at_a_damaged_packed_row_and_stay_usable(db_url):
    """Through the readers `match` uses (registry/db/duckread.py, pgread.py: PostgreSQL's packed rows
    streamed in chunks), a damaged row is the same one-line error, and the reader reads on after it."""
    from registry.db import duckread, pgread

    reg = open_registry(db_url)
    for node in ("n", "m"):
        reg.write(lambda conn, node=node: store_profile(conn, host_record(node, f"h-{node}")))
    with reg.begin() as conn:
        conn.execute(sa.text("UPDATE profile_vectors SET runs = runs + 1 WHERE profile_id = "
                             "(SELECT max(profile_id) FROM profile_vectors)"))
    reg.close()
    quick = duckread.open_current(db_url.removeprefix("duckdb:///")) or pgread.open_current(db_url)
    assert quick is not None
    with quick.connect() as conn:
        with pytest.raises(UserError, match="do not hold their counts of runs.*doctor --fix"):
            refs_mod.load_profiles(conn, "n")
        assert sorted(r.name for r in conn.rows("SELECT name FROM nodes")) == ["m", "n"]
    quick.close()


def test_the_migration_packs_the_profiles_a_registry_holds(tmp_path):
    from registry.db.migrate import migrate

    reg = open_registry(f"duckdb:///{tmp_path / 'old.duckdb'}", migrate=False)
    migrate(reg.engine, target=21)
    with reg.begin() as conn:
        for node, cpus in (("fast", 2), ("b", 2)):
            profile_at_speeds(conn, node, cpus, base=node == "b")
    migrate(reg.engine)
    assert _count(reg, "profile_vectors") == _count(reg, "profiles") == 2
    packed = _profiles(reg, "b")
    with reg.begin() as conn:
        conn.execute(sa.text("DELETE FROM profile_vectors"))
    assert _profiles(reg, "b") == packed
    reg.close()


@both_backends
@pytest.mark.empty_registry
def test_migration_23_stores_packed_profiles_uncompressed(db_url):
    """Every match reads every packed row: PostgreSQL's pglz compression of them cost 0.06 s of a
    10,000-node match (docs/match.md). After migration 23 the column is stored uncompressed and so is
    a row written before it; DuckDB is unchanged and reads the same."""
    from registry.db.migrate import migrate

    reg = open_registry(db_url, migrate=False)
    migrate(reg.engine, target=22)
    with reg.begin() as conn:
        profile_at_speeds(conn, "b", 2, base=True)
        pid = conn.execute(sa.text("SELECT profile_id FROM profiles")).scalar_one()
        conn.execute(sa.text("DELETE FROM profile_vectors"))
        runs = np.zeros(600, dtype=[("c", "<i4"), ("l", "<i1"), ("t", "<f8")])   # 7.8 kB, compressible
        conn.execute(sa.text("INSERT INTO profile_vectors VALUES (:p, 600, 0, 0, NULL, :d)"), {"p": pid, "d": runs.tobytes()})

    def sizes() -> tuple[int, int]:
        with reg.connect() as conn:
            if reg.dialect != "postgresql":
                n = conn.execute(sa.text("SELECT octet_length(data) FROM profile_vectors")).scalar_one()
                return n, n
            return tuple(conn.execute(sa.text("SELECT pg_column_size(data), octet_length(data) FROM profile_vectors")).one())

    stored, length = sizes()
    assert length == runs.nbytes and (stored < length) == (reg.dialect == "postgresql")
    migrate(reg.engine)
    assert sizes() == (runs.nbytes, runs.nbytes)
    with reg.connect() as conn:
        assert conn.execute(sa.text("SELECT data FROM profile_vectors")).scalar_one() == runs.tobytes()
        if reg.dialect == "postgresql":
            assert conn.execute(sa.text("SELECT attstorage FROM pg_attribute WHERE attrelid = 'profile_vectors'::regclass "
                                        "AND attname = 'data'")).scalar_one() == "e"
    reg.close()
