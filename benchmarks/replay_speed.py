"""Full replays of the bundled Philly traces per policy: wall time, peak memory and metrics.

Each (trace, policy) runs in a fresh subprocess so peak RSS is that replay's own. Writes
benchmarks/results/replay_speed.json and prints a table. Usage:

    python benchmarks/replay_speed.py [--policies fifo,srtf,edf,las] [--traces philly-slo,...]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
KEYS = (
    "slo_deadline_ratio",
    "slo_value_ratio",
    "slo_last_deadline_ratio",
    "guaranteed_jobs",
    "guaranteed_miss_ratio",
    "slo_avg_jct",
    "be_avg_jct",
    "preemptions_per_job",
    "makespan",
    "gpu_utilization",
    "wall_seconds",
)


def one(trace: str, policy: str) -> dict:
    """Run inside the child: load, replay, report metrics plus load time and peak memory."""
    import numpy as np

    from chronus_py.readers import read_trace
    from chronus_py.replay import summarize
    from chronus_py.replay.setup import ReplaySetup, run_setup

    started = time.perf_counter()
    loaded = read_trace(trace)
    load_s = time.perf_counter() - started
    policies = []
    result, _ = run_setup(
        ReplaySetup(trace=trace, policy=policy),
        trace=loaded,
        wrap_policy=lambda chosen: policies.append(chosen) or chosen,
    )
    metrics = summarize(result, trace=trace, dropped=loaded.dropped)
    selector = getattr(policies[0], "selector", None)
    if selector is not None:
        solve = np.array(selector.stats.solve_seconds)
        metrics.update(
            lease_rounds=selector.stats.rounds,
            solve_fallbacks=selector.stats.fallbacks,
            solve_median_s=float(np.median(solve)),
            solve_p99_s=float(np.percentile(solve, 99)),
            solve_max_s=float(solve.max()),
            demoted=len(selector.stats.demoted),
        )
    metrics["load_seconds"] = load_s
    metrics["total_seconds"] = time.perf_counter() - started
    metrics["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return metrics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policies", default="fifo,srtf,edf,las")
    parser.add_argument("--traces", default="philly-slo,philly-mix1,philly-mix2")
    parser.add_argument("--out", default="replay_speed.json")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one(*args.child)))
        return
    rows = []
    for trace in args.traces.split(","):
        for policy in args.policies.split(","):
            out = subprocess.run(
                [sys.executable, __file__, "--child", trace, policy],
                capture_output=True,
                text=True,
                check=True,
            )
            row = json.loads(out.stdout)
            rows.append(row)
            print(
                f"{trace:12s} {policy:8s} replay {row['wall_seconds']:6.1f} s  total "
                f"{row['total_seconds']:6.1f} s  "
                f"peak {row['peak_rss_mib']:6.0f} MiB  DSR {row['slo_deadline_ratio']:.4f}  "
                f"BE JCT {row['be_avg_jct'] / 60 if row['be_avg_jct'] else float('nan'):7.1f} min  "
                f"preempt/job {row['preemptions_per_job']:.3f}"
                + (
                    f"  solve median {row['solve_median_s']:.4f} s p99 {row['solve_p99_s']:.3f} s"
                    if "solve_median_s" in row
                    else ""
                ),
                flush=True,
            )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / args.out).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
