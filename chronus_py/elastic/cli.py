"""``chronus replay --elastic [POLICY]``: replay an ITP trace with elastic jobs.

``chronus/cli/replay.py`` adds these flags and hands the parsed arguments here when
``--elastic`` is given; the metrics are printed like ``chronus replay`` prints its own.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from chronus_py.policies import ELASTIC


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--elastic",
        nargs="?",
        const="elastic-chronus",
        choices=sorted(ELASTIC),
        help="elastic mode: jobs run on any power-of-two size up to their model's cap, "
        "progress by throughput; policy elastic-chronus (default), elasticflow "
        "or elastic-edf (ignores --policy)",
    )
    p.add_argument(
        "--throughputs",
        type=Path,
        help="directory of <model>.csv throughput tables (default: the bundled A100 "
        "tables of ElasticFlow)",
    )
    p.add_argument(
        "--elastic-backend",
        choices=("greedy", "cpsat"),
        default="greedy",
        help="elastic-chronus admission: greedy lease plan only (default), or CP-SAT where the "
        "greedy plan refuses a job (slower; see benchmarks/RESULTS.md)",
    )
    p.add_argument(
        "--resize-scale",
        type=float,
        default=1.0,
        help="multiply the resize overhead model (default 1: 2-7 s per resize, "
        "+27-47 s per (re)start, +2(log2 n+1) s on new GPUs; 0 turns it off)",
    )


def run_elastic(args: argparse.Namespace) -> int:
    from chronus_py.cli.progress import progress_bar
    from chronus_py.cli.replay import format_table
    from chronus_py.elastic.replay import replay_trace
    from chronus_py.errors import InputError

    if args.cluster is not None or args.profiling or args.estimate_sigma:
        raise InputError(
            "--elastic", "does not combine with --cluster, --profiling or --estimate-sigma yet"
        )
    if args.resize_scale < 0:
        raise InputError("--resize-scale", "must be >= 0")
    metrics, result = replay_trace(
        args.trace,
        throughputs=args.throughputs,
        policy=args.elastic,
        nodes=args.nodes,
        gpus_per_node=args.gpus_per_node,
        resize_scale=args.resize_scale,
        backend=args.elastic_backend,
        skip_bad_rows=args.skip_bad_rows,
        on_progress=progress_bar("replay"),
    )
    if args.out:
        from chronus_py.replay import write_jobs_csv

        args.out.mkdir(parents=True, exist_ok=True)
        write_jobs_csv(result.jobs, args.out / "jobs.csv", elastic=True)
        (args.out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    print(json.dumps(metrics) if args.json else format_table(metrics))
    if metrics["dropped_rows"]:
        reasons = ", ".join(f"{n} x {why}" for why, n in metrics["dropped_reasons"].items())
        print(f"dropped {metrics['dropped_rows']} row(s): {reasons}", file=sys.stderr)
    return 0
