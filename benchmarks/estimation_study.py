"""Guarantees under estimation error: replays with the profiling stage and profiler estimates.

For each trace, policy and sigma, every job passes the profiling pool (4 nodes, 5 minutes), is
scheduled by an estimate off by log-normal error ``sigma`` (plus measurement spread), and is
re-estimated from observed progress while it runs. Writes benchmarks/results/estimation_study.json.

    python benchmarks/estimation_study.py [--sigmas 0,0.1,0.3] [--policies srtf,chronus]
"""
from __future__ import annotations

import argparse
import json
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def one(trace: str, policy: str, sigma: float) -> dict:
    from chronus_py.model import Cluster
    from chronus_py.policies import make_policy
    from chronus_py.readers import read_trace
    from chronus_py.replay import replay, summarize
    from chronus_py.replay.profiling import ProfilingPool

    loaded = read_trace(trace)
    result = replay(loaded.jobs, Cluster.uniform(120, 8), make_policy(policy),
                    profiling=ProfilingPool(4, 8, 300.0, sigma=sigma, seed=0), reestimate_every=300.0)
    row = summarize(result, trace=trace, dropped=loaded.dropped)
    row["sigma"] = sigma
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", default="philly-slo,philly-mix1,philly-mix2")
    parser.add_argument("--policies", default="srtf,chronus")
    parser.add_argument("--sigmas", default="0,0.1,0.3")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    grid = [(t, p, float(s)) for t in args.traces.split(",") for p in args.policies.split(",")
            for s in args.sigmas.split(",")]
    with ProcessPoolExecutor(args.workers) as pool:
        rows = list(pool.map(one, *zip(*grid)))
    for r in rows:
        gm = r["guaranteed_miss_ratio"]
        print(f"{r['trace']:12s} {r['policy']:8s} sigma {r['sigma']:.1f}  DSR {r['slo_deadline_ratio']:.4f}  "
              f"guaranteed {r['guaranteed_jobs']:6d}  guaranteed miss {'-' if gm is None else f'{gm:.4f}'}  "
              f"BE JCT {(r['be_avg_jct'] or 0) / 60:7.1f} min")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "estimation_study.json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
