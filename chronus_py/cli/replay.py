"""``chronus replay``: replay a trace under a policy and print the metrics."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    from chronus_py.policies import POLICIES
    from chronus_py.readers import DEFAULT_TRACE, FORMATS

    p = sub.add_parser("replay", help="replay a job trace under a scheduling policy and report metrics",
                       description="Replay a job trace on a simulated GPU cluster and report the "
                                   "metrics of ../spec/metrics.md.")
    p.add_argument("--trace", default=DEFAULT_TRACE,
                   help=f"bundled trace name (philly-slo, philly-mix1, philly-mix2) or a CSV file "
                        f"(default {DEFAULT_TRACE})")
    p.add_argument("--format", choices=sorted(FORMATS), help="force the trace format (default: from the header)")
    p.add_argument("--skip-bad-rows", action="store_true",
                   help="drop malformed rows (counted per reason) instead of stopping at the first")
    p.add_argument("--policy", default="chronus", choices=sorted(POLICIES),
                   help="scheduling policy (default chronus: lease-based deadline guarantees)")
    p.add_argument("--nodes", type=int, default=120, help="nodes in the cluster (default 120)")
    p.add_argument("--gpus-per-node", type=int, default=8, help="GPUs per node (default 8)")
    p.add_argument("--cluster", type=Path,
                   help="a HiveD cluster config: replay on its nodes with the cell allocator placing "
                        "jobs in their tenant's virtual cluster (overrides --nodes/--gpus-per-node)")
    p.add_argument("--tenant-map", type=Path,
                   help="YAML mapping trace tenants (the user/VC column) to virtual clusters; "
                        "the key 'default' catches the rest")
    p.add_argument("--slowdown", action="store_true",
                   help="slow jobs down by how their placement spreads them (off reproduces the artifact)")
    p.add_argument("--profiling", action="store_true",
                   help="run every new job on a profiling pool first and schedule by the profiler's "
                        "estimate instead of the trace's true duration")
    p.add_argument("--profiling-nodes", type=int, default=4, help="nodes in the profiling pool (default 4)")
    p.add_argument("--profile-minutes", type=float, default=5.0, help="profiling window (default 5)")
    p.add_argument("--profiling-order", choices=("deadline", "fifo"), default="deadline",
                   help="who the pool profiles first: tightest deadline, with backfill (default), "
                        "or arrival order (the artifact)")
    p.add_argument("--estimate-sigma", type=float, default=0.0,
                   help="log-normal error between estimates and true runtimes (robustness study)")
    p.add_argument("--seed", type=int, default=0, help="seed of the estimation error (default 0)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--out", type=Path, help="directory for metrics.json and the per-job jobs.csv")
    from chronus_py.elastic.cli import add_arguments as add_elastic_arguments
    add_elastic_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from chronus_py.cli.progress import progress_bar
    from chronus_py.errors import InputError
    from chronus_py.policies import make_policy
    from chronus_py.readers import read_trace
    from chronus_py.replay import replay, summarize, write_jobs_csv

    if args.elastic:
        from chronus_py.elastic.cli import run_elastic
        return run_elastic(args)
    trace = read_trace(args.trace, format=args.format, skip_bad_rows=args.skip_bad_rows)
    if not trace.jobs:
        raise InputError(args.trace, "no job left to replay")
    from chronus_py.cluster_setup import setup_cluster

    setup = setup_cluster(trace.jobs, nodes=args.nodes, gpus_per_node=args.gpus_per_node,
                          config=args.cluster, tenant_map=args.tenant_map, slowdown=args.slowdown)
    result = replay(setup.jobs, setup.cluster, make_policy(args.policy), allocator=setup.allocator,
                    speed=setup.speed, on_progress=progress_bar("replay"), **estimation(args))
    metrics = summarize(result, trace=trace.name, dropped=trace.dropped)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        write_jobs_csv(result.jobs, args.out / "jobs.csv")
        (args.out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    if args.json:
        print(json.dumps(metrics))
    else:
        print(format_table(metrics))
    if trace.dropped:
        reasons = ", ".join(f"{n} x {why}" for why, n in sorted(trace.dropped.items()))
        print(f"dropped {trace.dropped_rows} row(s): {reasons}", file=sys.stderr)
    return 0


def estimation(args: argparse.Namespace) -> dict:
    """Replay options for how estimates relate to true runtimes.

    Default: the scheduler knows each true duration (as the Chronus artifact). ``--profiling``:
    jobs pass the profiling pool and are scheduled by its estimate, off by ``--estimate-sigma``.
    ``--estimate-sigma`` alone: the trace duration is the estimate and true runtimes deviate.
    Whenever estimates can be wrong, running jobs are re-estimated from observed progress."""
    from chronus_py.errors import InputError
    from chronus_py.replay.noise import lognormal_truth
    from chronus_py.replay.profiling import ProfilingPool

    if args.estimate_sigma < 0:
        raise InputError("--estimate-sigma", "must be >= 0")
    if args.profiling and (args.profiling_nodes <= 0 or args.profile_minutes <= 0):
        raise InputError("--profiling-nodes/--profile-minutes", "must be positive")
    if args.profiling:
        pool = ProfilingPool(args.profiling_nodes, args.gpus_per_node, args.profile_minutes * 60,
                             sigma=args.estimate_sigma, seed=args.seed, order=args.profiling_order)
        return {"profiling": pool, "reestimate_every": 300.0}
    if args.estimate_sigma > 0:
        return {"truth": lognormal_truth(args.estimate_sigma, args.seed), "reestimate_every": 300.0}
    return {}


def format_table(metrics: dict) -> str:
    """Metrics as aligned ``name  value`` lines; times also shown in minutes for readability."""
    width = max(len(k) for k in metrics)
    lines = []
    for key, value in metrics.items():
        if key == "dropped_reasons":
            continue
        if isinstance(value, float):
            text = f"{value:.4f}" if abs(value) < 10 else f"{value:,.1f}"
            if key.endswith("jct") or key in ("makespan", "avg_queueing_delay"):
                text += f"  ({value / 60:,.1f} min)"
        else:
            text = "-" if value is None else str(value)
        lines.append(f"{key:<{width}}  {text}")
    return "\n".join(lines)
