"""Hypothesis strategies that damage Spare Cores server folders (`nodereg import sparecores`).

Contract checked by tests/test_fuzz_sparecores.py, through the real CLI on a fresh registry per
case: the import succeeds (a damaged task is skipped, never fatal for the rest), every figure of
an undamaged task is stored exactly as written (the writer's own figures, tests/sparecores_synth.py),
everything stored is finite and positive, names are portable, and `doctor` finds nothing wrong.
Each case starts from valid folders and applies 0-3 edits: bytes of an output or meta.json damaged,
a number in an output replaced by a nasty one, a meta.json value replaced, a file removed or
replaced by a folder.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import sparecores_synth as synth
from fuzz_readers import NASTY, apply_bytes, byte_damage, fresh_registry, json_values, outcome, reading, rows
from fuzz_readers import assert_portable_text
from hypothesis import strategies as st

from registry.doctor import check
from registry.io.sparecores.apps import COMPRESSION_WORK, GEEKBENCH_WORK, REQUESTS_WORK

MICRO = ("membench", "bw_mem", "stressngfull", "stressng", "stressngsinglecore", "stressng_benchmarks", "passmark",
         "openssl")
TASKS = list(synth.writers(synth.Server(), old_stressng=True))
_NUMBER = re.compile(r"(?<![A-Za-z_])[0-9]+\.?[0-9]*(?:[eE][-+]?[0-9]+)?")


@dataclass(frozen=True)
class Edit:
    server: int
    task: str
    target: str          # output | meta
    kind: str            # bytes | number | meta value | remove | folder
    args: object = None


@dataclass(frozen=True)
class Case:
    servers: tuple[synth.Server, ...]
    old: tuple[bool, ...]
    edits: tuple[Edit, ...]


servers = st.builds(synth.Server, name=st.sampled_from(["m7a.large", "c7g.xl", "n2-standard-8"]),
                    vcpus=st.sampled_from([1, 2, 4]), speed=st.floats(0.25, 4.0))


@st.composite
def edit(draw, n_servers: int):
    server, task = draw(st.integers(0, n_servers - 1)), draw(st.sampled_from(TASKS))
    kind = draw(st.sampled_from(["bytes", "bytes", "number", "number", "meta value", "remove", "folder"]))
    if kind == "bytes":
        return Edit(server, task, draw(st.sampled_from(["output", "meta"])), kind, draw(byte_damage()))
    if kind == "number":
        return Edit(server, task, "output", kind, (draw(st.integers(0, 400)), draw(NASTY)))
    if kind == "meta value":
        key = draw(st.sampled_from(["exit_code", "start", "end", "version"]))
        return Edit(server, task, "meta", kind, (key, draw(json_values)))
    return Edit(server, task, draw(st.sampled_from(["output", "meta"])), kind)


@st.composite
def sparecores_case(draw):
    found = draw(st.lists(servers, min_size=1, max_size=2, unique_by=lambda s: s.name))
    old = tuple(draw(st.booleans()) for _ in found)
    edits = tuple(draw(st.lists(edit(len(found)), max_size=3)))
    return Case(tuple(found), old, edits)


def _path(root: Path, s: synth.Server, task: str, target: str) -> Path:
    name = "meta.json" if target == "meta" else synth.OUTPUT.get(task, "stdout")
    return root / "data" / s.vendor / s.name / task / name


def _apply(root: Path, case: Case, e: Edit) -> None:
    path = _path(root, case.servers[e.server], e.task, e.target)
    if not path.is_file():
        return
    if e.kind == "bytes":
        path.write_bytes(apply_bytes(path.read_bytes(), e.args))
    elif e.kind == "number":
        text = path.read_bytes().decode("utf-8", "surrogateescape")     # an earlier edit may have left bad bytes
        found = list(_NUMBER.finditer(text))
        if found:
            m = found[e.args[0] % len(found)]
            path.write_bytes((text[:m.start()] + e.args[1] + text[m.end():]).encode("utf-8", "surrogateescape"))
    elif e.kind == "meta value":
        try:
            doc = json.loads(path.read_bytes())
        except ValueError:                                               # damaged by an earlier edit
            return
        doc[e.args[0]] = e.args[1]
        path.write_text(json.dumps(doc))
    elif e.kind == "remove":
        path.unlink()
    elif e.kind == "folder":
        path.unlink()
        path.mkdir()


def check_case(cli, template: Path, work: Path, case: Case) -> str:
    url = fresh_registry(template, work)
    root = work / "clone"
    figures = [synth.write_server(root, s, old_stressng=o) for s, o in zip(case.servers, case.old, strict=True)]
    for e in case.edits:
        _apply(root, case, e)
    touched = {(e.server, e.task) for e in case.edits}
    result = cli("--db", url, "import", "sparecores", str(root), "--json", "--workers", "1")
    assert outcome(result) == "imported", result.err
    summary = json.loads(result.out)
    assert summary["failed"] == []
    with reading(url) as conn:
        stored = {(n, k): v for n, k, v in rows(conn, "SELECT n.name, c.config_key, pr.value FROM profile_runs pr "
                                                      "JOIN profiles p ON p.profile_id = pr.profile_id JOIN nodes n "
                                                      "ON n.node_id = p.node_id JOIN ub_configs c ON c.config_id = "
                                                      "pr.config_id")}
        runs = {(n, a): t for n, a, t in rows(conn, "SELECT n.name, a.name, r.time_s FROM runs r JOIN nodes n ON "
                                                    "n.node_id = r.node_id JOIN apps a ON a.app_id = r.app_id")}
        for i, (s, tasks) in enumerate(zip(case.servers, figures, strict=True)):
            node = f"{s.vendor}:{s.name}"
            for task, figs in tasks.items():
                if (i, task) in touched or (task == "static_web" and (i, "lscpu") in touched):
                    continue
                for key, value in figs.items():
                    if task in MICRO:
                        assert math.isclose(stored[(node, key)], value, rel_tol=1e-9), (node, key)
                    elif task in ("geekbench", "compression_text", "redis", "static_web"):
                        rate = value[0] if isinstance(value, tuple) else value
                        slug = key.split(":")[1]
                        work = (GEEKBENCH_WORK[slug] if task == "geekbench" else
                                COMPRESSION_WORK if task == "compression_text" else REQUESTS_WORK)
                        assert math.isclose(runs[(node, key)], work / rate, rel_tol=1e-9), (node, key)
        for table, cols in (("profile_runs", "value, median_s"), ("runs", "time_s"), ("profile_reps", "time_s")):
            assert all(v is not None and math.isfinite(v) and v > 0
                       for row in rows(conn, f"SELECT {cols} FROM {table}") for v in row), table
        assert all(0 < c < 2**31 for (c,) in rows(conn, "SELECT n_cpus FROM nodes WHERE n_cpus IS NOT NULL"))
        assert_portable_text(conn)
        assert check(conn) == []
    shutil.rmtree(root)
    return "clean" if not case.edits else "damaged"
