"""A 200-job compressed trace on a private 4-node Slurm cluster (4 fake GPUs per node): the
deadline ratio and the guarantees kept under ``chronus serve --backend slurm``, beside the same
jobs under plain Slurm (``sched/builtin``: priority by submission, first come first served).

Compressed time: one wall second is ``--scale`` seconds (default 120), so the 5-hour arrival
span takes 2.5 wall minutes. Jobs: ``replay.synthetic_trace`` (1/2/4 GPUs, log-normal work with
median 10 min, half with a deadline 2-4 h plus 1-3 times their work after arrival; the 2 h part
is chronus's admission guard). Each job is a real batch script sleeping in checkpointed 1-second
steps; outcomes are read from Slurm's own records (submit, end, requeues).

    sudo PYTHONPATH=. python benchmarks/slurm_trace.py [--jobs 200] [--scale 120]
        [--deadline-hours 2 4]

The Slurm is the system's, or the one under ``$CHRONUS_TEST_SLURM`` (its release ends the
results file's name).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

from chronus_py.backends.slurm.lab import SlurmLab, release, why_not_here
from chronus_py.backends.slurm.replay import run, summary, synthetic_trace

RESULTS = Path(__file__).resolve().parent / "results" / "slurm_trace.json"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=200)
    p.add_argument("--scale", type=float, default=120.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--deadline-hours",
        type=float,
        nargs=2,
        default=(2.0, 4.0),
        metavar=("LO", "HI"),
        help="deadlines: LO-HI hours plus 1-3 times the work",
    )
    p.add_argument(
        "--modes", nargs="+", choices=("slurm-fifo", "chronus"), default=["slurm-fifo", "chronus"]
    )
    p.add_argument(
        "--exact",
        action="store_true",
        help="tell chronus the work each script really does (whole wall seconds) "
        "instead of the trace's work",
    )
    p.add_argument(
        "--time-limit",
        type=float,
        default=0.5,
        help="chronus's solver time limit per plan, s (the service's --time-limit)",
    )
    p.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="copy each chronus run's service log and database into DIR (the lab is temporary)",
    )
    args = p.parse_args()
    why = why_not_here()
    if why:
        print(why, file=sys.stderr)
        return 2
    jobs = synthetic_trace(args.jobs, seed=args.seed, deadline_hours=tuple(args.deadline_hours))
    results = (
        RESULTS
        if tuple(args.deadline_hours) == (2.0, 4.0)
        else RESULTS.with_name("slurm_trace_deadlines_{:g}-{:g}h.json".format(*args.deadline_hours))
    )
    if args.exact or args.modes != ["slurm-fifo", "chronus"]:
        results = results.with_name(
            f"{results.stem}_{'_'.join(args.modes)}{'_exact' if args.exact else ''}.json"
        )
    slurm = release()
    results = results.with_name(f"{results.stem}_{slurm}.json")
    out: dict = {
        "jobs": args.jobs,
        "scale": args.scale,
        "seed": args.seed,
        "nodes": 4,
        "gpus_per_node": 4,
        "time_limit": args.time_limit,
        "exact": args.exact,
        "deadline_hours": list(args.deadline_hours),
        "machine": platform.node(),
        "slurm": slurm,
        "load_before": os.getloadavg(),
        "runs": {},
    }
    for mode in args.modes:
        with tempfile.TemporaryDirectory(prefix=f"slurm-trace-{mode}-") as tmp:
            with SlurmLab(Path(tmp) / "lab", nodes=4, gpus_per_node=4) as lab:
                t0 = time.monotonic()
                outcomes = run(
                    lab,
                    jobs,
                    chronus=mode == "chronus",
                    scale=args.scale,
                    workdir=Path(tmp),
                    serve_args=("--time-limit", f"{args.time_limit:g}"),
                    exact=args.exact,
                )
                s = summary(outcomes)
                s["wall_s"] = round(time.monotonic() - t0, 1)
                if args.keep is not None and mode == "chronus":
                    args.keep.mkdir(parents=True, exist_ok=True)
                    for name in ("chronus.log", "chronus.db"):
                        shutil.copy(Path(tmp) / name, args.keep / name)
        out["runs"][mode] = s
        print(mode, json.dumps(s), flush=True)
    out["load_after"] = os.getloadavg()
    results.parent.mkdir(exist_ok=True)
    results.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
