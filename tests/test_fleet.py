"""`nodereg fleet` without a cluster: the batch script (its text, and run by bash as a task would
be, with a stand-in for nodereg), task states from what Slurm and the tasks left, `collect`, and
every bad input as one line. The real cluster: tests/test_fleet_slurm.py."""

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import assert_one_line_error
from fleet_data import store_hosts

from registry.db import open_registry
from registry.fleet import job as job_mod
from registry.fleet import slurm, status

PG = "postgresql://nodereg@dbhost:5432/fleet"
# a stand-in for nodereg: logs its arguments; `export PATH` writes a file there; FAKE_RC is its exit status
FAKE = """#!/bin/sh
echo "$*" >> "$FAKE_CALLS"
if [ "$3" = export ]; then echo bundle > "$4"; fi
exit "${FAKE_RC:-0}"
"""


def script_of(cli, *args: str) -> str:
    """The script `fleet submit ARGS --dry-run` prints (--dry-run goes before the profile's options)."""
    at = args.index("--") if "--" in args else len(args)
    res = cli(*args[:at], "--dry-run", *args[at:])
    assert res.code == 0, res.err
    return res.out


def test_dry_run_prints_the_batch_script(cli, tmp_path):
    text = script_of(cli, "--db", PG, "fleet", "submit", "gpu-a", "-w", "cn01,cn02,cn03", "-p", "batch",
                     "--exclusive", "--sbatch=--time=20", "--log-dir", str(tmp_path), "--",
                     "--quick", "--kernels", "triad,peak_fma")
    lines = text.splitlines()
    assert lines[0] == "#!/bin/bash"
    for directive in ("--array=0-2", "--nodes=1", "--ntasks=1", f"--output={tmp_path}/%A_%a.log",
                      "--partition=batch", "--exclusive", "--time=20"):
        assert f"#SBATCH {directive}" in lines
    assert "hosts=(cn01 cn02 cn03)" in lines and "node=gpu-a" in lines
    assert '"${nodereg[@]}" --db postgresql+psycopg://nodereg@dbhost:5432/fleet profile "$node" --host "$host" ' \
           "--quick --kernels triad,peak_fma" in lines
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0
    # nothing was submitted or written
    assert list(tmp_path.iterdir()) == []


