"""Full replays of the bundled Philly traces per policy: wall time, peak memory and metrics.

Each (trace, policy) runs in a fresh subprocess so peak RSS is that replay's own. Writes
benchmarks/results/replay_speed.json and prints a table. Usage:

    python benchmarks/replay_speed.py [--policies fifo,srtf,edf,las] [--traces philly-slo,...]

``--against CHECKOUT`` compares two checkouts instead (this one and ``CHECKOUT``, e.g. a
``git worktree`` of an older commit): per (trace, policy), ``--pairs`` pairs of whole
``chronus replay --json`` processes, each run with its own checkout's code, alternating which
side goes first. A shared machine's load then falls on both sides alike, so the ratio of the
medians (this / other) is the number to quote, not either time; the ratio of CPU seconds is
reported beside it, as it moves less with the load, and the load averages before and after.
The metrics (``--json`` less ``wall_seconds``) of every run are compared too; any difference is
reported and fails the run.
Writes benchmarks/results/replay_speed_ab.json (or ``--out``):

    python benchmarks/replay_speed.py --against ../base --policies chronus --pairs 3
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
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

    from chronus_py.engine import summarize
    from chronus_py.engine.setup import ReplaySetup, run_setup
    from chronus_py.readers import read_trace

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
    stats = policies[0].solver_stats()
    if stats is not None:
        solve = np.array(stats.solve_seconds)
        metrics.update(
            lease_rounds=stats.rounds,
            solve_fallbacks=stats.fallbacks,
            solve_median_s=float(np.median(solve)),
            solve_p99_s=float(np.percentile(solve, 99)),
            solve_max_s=float(solve.max()),
            demoted=len(stats.demoted),
        )
    metrics["load_seconds"] = load_s
    metrics["total_seconds"] = time.perf_counter() - started
    metrics["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return metrics


def cpu_of_children() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed_replay(checkout: Path, trace: str, policy: str) -> tuple[float, float, dict]:
    """Wall and CPU seconds of one whole ``chronus replay --json`` process run from ``checkout``
    with its own code, and its metrics less the replay's own wall time. CPU time moves less
    with the machine's load than wall time does, so both are kept."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    command = [sys.executable, "-m", "chronus_py", "replay", "--trace", trace]
    cpu = cpu_of_children()
    started = time.perf_counter()
    out = subprocess.run(
        [*command, "--policy", policy, "--json"],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    elapsed = time.perf_counter() - started
    metrics = json.loads(out.stdout)
    metrics.pop("wall_seconds", None)
    return elapsed, cpu_of_children() - cpu, metrics


def compare(other: Path, traces: list[str], policies: list[str], pairs: int) -> list[dict]:
    """``pairs`` alternating pairs of replays per (trace, policy): this checkout against
    ``other``. Returns one row per (trace, policy) with both sides' times and their ratio."""
    sides = {"this": HERE.parent, "other": other.resolve()}
    rows = []
    turn = 0  # the side that goes first alternates over all pairs (one pair per trace too)
    for trace in traces:
        for policy in policies:
            times: dict[str, list[float]] = {"this": [], "other": []}
            cpu: dict[str, list[float]] = {"this": [], "other": []}
            metrics: dict[str, dict] = {}
            load_before = os.getloadavg()
            for pair in range(pairs):
                order = ("other", "this") if turn % 2 == 0 else ("this", "other")
                turn += 1
                for side in order:
                    elapsed, used, got = timed_replay(sides[side], trace, policy)
                    times[side].append(elapsed)
                    cpu[side].append(used)
                    metrics.setdefault(side, got)
                    if got != metrics[side]:
                        raise SystemExit(f"{trace} {policy}: {side} gave different metrics")
                print(
                    f"{trace:12s} {policy:8s} pair {pair + 1}: this {times['this'][-1]:6.1f} s"
                    f"  other {times['other'][-1]:6.1f} s",
                    flush=True,
                )
            this, other_s = statistics.median(times["this"]), statistics.median(times["other"])
            ratios = [a / b for a, b in zip(times["this"], times["other"])]
            same = metrics["this"] == metrics["other"]
            rows.append(
                {
                    "trace": trace,
                    "policy": policy,
                    "this": str(sides["this"]),
                    "other": str(sides["other"]),
                    "this_seconds": times["this"],
                    "other_seconds": times["other"],
                    "this_median_s": this,
                    "other_median_s": other_s,
                    "ratio": this / other_s,
                    "this_cpu_seconds": cpu["this"],
                    "other_cpu_seconds": cpu["other"],
                    "cpu_ratio": statistics.median(cpu["this"]) / statistics.median(cpu["other"]),
                    "pair_ratios": ratios,
                    "load_average_before": load_before,
                    "load_average_after": os.getloadavg(),
                    "same_metrics": same,
                    "differing": sorted(
                        k
                        for k in metrics["this"].keys() | metrics["other"].keys()
                        if metrics["this"].get(k) != metrics["other"].get(k)
                    ),
                }
            )
            print(
                f"{trace:12s} {policy:8s} median this {this:6.1f} s  other {other_s:6.1f} s  "
                f"ratio {this / other_s:.3f} (pairs {min(ratios):.3f}-{max(ratios):.3f}), "
                f"CPU {rows[-1]['cpu_ratio']:.3f}  "
                f"metrics {'identical' if same else 'DIFFER: ' + ', '.join(rows[-1]['differing'])}",
                flush=True,
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policies", default="fifo,srtf,edf,las")
    parser.add_argument("--traces", default="philly-slo,philly-mix1,philly-mix2")
    parser.add_argument("--out", default=None, help="file name under benchmarks/results/")
    parser.add_argument("--against", type=Path, help="another checkout to compare with")
    parser.add_argument("--pairs", type=int, default=3, help="alternating pairs (--against)")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one(*args.child)))
        return
    if args.against:
        if not (args.against / "chronus_py").is_dir():
            raise SystemExit(f"--against {args.against}: no chronus_py package there")
        rows = compare(args.against, args.traces.split(","), args.policies.split(","), args.pairs)
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / (args.out or "replay_speed_ab.json")).write_text(
            json.dumps(rows, indent=1) + "\n"
        )
        if not all(row["same_metrics"] for row in rows):
            raise SystemExit("metrics differ between the checkouts")
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
    (RESULTS / (args.out or "replay_speed.json")).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
