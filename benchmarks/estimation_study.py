"""Guarantees without oracle runtimes: replays with the profiling pool, with in-place estimation
(issue 14), and with oracle runtimes for reference.

``pool``: every job first passes the profiling pool (4 nodes, 5 minutes) and is scheduled by an
estimate off by log-normal error ``sigma`` (plus measurement spread), re-estimated from observed
progress while it runs. ``realistic``: no pool and no runtime known; each job is measured in
place, on its own GPUs, as its first lease (``chronus_py.estimates.in_place``), with the same error
model.
``oracle``: true runtimes (sigma does not apply; one row per trace and policy). Writes
benchmarks/results/estimation_study.json.

    python benchmarks/estimation_study.py [--sigmas 0.1,0.3] [--policies chronus]
        [--estimates oracle,pool,realistic] [--workers 1]
"""

from __future__ import annotations

import argparse
import json
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def one(trace: str, policy: str, estimates: str, sigma: float) -> dict:
    from chronus_py.engine import summarize
    from chronus_py.engine.setup import ReplaySetup, run_setup

    setup = ReplaySetup(trace=trace, policy=policy, estimates=estimates, sigma=sigma)
    result, loaded = run_setup(setup)
    row = summarize(result, trace=trace, dropped=loaded.dropped)
    row["estimates"] = estimates
    row["sigma"] = sigma if estimates != "oracle" else None
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", default="philly-slo,philly-mix1,philly-mix2")
    parser.add_argument("--policies", default="chronus")
    parser.add_argument("--estimates", default="oracle,pool,realistic")
    parser.add_argument("--sigmas", default="0.1,0.3")
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    grid = []
    for t in args.traces.split(","):
        for p in args.policies.split(","):
            for e in args.estimates.split(","):
                sigmas = [0.0] if e == "oracle" else [float(s) for s in args.sigmas.split(",")]
                grid += [(t, p, e, s) for s in sigmas]
    with ProcessPoolExecutor(args.workers) as pool:
        rows = list(pool.map(one, *zip(*grid)))
    for r in rows:
        gm = r["guaranteed_miss_ratio"]
        sigma = "-" if r["sigma"] is None else f"{r['sigma']:.1f}"
        print(
            f"{r['trace']:12s} {r['policy']:8s} {r['estimates']:9s} sigma {sigma:3s}  "
            f"DSR {r['slo_deadline_ratio']:.4f}  guaranteed {r['guaranteed_jobs']:6d}  "
            f"guaranteed miss {'-' if gm is None else f'{gm:.4f}'}  "
            f"BE JCT {(r['be_avg_jct'] or 0) / 60:7.1f} min  "
            f"preemptions/job {r['preemptions_per_job']:.3f}"
        )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "estimation_study.json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