def _run_task(tmp_path: Path, script: str, task: int, rc: int = 0) -> subprocess.CompletedProcess:
    env = {**os.environ, "SLURM_ARRAY_JOB_ID": "77", "SLURM_ARRAY_TASK_ID": str(task),
           "FAKE_CALLS": str(tmp_path / "calls"), "FAKE_RC": str(rc), "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True)


@pytest.fixture
def fake_nodereg(tmp_path) -> str:
    path = tmp_path / "fake-nodereg"
    path.write_text(FAKE)
    path.chmod(0o755)
    return str(path)


def test_a_task_profiles_its_host_and_writes_its_exit_status(cli, tmp_path, fake_nodereg):
    logs = tmp_path / "logs"
    text = script_of(cli, "--db", PG, "fleet", "submit", "my type", "-w", "cn01,cn02", "--log-dir", str(logs),
                     "--nodereg", fake_nodereg, "--", "--quick")
    logs.mkdir()
    assert _run_task(tmp_path, text, 1).returncode == 0
    assert (tmp_path / "calls").read_text() == \
        "--db postgresql+psycopg://nodereg@dbhost:5432/fleet profile my type --host cn02 --quick\n"
    assert (logs / "77_1.rc").read_text() == "0\n"
    failed = _run_task(tmp_path, text, 0, rc=3)
    assert failed.returncode == 3 and (logs / "77_0.rc").read_text() == "3\n"


def test_a_task_with_to_dir_leaves_a_whole_bundle_or_none(cli, tmp_path, fake_nodereg):
    logs, out = tmp_path / "logs", tmp_path / "bundles"
    text = script_of(cli, "fleet", "submit", "t", "-w", "cn01,cn02", "--to-dir", str(out), "--log-dir", str(logs),
                     "--nodereg", fake_nodereg, "--", "--quick")
    logs.mkdir()
    out.mkdir()
    assert _run_task(tmp_path, text, 1).returncode == 0
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls[0].startswith(f"--db duckdb:///{tmp_path}/tmp/") and calls[0].endswith("profile t --host cn02 --quick")
    assert " export " in calls[1]
    assert [p.name for p in out.iterdir()] == ["cn02_77.zip"]      # renamed into place, no .part left
    assert list((tmp_path / "tmp").iterdir()) == []                  # its scratch registry removed
    assert _run_task(tmp_path, text, 0, rc=2).returncode == 2
    assert [p.name for p in out.iterdir()] == ["cn02_77.zip"] and (logs / "77_0.rc").read_text() == "2\n"


def _job(tmp_path: Path, hosts: list[str], db_url: str = PG) -> job_mod.FleetJob:
    job = job_mod.FleetJob("t", hosts, ["vm"] * len(hosts), tmp_path, ["nodereg"], db_url=db_url, job_id="41",
                           submitted_at="2024-01-01T00:00:00")
    job.save()
    return job


def test_task_states_come_from_exit_files_then_squeue_then_sacct(tmp_path, monkeypatch):
    job = _job(tmp_path, ["a", "b", "c", "d", "e", "f"])
    (tmp_path / "41_0.rc").write_text("0\n")
    (tmp_path / "41_1.rc").write_text("1\n")
    (tmp_path / "41_1.log").write_text("starting\nerror: database error: connection refused\n\n")
    monkeypatch.setattr(slurm, "queue", lambda job: {
        2: {"state": "RUNNING", "reason": "None", "node": "cn03"},
        3: {"state": "PENDING", "reason": "Resources", "node": ""}})
    monkeypatch.setattr(slurm, "accounting", lambda job: {4: {"state": "TIMEOUT", "exit_code": "0:15", "node": "cn05"}})
    tasks = status.task_states(job_mod.load(tmp_path, None))
    assert [(t.host, t.state) for t in tasks] == [("a", "done"), ("b", "failed"), ("c", "running"), ("d", "pending"),
                                                  ("e", "failed"), ("f", "unknown")]
    assert tasks[1].detail == "exit 1: starting | error: database error: connection refused"
    assert tasks[2].slurm_node == "cn03" and tasks[3].detail == "Resources"
    assert tasks[4].detail == "timeout (exit 0:15): no log"
    assert tasks[5].detail.startswith("Slurm no longer knows the task")
    tasks[0].profile = "u1"
    assert status.summary(job, tasks) == ("job 41, node type t, 6 hosts: 1 done, 1 running, 1 pending, 2 failed, "
                                          "1 unknown; 1 profiles in the registry")


def test_status_reads_the_manifest_and_the_registry(cli, tmp_path, db_url, monkeypatch):
    job = _job(tmp_path, ["a", "b"], db_url)
    (tmp_path / "41_0.rc").write_text("0\n")
    monkeypatch.setattr(slurm, "queue", lambda job: {1: {"state": "RUNNING", "reason": "None", "node": "vm"}})
    reg = open_registry(db_url)
    uids = store_hosts(reg, "t", {"a": 1.0, "z": 1.0})   # z is not one of the job's hosts
    reg.close()
    res = cli("fleet", "status", "--log-dir", str(tmp_path), "--json")
    assert res.code == 0, res.err
    out = json.loads(res.out)
    assert out["job"] == job.job_id and out["note"] is None
    assert [(t["host"], t["state"], t["profile"]) for t in out["tasks"]] == [("a", "done", uids["a"]),
                                                                           ("b", "running", None)]
    table = cli("fleet", "status", "41", "--log-dir", str(tmp_path))
    assert "1 done, 1 running" in table.out and uids["a"][:8] in table.out
    assert_one_line_error(cli("fleet", "status", "42", "--log-dir", str(tmp_path)), "no fleet job 42", "41")
    _job(tmp_path, ["a", "b"], "postgresql://nodereg@127.0.0.1:1/fleet")   # its registry unreachable now
    res = cli("fleet", "status", "41", "--log-dir", str(tmp_path), "--json")
    out = json.loads(res.out)
    assert res.code == 0 and out["note"].startswith("cannot tell which profiles landed: database error")
    assert [t["state"] for t in out["tasks"]] == ["done", "running"] and not any(t["profile"] for t in out["tasks"])
    assert_one_line_error(cli("fleet", "status", "--log-dir", str(tmp_path / "none")), "no fleet job has been")


def _bundle(tmp_path: Path, name: str, hosts: dict[str, float]) -> Path:
    url = f"duckdb:///{tmp_path / name}.duckdb"
    reg = open_registry(url)
    store_hosts(reg, "t", hosts)
    reg.close()
    path = tmp_path / "bundles" / f"{name}.zip"
    res = subprocess.run([os.sys.executable, "-m", "registry", "--db", url, "export", str(path)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return path


def test_collect_merges_the_bundles_once(cli, tmp_path, db_url):
    _bundle(tmp_path, "cn01_9", {"cn01": 1.0})
    _bundle(tmp_path, "cn02_9", {"cn02": 2.0})
    (tmp_path / "bundles" / ".cn03_9.zip.part").write_text("being written")
    res = cli("fleet", "collect", str(tmp_path / "bundles"), "--json")
    assert res.code == 0, res.err
    out = json.loads(res.out)
    assert out["bundles"] == ["cn01_9.zip", "cn02_9.zip"] and out["added"]["profiles"] == 2
    again = json.loads(cli("fleet", "collect", str(tmp_path / "bundles"), "--json").out)
    assert again["added"] == {}
    hosts = json.loads(cli("nodes", "show", "t", "--json").out)["hosts"]
    assert [h["host"] for h in hosts] == ["cn01", "cn02"]


def test_collect_keeps_nothing_of_a_directory_with_a_damaged_bundle(cli, tmp_path, db_url):
    _bundle(tmp_path, "cn01_9", {"cn01": 1.0})
    (tmp_path / "bundles" / "cn02_9.zip").write_text("not a zip")
    assert_one_line_error(cli("fleet", "collect", str(tmp_path / "bundles")), "cn02_9.zip")
    assert json.loads(cli("nodes", "--json").out) == []
    assert_one_line_error(cli("fleet", "collect", str(tmp_path / "empty")), "is not a directory")
    (tmp_path / "empty").mkdir()
    assert_one_line_error(cli("fleet", "collect", str(tmp_path / "empty")), "no bundles")


def test_bad_input_is_one_line(cli, tmp_path, monkeypatch):
    submit = ("fleet", "submit", "t")
    assert_one_line_error(cli(*submit, "-w", "cn01", "--dry-run"), "shared PostgreSQL registry", "--to-dir")
    assert_one_line_error(cli("--db", "postgresql://u:secret@h/db", *submit, "-w", "cn01", "--dry-run"),
                          "holds a password")
    assert_one_line_error(cli("--db", PG, *submit, "-w", "cn01", "--dry-run", "--", "--quik"),
                          "No such option: --quik")
    assert_one_line_error(cli("--db", PG, *submit, "-w", "cn01", "--dry-run", "--", "--host", "x"),
                          "passes --host to each task itself")
    assert_one_line_error(cli("--db", PG, *submit, "-w", "cn 01", "--dry-run"), "malformed host list")
    assert_one_line_error(cli("--db", PG, *submit, "-w", "a,b", "--as-hosts", "x,y,z", "--dry-run"),
                          "--as-hosts names 3 hosts for 2 Slurm nodes")
    # the registry must be reachable before anything is submitted
    res = cli("--db", "postgresql://nodereg@127.0.0.1:1/fleet", *submit, "-w", "cn01")
    assert_one_line_error(res, "127.0.0.1:1")
    # no Slurm on PATH
    monkeypatch.setenv("PATH", str(tmp_path))
    assert_one_line_error(cli(*submit, "-w", "cn01", "--to-dir", str(tmp_path / "b"), "--log-dir", str(tmp_path)),
                          "Slurm's sbatch is not on PATH")
    assert_one_line_error(cli(*submit, "--to-dir", str(tmp_path / "b"), "--dry-run"), "Slurm's sinfo is not on PATH")
    assert not list(tmp_path.glob("*.json"))
