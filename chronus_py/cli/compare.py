"""``chronus compare``: policies x traces x parameters into results.csv, report.md and plots."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path


def _list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare",
        help="compare policies side by side over traces and a parameter grid",
        description="Replay every trace x policy x parameter combination and write "
        "results.csv (one row per run), report.md and PNG plots into --out. "
        "Runs already in --out are skipped, failed ones retried.",
    )
    p.add_argument(
        "--out", type=Path, required=True, help="results directory (created; resumed if it exists)"
    )
    p.add_argument(
        "--config",
        type=Path,
        help="grid YAML (keys as the options below); options given override it",
    )
    p.add_argument("--traces", type=_list, help="comma-separated bundled trace names or CSV files")
    from chronus_py.policies import ELASTIC, POLICIES

    p.add_argument(
        "--policies",
        type=_list,
        help="comma-separated policies "
        f"({', '.join(p for p in POLICIES if p not in ELASTIC)}; elastic, on ITP traces: "
        f"{', '.join(ELASTIC)})",
    )
    p.add_argument(
        "--lease-min",
        type=_list,
        help="lease lengths in minutes, for policies with a lease (default 20)",
    )
    p.add_argument("--nodes", type=_list, help="cluster sizes in nodes (default 120)")
    p.add_argument("--gpus-per-node", type=int, help="GPUs per node (default 8)")
    p.add_argument(
        "--load",
        type=_list,
        help="load factors: submit times divided by this, deadlines keep their offsets (default 1)",
    )
    p.add_argument(
        "--sigma", type=_list, help="log-normal runtime estimation error sigmas (default 0)"
    )
    p.add_argument(
        "--seeds",
        type=_list,
        help="seeds of the estimation error, used when sigma > 0 or with profiling (default 0)",
    )
    p.add_argument(
        "--cluster", type=_list, help="HiveD cluster configs to replay on (instead of --nodes)"
    )
    p.add_argument(
        "--tenant-map", help="YAML mapping trace tenants to the configs' virtual clusters"
    )
    p.add_argument(
        "--slowdown", type=_list, help="on/off: slow jobs by how their placement spreads them"
    )
    p.add_argument("--round-requests", help="on/off: jobs hold the {1, 2, 4, whole nodes} round-up")
    p.add_argument(
        "--profiling", type=_list, help="on/off: run every new job on a profiling pool first"
    )
    p.add_argument("--profiling-nodes", type=_list, help="nodes in the profiling pool (default 4)")
    p.add_argument("--profile-minutes", type=_list, help="profiling window in minutes (default 5)")
    p.add_argument("--profiling-order", type=_list, help="deadline or fifo (default deadline)")
    p.add_argument("--estimates", type=_list, help="oracle, pool or realistic (default oracle)")
    p.add_argument(
        "--throughputs",
        help="elastic policies: directory of <model>.csv throughput tables (default: the "
        "bundled A100 tables of ElasticFlow)",
    )
    p.add_argument(
        "--resize-scale",
        type=_list,
        help="elastic policies: multipliers of the resize overhead model (default 1)",
    )
    p.add_argument(
        "--executor",
        choices=("serial", "process", "ray"),
        default="process",
        help="where runs execute (default: a local process pool)",
    )
    p.add_argument(
        "--workers",
        type=int,
        help="parallel runs (default: the CPUs available; Ray: its cluster's)",
    )
    p.add_argument("--ray-address", help="Ray cluster to join (default: start Ray locally)")
    p.add_argument(
        "--no-plots", action="store_true", help="write the table and report without figures"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from chronus_py.cli.progress import progress_bar
    from chronus_py.errors import InputError
    from chronus_py.sweep import compare, make_grid, read_grid

    values = read_grid(args.config) if args.config else {}
    from chronus_py.sweep.grid import LIST_KEYS, SCALAR_KEYS

    for key in (*LIST_KEYS, *SCALAR_KEYS):
        if key == "options":
            continue
        given = getattr(args, key)
        if given is not None:
            values[key] = given
    if args.workers is not None and args.workers <= 0:
        raise InputError("--workers", "must be positive")
    if args.ray_address and args.executor != "ray":
        raise InputError("--ray-address", "only applies with --executor ray")
    grid = make_grid(args.config or "command line", values)
    from chronus_py.cli.outputs import make_out_dir
    from chronus_py.readers import trace_path

    for trace in grid.traces:
        trace_path(trace)  # a missing trace file is refused before any run starts
    make_out_dir(args.out)
    bar = progress_bar("compare")

    def on_result(result, done: int, total: int) -> None:
        if bar:
            bar(done, total)
        else:
            status = (
                f"FAILED: {result.row['error']}"
                if result.failed
                else f"{result.row['wall_seconds']:.1f} s"
            )
            print(f"[{done}/{total}] {result.config.key}  {status}", file=sys.stderr, flush=True)

    command = (
        "chronus " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        if sys.argv[1:2] == ["compare"]
        else "chronus compare"
    )
    outcome = compare(
        grid,
        args.out,
        executor=args.executor,
        workers=args.workers,
        ray_address=args.ray_address,
        on_result=on_result,
        plots=not args.no_plots,
        command=command,
    )
    if not outcome.failed:
        from chronus_py.ui.report import write_comparison

        write_comparison(args.out, grid)  # report.html: a run's schedule drawn, and the plots
    print(
        f"{outcome.ran} run(s) made, {outcome.skipped} already in {outcome.out / 'results.csv'}, "
        f"{outcome.failed} failed; report: {outcome.report}"
    )
    if outcome.plots_skipped:
        print(outcome.plots_skipped, file=sys.stderr)
    return 1 if outcome.failed else 0
