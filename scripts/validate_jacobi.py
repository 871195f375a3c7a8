"""How well the communication models predict the halo exchange of Branikas 2024's Jacobi data
generator on this node (the `jacobi` kernel of the MPI profile, microbench/ub_jacobi.c).

Profiles the node's MPI kernels (`nodereg profile NODE --kernels mpi`: ping-pong, Exchange,
Allreduce and the Jacobi sweep; skipped when the registry already has them), then predicts the
measured halo-exchange time per step of every Jacobi configuration with:
- `boosted`, trained on the Jacobi figures, leave-one-out (each configuration predicted by a model
  fitted to the others): with the configuration's messages per step, working set and load given
  (the paper's setting); with its working set only, as a traced phase whose trace read it (the
  others averaged over the sweep); and with none of them;
- the baselines, fitted to the ping-pong and Exchange figures of the same profile: `boosted` as it
  was before the generator existed (the old training data), `hockney`, `branikas`.
A configuration's prediction is MSGS x the model's time per message of its size at its ranks.
Printed: per model the median, 90th percentile and largest |error| over the configurations and
the share within 25%, overall and per load (ops per point 1: memory bound, 16: compute bound).

    .venv/bin/python scripts/validate_jacobi.py [--db PATH] [--node NAME] [--quick|--full] [--reps N] [--yield-idle]

--yield-idle sets OMPI_MCA_mpi_yield_when_idle=1 for the profile (a waiting rank yields its CPU):
on a shared machine a spinning rank can hold the CPU its neighbour needs for a whole time slice.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np

from registry.cli.output import print_table
from registry.db import open_registry
from registry.errors import UserError
from registry.match.comm import load_profiles
from registry.models.comm import BoostedModel, BranikasModel, CommProfile, HockneyModel, JacobiFigure


def profile(db_url: str, node: str, mode: str | None, reps: int | None, yield_idle: bool) -> CommProfile:
    """The node's communication profile, measured first when the registry has no Jacobi figures of it."""
    found = _load(db_url, node)
    if found is None or not found.jacobi:
        cmd = [sys.executable, "-m", "registry", "--db", db_url, "profile", node, "--kernels", "mpi"]
        cmd += [f"--{mode}"] if mode else []
        cmd += ["--reps", str(reps)] if reps else []
        env = {**os.environ, **({"OMPI_MCA_mpi_yield_when_idle": "1"} if yield_idle else {})}
        print("$ " + " ".join(cmd[2:]), flush=True)
        if subprocess.run(cmd, env=env).returncode != 0:
            raise SystemExit("error: the profile failed (above)")
        found = _load(db_url, node)
    return found


def _load(db_url: str, node: str) -> CommProfile | None:
    reg = open_registry(db_url)
    with reg.connect() as conn:
        found = load_profiles(conn).get(node)
    reg.close()
    return found


def leave_one_out(prof: CommProfile, given: tuple[str, ...]) -> list[float]:
    """Each Jacobi configuration's halo exchange per step (us), from a model fitted to the others,
    given the features named in `given` (of msgs, ws_bytes, ops; the others averaged)."""
    out = []
    for i, f in enumerate(prof.jacobi):
        model = BoostedModel().fit(replace(prof, jacobi=prof.jacobi[:i] + prof.jacobi[i + 1:]))
        known = {k: v for k, v in (("msgs", f.msgs), ("ws_bytes", f.ws_bytes), ("ops", f.ops)) if k in given}
        out.append(f.msgs * model.message_s(f.ranks, f.msg_bytes, **known) * 1e6)
    return out


def fitted(prof: CommProfile, model) -> Callable[[JacobiFigure], float] | str:
    """A baseline fitted to the ping-pong and Exchange figures (or why it could not be)."""
    try:
        m = model.fit(replace(prof, jacobi=[]))
    except UserError as exc:
        return str(exc)
    return lambda f: m.point_to_point_s(f.msgs, f.msgs * f.msg_bytes, f.ranks) * 1e6


def errors_row(name: str, predicted: list[float], figures: list[JacobiFigure]) -> dict:
    """Relative errors of `predicted` against the measured halo exchange, overall and per load."""
    row: dict = {"model": name}
    for label, pick in (("all", lambda f: True), ("ops 1", lambda f: f.ops == 1), ("ops 16", lambda f: f.ops == 16)):
        errs = [abs(p / f.comm_us - 1) for p, f in zip(predicted, figures) if pick(f)]
        if errs:
            row[f"median {label}"] = f"{np.median(errs):.1%}"
        if label == "all":
            row.update({"p90": f"{np.percentile(errs, 90):.1%}", "max": f"{max(errs):.0%}",
                        "within 25%": f"{np.mean([e <= 0.25 for e in errs]):.0%}"})
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, help="registry file (default: a temporary one)")
    ap.add_argument("--node", default="jacobi-node")
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--quick", dest="mode", action="store_const", const="quick")
    size.add_argument("--full", dest="mode", action="store_const", const="full")
    ap.add_argument("--reps", type=int)
    ap.add_argument("--yield-idle", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="validate-jacobi-") as tmp:
        db_url = f"duckdb:///{(args.db or Path(tmp) / 'registry.duckdb').resolve()}"
        prof = profile(db_url, args.node, args.mode, args.reps, args.yield_idle)
    figures = prof.jacobi
    shares = [f.comm_us / f.step_us for f in figures if f.step_us]
    print(f"{len(figures)} Jacobi configurations of {args.node} (ranks {sorted({f.ranks for f in figures})}, "
          f"halo exchange {min(f.comm_us for f in figures):.3g}..{max(f.comm_us for f in figures):.3g} us a step, "
          f"median share of the step {np.median(shares):.0%}); load average {os.getloadavg()[0]:.2f} on "
          f"{os.cpu_count()} CPUs")
    print(f"boosted, all of them: {BoostedModel().fit(prof).describe()}")
    rows = [errors_row("boosted, Jacobi, LOO, features given", leave_one_out(prof, ("msgs", "ws_bytes", "ops")), figures),
            errors_row("boosted, Jacobi, LOO, a phase with its working set", leave_one_out(prof, ("ws_bytes",)), figures),
            errors_row("boosted, Jacobi, LOO, a phase without", leave_one_out(prof, ()), figures)]
    for name, model in (("boosted, ping-pong/Exchange (before)", BoostedModel()), ("hockney", HockneyModel()),
                        ("branikas", BranikasModel())):
        predict = fitted(prof, model)
        if isinstance(predict, str):
            print(f"note: {name}: {predict}")
            continue
        rows.append(errors_row(name, [predict(f) for f in figures], figures))
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print_table(rows, title="halo exchange per step: |predicted / measured - 1| over the Jacobi configurations")


if __name__ == "__main__":
    main()
