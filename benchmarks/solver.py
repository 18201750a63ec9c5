"""Solver benchmark: wall time and objective of each backend on Philly-like lease problems.

Instances (seeded): job GPUs drawn from the Philly mix (1:50 %, 2:15 %, 4:15 %, 8:12 %, 16:5 %,
32:3 %), leases needed heavy-tailed, deadlines 1-2x the work; 15 % of the jobs are soft
(options at 1, 1.25, 1.5, 2x the deadline worth 10/8/5/2), the rest strict (one option worth 10).
Two kinds per scale:
  plan    a lease-boundary round: every job already guaranteed (admitted FCFS beforehand, so the
          guarantees fit), half of them running; the solver picks options and slot-0 usage;
  mixed   the same jobs, half of them offered first and guaranteed if they fit, half candidates;
          the capacity is scaled so the offered work is 1.5x what fits before the mean deadline
          (the landscape benchmark's setting), so admission by value is a real choice.
Scales: Philly round (about 300 job-option rows, 200 slots, 960 GPUs), 1,000 jobs x 48 slots,
and 5,000 jobs x 48 slots on 8,192 GPUs (``chronus plan`` scale).

    PYTHONPATH=. python benchmarks/solver.py [--seeds 5] [--time-limit 1.0] [--quick]
        [--scales philly-300x200,...] [--backends greedy,cpsat,cbc] [--out solver.json]

Writes benchmarks/results/<out> and prints one row per (scale, kind, backend). "gain" is the
objective minus the greedy plan's objective (value units; slot-0 terms are fractions of one).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
from pathlib import Path

import numpy as np

from solvers import LeaseJob, LeaseOption, LeaseProblem, admit, check, solve

GPU_MIX = ((1, 0.50), (2, 0.15), (4, 0.15), (8, 0.12), (16, 0.05), (32, 0.03))
OVERLOAD = 1.5
SOFT = ((1.0, 10.0), (1.25, 8.0), (1.5, 5.0), (2.0, 2.0))
SCALES = {
    "philly-300x200": dict(jobs=220, slots=200, gpus=960),
    "1000x48": dict(jobs=1000, slots=48, gpus=960),
    "5000x48@8192": dict(jobs=5000, slots=48, gpus=8192),
}


def random_jobs(rng: np.random.Generator, n: int, slots: int, prefix: str) -> list[LeaseJob]:
    sizes, weights = zip(*GPU_MIX)
    out = []
    for j in range(n):
        gpus = int(rng.choice(sizes, p=weights))
        need = int(min(slots // 2, max(1, math.ceil(rng.lognormal(math.log(slots / 8), 0.8)))))
        first = int(min(slots, max(need, round(need * rng.uniform(1.0, 2.0)))))
        if rng.random() < 0.15:
            opts = tuple(LeaseOption(int(min(slots, round(first * f))), need, v) for f, v in SOFT)
        else:
            opts = (LeaseOption(first, need, 10.0),)
        out.append(LeaseJob(f"{prefix}{j}", gpus, opts, running=bool(rng.random() < 0.5)))
    return out


def instance(kind: str, seed: int, jobs: int, slots: int, gpus: int) -> LeaseProblem:
    rng = np.random.default_rng(seed)
    objective = "maximize" if seed % 2 == 0 else "minimize"
    if kind == "plan":
        capacity = np.full(slots, gpus, dtype=np.int64)
        offered = random_jobs(rng, 3 * jobs, slots, "j")
        decided = admit(LeaseProblem(capacity, ()), offered)
        kept = [j for j in offered if decided.option[j.id] is not None][:jobs]
        return LeaseProblem(capacity, tuple(_fix(j) for j in kept), objective)
    pool = random_jobs(rng, jobs, slots, "j")
    work = sum(j.gpus * j.options[0].leases_needed for j in pool)
    span = float(np.mean([j.options[0].deadline_slot for j in pool]))
    capacity = np.full(slots, max(32, round(work / span / OVERLOAD)), dtype=np.int64)
    decided = admit(LeaseProblem(capacity, ()), pool[: jobs // 2])
    fixed = tuple(_fix(j) for j in pool[: jobs // 2] if decided.option[j.id] is not None)
    return LeaseProblem(capacity, fixed + tuple(pool[jobs // 2 :]), objective)


def _fix(job: LeaseJob) -> LeaseJob:
    return LeaseJob(job.id, job.gpus, job.options, fixed=True, running=job.running)


def run(
    scales: dict, kinds: tuple[str, ...], seeds: int, time_limit: float, backends: tuple[str, ...]
) -> list[dict]:
    rows = []
    for scale, shape in scales.items():
        for kind in kinds:
            problems = [instance(kind, s, **shape) for s in range(seeds)]
            n_rows = [sum(len(j.options) for j in p.jobs) for p in problems]
            for backend in backends:
                walls, gains, statuses, fallbacks = [], [], [], 0
                for p in problems:
                    t0 = time.perf_counter()
                    sol = solve(p, backend=backend, time_limit_s=time_limit)
                    walls.append(time.perf_counter() - t0)
                    assert check(p, sol) == [], f"{scale}/{kind}/{backend}: infeasible plan"
                    gains.append(sol.stats.objective - sol.stats.greedy_objective)
                    statuses.append(sol.stats.status)
                    fallbacks += sol.stats.fallback
                row = dict(
                    scale=scale,
                    kind=kind,
                    backend=backend,
                    seeds=seeds,
                    time_limit_s=time_limit,
                    jobs=int(np.median([len(p.jobs) for p in problems])),
                    rows=int(np.median(n_rows)),
                    slots=int(problems[0].horizon),
                    wall_median_s=float(np.median(walls)),
                    wall_p99_s=float(np.percentile(walls, 99)),
                    wall_max_s=float(max(walls)),
                    gain_vs_greedy_mean=float(np.mean(gains)),
                    gain_vs_greedy_max=float(max(gains)),
                    statuses={s: statuses.count(s) for s in sorted(set(statuses))},
                    fallbacks=fallbacks,
                )
                rows.append(row)
                print(
                    f"{scale:16} {kind:6} {backend:7} jobs={row['jobs']:5} rows={row['rows']:5} "
                    f"T={row['slots']:3}  median {row['wall_median_s']:7.3f}s  p99 "
                    f"{row['wall_p99_s']:7.3f}s  "
                    f"gain {row['gain_vs_greedy_mean']:+9.3f} (max "
                    f"{row['gain_vs_greedy_max']:+8.3f})  "
                    f"{row['statuses']}",
                    flush=True,
                )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--time-limit", type=float, default=1.0)
    ap.add_argument("--quick", action="store_true", help="Philly scale only, 2 seeds")
    ap.add_argument(
        "--scales", default=",".join(SCALES), help="comma-separated subset of " + ", ".join(SCALES)
    )
    ap.add_argument("--out", default="solver.json", help="file name under benchmarks/results/")
    ap.add_argument("--backends", default="greedy,cpsat,cbc")
    args = ap.parse_args()
    # Import the solver libraries before timing: the first CP-SAT call in a process otherwise pays
    # about 0.4 s of imports (ortools pulls in pandas), once per process, not per round.
    import ortools.sat.python.cp_model  # noqa: F401
    import pulp  # noqa: F401

    names = ["philly-300x200"] if args.quick else args.scales.split(",")
    scales = {name: SCALES[name] for name in names}
    seeds = 2 if args.quick else args.seeds
    rows = run(scales, ("plan", "mixed"), seeds, args.time_limit, tuple(args.backends.split(",")))
    out = Path(__file__).parent / "results" / args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            dict(
                machine=platform.platform(),
                python=platform.python_version(),
                command=f"python benchmarks/solver.py --seeds {seeds} --time-limit "
                f"{args.time_limit} "
                f"--scales {','.join(names)} --backends {args.backends}",
                results=rows,
            ),
            indent=1,
        )
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
