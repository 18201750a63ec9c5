"""``chronus replay``: replay a trace under a policy and print the metrics."""

from __future__ import annotations

import argparse
import json
import sys
from functools import partial
from pathlib import Path
from typing import Callable

from chronus_py.errors import InputError
from chronus_py.jobs.overhead import OVERHEADS


def add_parser(sub: argparse._SubParsersAction) -> None:
    from chronus_py.policies import POLICIES
    from chronus_py.readers import DEFAULT_TRACE, FORMATS

    p = sub.add_parser(
        "replay",
        help="replay a job trace under a scheduling policy and report metrics",
        description="Replay a job trace on a simulated GPU cluster and report the "
        "metrics of docs/metrics.md.",
    )
    p.add_argument(
        "--trace",
        default=DEFAULT_TRACE,
        help="bundled trace name (philly-slo, philly-mix1, philly-mix2, itp-cluster01, -02, "
        f"-03, -05, -10, elasticflow-philly) or a CSV file (default {DEFAULT_TRACE})",
    )
    p.add_argument(
        "--format",
        choices=sorted(FORMATS),
        help="force the trace format (default: from the header)",
    )
    p.add_argument(
        "--columns",
        metavar="NAME=COLUMN,...",
        help="map a plain trace's (or a preset's) columns: id, submit, duration, start, "
        "end, gpus, instances, tenant, deadline, model, and for --elastic iterations, batch, "
        "elastic (no id: line numbers)",
    )
    p.add_argument(
        "--time-unit",
        choices=("s", "ms", "us", "ns", "min", "h", "d"),
        help="unit of numeric times in a plain or preset trace (default s; dates are "
        "read as dates)",
    )
    p.add_argument(
        "--skip-bad-rows",
        action="store_true",
        help="drop malformed rows (counted per reason) instead of stopping at the first",
    )
    p.add_argument(
        "--policy",
        default="chronus",
        choices=sorted(POLICIES),
        help="scheduling policy (default chronus: lease-based deadline guarantees)",
    )
    p.add_argument("--nodes", type=int, default=120, help="nodes in the cluster (default 120)")
    p.add_argument("--gpus-per-node", type=int, default=8, help="GPUs per node (default 8)")
    p.add_argument(
        "--cluster",
        type=Path,
        help="a HiveD cluster config: replay on its nodes with the cell allocator placing "
        "jobs in their tenant's virtual cluster (overrides --nodes/--gpus-per-node)",
    )
    p.add_argument(
        "--tenant-map",
        type=Path,
        help="YAML mapping trace tenants (the user/VC column) to virtual clusters; "
        "the key 'default' catches the rest",
    )
    p.add_argument(
        "--slowdown",
        action="store_true",
        help="slow jobs down by how their placement spreads them (off reproduces the artifact)",
    )
    p.add_argument(
        "--round-requests",
        action="store_true",
        help="jobs hold the {1, 2, 4, whole nodes} round-up of their GPUs, as Chronus packs them",
    )
    p.add_argument(
        "--load",
        type=float,
        default=1.0,
        help="load factor: submit times divided by this, deadlines keep their offsets (default 1)",
    )
    p.add_argument(
        "--profiling",
        action="store_true",
        help="run every new job on a profiling pool first and schedule by the profiler's "
        "estimate instead of the trace's true duration",
    )
    p.add_argument(
        "--profiling-nodes", type=int, default=4, help="nodes in the profiling pool (default 4)"
    )
    p.add_argument(
        "--profile-minutes", type=float, default=5.0, help="profiling window (default 5)"
    )
    p.add_argument(
        "--profiling-order",
        choices=("deadline", "fifo"),
        default="deadline",
        help="who the pool profiles first: tightest deadline, with backfill (default), "
        "or arrival order (the artifact)",
    )
    p.add_argument(
        "--estimates",
        choices=("oracle", "pool", "realistic"),
        default="oracle",
        help="what the scheduler knows of runtimes: the trace's true ones (oracle, "
        "default), the profiling pool's estimates (pool, same as --profiling), or "
        "nothing until each job is measured in place on its own GPUs (realistic)",
    )
    p.add_argument(
        "--estimate-sigma",
        type=float,
        default=0.0,
        help="log-normal error between estimates and true runtimes (robustness study)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the estimation error (default 0)")
    p.add_argument(
        "--overhead",
        choices=sorted(OVERHEADS),
        help="what a (re)start or resize costs: chronus-restart (extra work per start, the "
        "Chronus artifact's; default of a rigid replay) or pause (the job holds its GPUs and "
        "makes no progress, ElasticFlow's; default of an elastic one); --resize-scale scales it",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument(
        "--out",
        type=Path,
        help="directory for metrics.json, the per-job jobs.csv and report.html",
    )
    from chronus_py.cli.elastic import add_arguments as add_elastic_arguments
    from chronus_py.cli.options import add_settings_arguments

    add_settings_arguments(p)
    add_elastic_arguments(p)
    p.set_defaults(func=run)


def setup_from(args: argparse.Namespace):
    """The :class:`ReplaySetup` of the command line; settings flags only for the chronus policy.
    ``--elastic POLICY`` replaces ``--policy``: the setup is then an elastic replay."""
    from chronus_py.cli.options import settings_given
    from chronus_py.engine.setup import ReplaySetup

    policy = args.elastic or args.policy
    options = settings_given(args, policy)
    return ReplaySetup(
        trace=args.trace,
        policy=policy,
        options=options,
        nodes=args.nodes,
        gpus_per_node=args.gpus_per_node,
        cluster=args.cluster,
        tenant_map=args.tenant_map,
        slowdown=args.slowdown,
        round_requests=args.round_requests,
        load=args.load,
        profiling=args.profiling,
        profiling_nodes=args.profiling_nodes,
        profile_minutes=args.profile_minutes,
        profiling_order=args.profiling_order,
        estimates=args.estimates,
        sigma=args.estimate_sigma,
        seed=args.seed,
        format=args.format,
        columns=args.columns,
        time_unit=args.time_unit,
        skip_bad_rows=args.skip_bad_rows,
        throughputs=args.throughputs,
        resize_scale=args.resize_scale,
        overhead=args.overhead,
        elastic_backend=args.elastic_backend,
    )


def run(args: argparse.Namespace) -> int:
    """Rigid and elastic replays alike: one setup, one table, one ``--out`` directory."""
    from chronus_py.cli.progress import progress_bar
    from chronus_py.selector import ChronusSettings

    # The format detected goes to stderr at once for a person watching a long replay; for a
    # script, once the replay is done, so that a trace refused after it was read (a job wider
    # than the cluster, a tenant with no virtual cluster) is one line on stderr, the error.
    watched = sys.stderr.isatty()
    said: list[str] = []

    def say(read) -> None:
        line = f"{read.name}: {read.detected}"
        if watched:
            print(line, file=sys.stderr)
        else:
            said.append(line)

    setup = setup_from(args)
    if args.out:
        from chronus_py.cli.outputs import make_out_dir

        make_out_dir(args.out)
    bar = progress_bar("replay")
    if setup.elastic:
        from chronus_py.engine import write_jobs_csv
        from chronus_py.engine.elastic_setup import run_elastic_setup

        metrics, result, trace = run_elastic_setup(setup, on_read=say, on_progress=bar)
        count = len(result.jobs)
        write_jobs = partial(write_jobs_csv, result.jobs, elastic=True)
    else:
        from chronus_py.engine import summarize, write_jobs_csv
        from chronus_py.engine.setup import run_setup

        result, trace = run_setup(setup, on_progress=bar, on_read=say)
        count = len(result.jobs)
        metrics = summarize(result, trace=trace.name, dropped=trace.dropped)
        write_jobs = partial(write_jobs_csv, result.jobs)
    if bar:
        bar.finish(count)
    for line in said:
        print(line, file=sys.stderr)
    metrics["cluster"] = (
        str(setup.cluster) if setup.cluster else f"{setup.nodes}x{setup.gpus_per_node}"
    )
    if setup.policy == "chronus":
        metrics["settings"] = ChronusSettings.from_mapping(setup.options).to_dict()
    if args.out:
        write_out(args.out, metrics, write_jobs)
    if args.json:
        print(json.dumps(metrics))
    else:
        print(format_table(metrics))
    if trace.dropped:
        reasons = ", ".join(f"{n} x {why}" for why, n in sorted(trace.dropped.items()))
        print(f"dropped {trace.dropped_rows} row(s): {reasons}", file=sys.stderr)
    return 0


def write_out(out: Path, metrics: dict, write_jobs: Callable[[Path], None]) -> None:
    """``jobs.csv``, ``metrics.json`` and ``report.html`` (the schedule drawn) into ``out``."""
    from chronus_py.ui.report import write_replay

    try:
        write_jobs(out / "jobs.csv")
        (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
        write_replay(out)
    except OSError as exc:
        raise InputError(out, f"cannot write: {exc.strerror or exc}") from None


def format_table(metrics: dict) -> str:
    """Metrics as aligned ``name  value`` lines; times also shown in minutes for readability."""
    width = max(len(k) for k in metrics)
    lines = []
    for key, value in metrics.items():
        if key == "dropped_reasons":
            continue
        if isinstance(value, dict):
            lines.append(f"{key:<{width}}  " + ", ".join(f"{k}={v}" for k, v in value.items()))
            continue
        if isinstance(value, float):
            text = f"{value:.4f}" if abs(value) < 10 else f"{value:,.1f}"
            if key.endswith("jct") or key in ("makespan", "avg_queueing_delay"):
                text += f"  ({value / 60:,.1f} min)"
        else:
            text = "-" if value is None else str(value)
        lines.append(f"{key:<{width}}  {text}")
    return "\n".join(lines)
