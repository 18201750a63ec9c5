"""One elastic replay from files: trace + throughput tables + cluster size + policy -> metrics."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Callable, Iterable

from chronus_py.elastic.engine import ElasticEngine, ElasticResult
from chronus_py.elastic.jobs import read_elastic_trace
from chronus_py.elastic.metrics import summarize
from chronus_py.elastic.policies import POLICIES
from chronus_py.elastic.throughputs import read_throughputs
from chronus_py.errors import InputError
from chronus_py.model import Cluster
from chronus_py.overhead import make_overhead
from chronus_py.readers import trace_path
from chronus_py.state import JobState
from placement import ConsolidatedAllocator

JOB_COLUMNS = (
    "job_id",
    "submit",
    "deadline",
    "first_start",
    "finish",
    "met",
    "guaranteed",
    "min_gpus",
    "max_gpus",
    "requested_gpus",
    "starts",
    "resizes",
    "preemptions",
    "overhead_seconds",
)


def replay_trace(
    trace: str | Path,
    *,
    throughputs: Path | None,
    policy: str,
    nodes: int,
    gpus_per_node: int,
    resize_scale: float = 1.0,
    overhead: str = "pause",
    backend: str = "greedy",
    skip_bad_rows: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
) -> tuple[dict, ElasticResult]:
    """Replay an ITP trace under an elastic policy; ``backend`` "cpsat" gives elastic Chronus
    CP-SAT admission where its greedy plan refuses (the metrics then count those calls).
    ``overhead`` names the overhead model (``chronus_py.overhead``), scaled by ``resize_scale``."""
    if nodes <= 0 or gpus_per_node <= 0:
        raise InputError("--nodes/--gpus-per-node", "must be positive")
    if backend != "greedy" and policy != "elastic-chronus":
        raise InputError("--elastic-backend", f"only elastic-chronus has one, not {policy}")
    try:
        model = make_overhead(overhead, resize_scale)
    except ValueError as exc:
        raise InputError("--overhead", str(exc)) from None
    name, path = trace_path(trace)
    table = read_throughputs(throughputs)
    cluster = Cluster.uniform(nodes, gpus_per_node)
    jobs, checked = read_elastic_trace(
        path, table, cluster_gpus=cluster.gpus, skip_bad_rows=skip_bad_rows
    )
    allocator = ConsolidatedAllocator([(n.name, n.gpus) for n in cluster.nodes])
    chosen = POLICIES[policy](backend=backend) if backend != "greedy" else POLICIES[policy]()
    engine = ElasticEngine(
        jobs,
        allocator,
        cluster.gpus,
        gpus_per_node,
        chosen,
        model,
    )
    result = engine.run(on_progress=on_progress)
    metrics = summarize(result, trace=name, dropped=checked.dropped)
    if backend != "greedy":
        metrics["exact"] = dict(chosen.exact_stats)
    return metrics, result


def job_rows(runs: Iterable[JobState]) -> Iterable[dict]:
    for r in runs:
        yield {
            "job_id": r.id,
            "submit": r.job.submit,
            "deadline": r.deadline,
            "first_start": r.first_start,
            "finish": r.finish,
            "met": r.finish is not None and r.finish <= r.deadline,
            "guaranteed": r.was_guaranteed is not None,
            "min_gpus": r.job.min_size,
            "max_gpus": r.job.max_size,
            "requested_gpus": r.job.gpus,
            "starts": r.starts,
            "resizes": r.resizes,
            "preemptions": r.preemptions,
            "overhead_seconds": round(r.overhead_seconds, 3),
        }


def write_jobs_csv(runs: Iterable[JobState], path: Path) -> None:
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=JOB_COLUMNS)
        writer.writeheader()
        writer.writerows(job_rows(runs))
