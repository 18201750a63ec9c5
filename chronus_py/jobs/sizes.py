"""Elastic jobs: the sizes a job may run on (traces are read into them by
``chronus_py.readers.elastic``).

The job model itself is :class:`chronus_py.jobs.model.Job` (a rigid job is one with a single size).
A job may run on any size of ``sizes`` (powers of two from its minimum to its maximum); on
``n`` GPUs it makes ``rate(n)`` iterations per second. Its maximum is the size with the highest
measured throughput among the powers of two up to ``min(global batch, 64)``: past that point more
GPUs slow it down (this rule reproduces every per-job cap ElasticFlow's simulator uses on the A100
tables). A rigid job is one with a single size: its requested ``num_gpu``.

A row is rigid when the trace has an ``elastic`` column whose value is 0, or when the throughput
table has no curve for its (model, batch size); a rigid job without a curve runs at
``num_iteration / duration`` iterations per second (its trace runtime).
"""

from __future__ import annotations

import numpy as np

from chronus_py.jobs.model import DeadlineOption, Job, JobKind
from chronus_py.jobs.throughputs import ThroughputTable

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


def ceiling(jobs: list[Job]) -> float:
    """The elastic ceiling: share of jobs that meet their deadline alone on an empty cluster at
    their fastest size with no overhead. No scheduler can do better on the trace."""
    if not jobs:
        return 0.0
    ok = np.array([j.submit + j.best_time() <= j.first_deadline for j in jobs])
    return float(ok.mean())
