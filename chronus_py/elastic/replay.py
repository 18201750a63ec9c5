"""One elastic replay from a :class:`~chronus_py.replay.setup.ReplaySetup`: trace + throughput
tables + cluster size + policy -> metrics, and its ``jobs.csv`` in the rigid replay's columns."""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path
from typing import Callable, Iterable, Sequence

from chronus_py.elastic.engine import ElasticEngine, ElasticResult
from chronus_py.elastic.jobs import ElasticJob
from chronus_py.elastic.metrics import summarize
from chronus_py.elastic.overhead import ResizeOverhead
from chronus_py.elastic.policies import POLICIES
from chronus_py.elastic.run import Run
from chronus_py.elastic.throughputs import read_throughputs
from chronus_py.model import Cluster, JobKind
from chronus_py.readers import TraceRead
from chronus_py.readers.elastic import read_elastic_trace
from chronus_py.replay.metrics import JOB_COLUMNS as RIGID_JOB_COLUMNS
from chronus_py.replay.setup import ReplaySetup
from placement import ConsolidatedAllocator

# The rigid replay's columns first (so one reader, e.g. the report, takes both), then elasticity's.
JOB_COLUMNS = RIGID_JOB_COLUMNS + (
    "min_gpus",
    "max_gpus",
    "requested_gpus",
    "resizes",
    "overhead_seconds",
    "gpu_seconds",
)


def run_elastic_setup(
    setup: ReplaySetup,
    *,
    on_read: Callable[[TraceRead], None] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> tuple[dict, ElasticResult, TraceRead]:
    """Read the trace as elastic jobs (same formats and options as a rigid replay) and replay it
    under ``setup.policy``; ``elastic_backend`` "cpsat" gives elastic Chronus CP-SAT admission
    where its greedy plan refuses (the metrics then count those calls)."""
    setup.check()
    table = read_throughputs(setup.throughputs)
    cluster = Cluster.uniform(setup.nodes, setup.gpus_per_node)
    trace = read_elastic_trace(
        setup.trace,
        table,
        cluster_gpus=cluster.gpus,
        format=setup.format,
        columns=setup.columns,
        time_unit=setup.time_unit,
        skip_bad_rows=setup.skip_bad_rows,
    )
    if on_read is not None:
        on_read(trace)
    allocator = ConsolidatedAllocator([(n.name, n.gpus) for n in cluster.nodes])
    backend = setup.elastic_backend
    make = POLICIES[setup.policy]
    chosen = make(backend=backend) if backend != "greedy" else make()
    engine = ElasticEngine(
        list(scale_load(trace.jobs, setup.load)),
        allocator,
        cluster.gpus,
        setup.gpus_per_node,
        chosen,
        ResizeOverhead(scale=setup.resize_scale),
    )
    result = engine.run(on_progress=on_progress)
    metrics = summarize(result, trace=trace.name, dropped=trace.dropped)
    if backend != "greedy":
        metrics["exact"] = dict(chosen.exact_stats)
    return metrics, result, trace


def replay_trace(
    trace: str | Path,
    *,
    throughputs: Path | None,
    policy: str,
    nodes: int,
    gpus_per_node: int,
    resize_scale: float = 1.0,
    backend: str = "greedy",
    skip_bad_rows: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
) -> tuple[dict, ElasticResult]:
    """An elastic replay of a trace with the default reading (for sweeps and benchmarks)."""
    setup = ReplaySetup(
        trace=str(trace),
        policy=policy,
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        throughputs=throughputs,
        resize_scale=resize_scale,
        elastic_backend=backend,
        skip_bad_rows=skip_bad_rows,
    )
    metrics, result, _ = run_elastic_setup(setup, on_progress=on_progress)
    return metrics, result


def scale_load(jobs: Sequence[ElasticJob], load: float) -> tuple[ElasticJob, ...]:
    """Submit times divided by ``load``; deadlines keep their offsets (as the rigid replay)."""
    if load == 1.0:
        return tuple(jobs)
    return tuple(
        dataclasses.replace(
            j, submit=j.submit / load, deadline=j.deadline - j.submit + j.submit / load
        )
        for j in jobs
    )


def job_rows(runs: Iterable[Run]) -> Iterable[dict]:
    """One row per job. ``gpus`` is the GPUs it held on average while it ran (rounded), so a
    drawing of (first start, finish, gpus) covers about the GPU-time it used; a job that never
    ran has no start and no finish."""
    for r in runs:
        met = r.finish is not None and r.finish <= r.deadline
        ran = r.first_start is not None and r.finish is not None and r.finish > r.first_start
        yield {
            "job_id": r.id,
            "submit": r.job.submit,
            "first_start": r.first_start,
            "finish": r.finish,
            "gpus": round(r.gpu_seconds / (r.finish - r.first_start)) if ran else 0,
            "kind": JobKind.STRICT_SLO.value,
            "deadlines": f"{r.deadline:g}",
            "met_deadline_index": 0 if met else "",
            "guaranteed": r.guaranteed,
            "preemptions": r.preemptions,
            "restarts": r.starts,
            "min_gpus": r.job.min_size,
            "max_gpus": r.job.max_size,
            "requested_gpus": r.job.requested,
            "resizes": r.resizes,
            "overhead_seconds": round(r.overhead_seconds, 3),
            "gpu_seconds": round(r.gpu_seconds, 3),
        }


def write_jobs_csv(runs: Iterable[Run], path: Path) -> None:
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=JOB_COLUMNS)
        writer.writeheader()
        writer.writerows(job_rows(runs))
