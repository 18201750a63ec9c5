"""Elastic jobs of an ITP trace: the sizes a job may run on, and the reader that builds them.

The job model itself is :class:`chronus_py.model.Job` (a rigid job is one with a single size). A
job may run on any size of ``sizes`` (powers of two from its minimum to its maximum); on
``n`` GPUs it makes ``rate(n)`` iterations per second. Its maximum is the size with the highest
measured throughput among the powers of two up to ``min(global batch, 64)``: past that point more
GPUs slow it down (this rule reproduces every per-job cap ElasticFlow's simulator uses on the A100
tables). A rigid job is one with a single size: its requested ``num_gpu``.

A row is rigid when the trace has an ``elastic`` column whose value is 0, or when the throughput
table has no curve for its (model, batch size); a rigid job without a curve runs at
``num_iteration / duration`` iterations per second (its trace runtime).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from chronus_py.elastic.throughputs import ThroughputTable
from chronus_py.errors import InputError
from chronus_py.model import DeadlineOption, Job, JobKind
from chronus_py.readers.elasticflow_csv import COLUMNS
from chronus_py.readers.table import Table

LARGEST = 64


def elastic_sizes(curve: dict[int, float], batch: int, limit: int) -> list[int]:
    """Powers of two from 1 up to the fastest measured size <= min(batch, 64, limit)."""
    top = min(batch, LARGEST, limit)
    powers = [n for n in sorted(curve) if n & (n - 1) == 0 and n <= top]
    if not powers:
        return []
    fastest = max(powers, key=lambda n: (curve[n], -n))
    return [n for n in powers if n <= fastest]


def make_job(
    id: str,
    submit: float,
    deadline: float,
    iterations: float,
    model: str,
    batch: int,
    requested: int,
    duration: float,
    table: ThroughputTable,
    *,
    elastic: bool = True,
    limit: int = LARGEST,
) -> Job:
    """One trace row as a job: strict-SLO with its one deadline, tenant ``default``."""
    curve = table.curve(model, batch)
    sizes = elastic_sizes(curve, batch, limit) if curve and elastic else []
    if sizes:
        rates = tuple(curve[n] for n in sizes)
    elif curve and requested in curve:
        sizes, rates = [requested], (curve[requested],)
    else:
        sizes, rates = [requested], (iterations / duration,)
    return Job(
        id=id,
        tenant="default",
        gpus=requested,
        submit=submit,
        kind=JobKind.STRICT_SLO,
        deadlines=(DeadlineOption(deadline, 1.0),),
        duration=duration,
        iterations=iterations,
        model=model,
        batch=batch,
        sizes=tuple(sizes),
        rates=tuple(rates),
    )


def read_elastic_trace(
    path: Path, table: ThroughputTable, *, cluster_gpus: int, skip_bad_rows: bool = False
) -> tuple[list[Job], Table]:
    """Jobs of an ITP trace (ElasticFlow's columns), in submission order, and the checked table
    (its ``dropped`` counts the rows that were left out and why)."""
    t = Table(path, COLUMNS)
    ids = t.unique("job_id")
    submit = t.number("submission_time", minimum=0)
    iterations = t.number("num_iteration", minimum=0)
    batch = t.number("batch_size", integer=True, minimum=1)
    gpus = t.number("num_gpu", integer=True, minimum=0)
    duration = t.number("duration", minimum=0)
    deadline = t.number("deadline")
    elastic = t.number("elastic", integer=True, minimum=0) if t.has("elastic") else None
    models = t.text("model_name")
    t.flag(models == "", "column model_name", "empty")
    t.flag(deadline < submit, "column deadline", "is before submission_time")
    t.drop(gpus == 0, "num_gpu is 0")
    t.drop((iterations == 0) | (duration == 0), "no work (num_iteration or duration is 0)")
    t.drop(gpus > cluster_gpus, "num_gpu exceeds the cluster")
    jobs = [
        make_job(
            str(ids[r]),
            float(submit[r]),
            float(deadline[r]),
            float(iterations[r]),
            str(models[r]),
            int(batch[r]),
            int(gpus[r]),
            float(duration[r]),
            table,
            elastic=elastic is None or bool(elastic[r]),
            limit=cluster_gpus,
        )
        for r in t.keep(skip_bad_rows)
    ]
    jobs.sort(key=lambda j: (j.submit, j.id))
    if not jobs:
        raise InputError(path, "no job left to replay")
    return jobs, t


def ceiling(jobs: list[Job]) -> float:
    """The elastic ceiling: share of jobs that meet their deadline alone on an empty cluster at
    their fastest size with no overhead. No scheduler can do better on the trace."""
    if not jobs:
        return 0.0
    ok = np.array([j.submit + j.best_time() <= j.first_deadline for j in jobs])
    return float(ok.mean())
