"""Replay metrics exactly as docs/metrics.md (v1) defines them, and the per-job CSV rows, for
rigid and elastic replays alike."""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path
from typing import Iterable

import numpy as np

from chronus_py.engine.loop import ReplayResult
from chronus_py.jobs.model import shown_seconds
from chronus_py.jobs.sizes import ceiling
from chronus_py.jobs.state import JobState

JOB_COLUMNS = (
    "job_id",
    "submit",
    "first_start",
    "finish",
    "gpus",
    "kind",
    "deadlines",
    "met_deadline_index",
    "guaranteed",
    "preemptions",
    "restarts",
)
ELASTIC_JOB_COLUMNS = JOB_COLUMNS + (
    "min_gpus",
    "max_gpus",
    "requested_gpus",
    "resizes",
    "overhead_seconds",
    "gpu_seconds",
)
"""An elastic replay's ``jobs.csv``: the rigid columns first (one reader, e.g. the report, takes
both), then what elasticity adds."""


def met_index(state: JobState) -> int | None:
    """Index of the first (tightest) deadline option the job met, or None."""
    for i, option in enumerate(state.job.deadlines):
        if state.finish is not None and state.finish <= option.at:
            return i
    return None


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def _pct(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def summarize(result: ReplayResult, *, trace: str, dropped: Counter) -> dict:
    """The metrics of one replay, rigid or elastic. Jobs that never finished (an elastic policy
    declined or dropped them) count as misses and stay out of the JCT and makespan figures. An
    elastic replay also reports what elasticity cost (``ELASTIC_KEYS``); every ITP job has one
    deadline, so its ``slo_deadline_ratio`` is the first-deadline ratio ElasticFlow publishes."""
    jobs = result.jobs
    slo = [s for s in jobs if s.job.is_slo]
    be = [s for s in jobs if not s.job.is_slo]
    finished = [s for s in jobs if s.finish is not None]
    met = {s.id: met_index(s) for s in slo}
    guaranteed = [s for s in slo if s.was_guaranteed is not None]
    be_jct = [s.finish - s.job.submit for s in be]
    begin = min((s.job.submit for s in jobs), default=0.0)
    makespan = max((s.finish for s in finished), default=begin) - begin
    if result.elastic:  # sizes change within a run: GPU time is banked per size
        busy = sum(s.gpu_seconds for s in jobs)
    else:
        busy = sum(s.gpus * s.wall for s in jobs)
    gpus = result.cluster.gpus
    out = {
        "trace": trace,
        "policy": result.policy,
        "gpus": gpus,
        "jobs": len(jobs),
        "dropped_rows": sum(dropped.values()),
        "dropped_reasons": dict(sorted(dropped.items())),
        "slo_jobs": len(slo),
        "be_jobs": len(be),
        "slo_deadline_ratio": _mean([met[s.id] == 0 for s in slo]),
        "slo_value_ratio": _mean(
            [
                s.job.deadlines[met[s.id]].value / s.job.max_value if met[s.id] is not None else 0.0
                for s in slo
            ]
        ),
        "slo_last_deadline_ratio": _mean([met[s.id] is not None for s in slo]),
        "guaranteed_jobs": len(guaranteed),
        "guaranteed_miss_ratio": _mean(
            [s.finish is None or s.finish > s.was_guaranteed.at for s in guaranteed]
        ),
    }
    if not result.elastic:
        out |= {
            "be_avg_jct": _mean(be_jct),
            "be_p50_jct": _pct(be_jct, 50),
            "be_p95_jct": _pct(be_jct, 95),
            "be_p99_jct": _pct(be_jct, 99),
        }
    out |= {
        "slo_avg_jct": _mean([s.finish - s.job.submit for s in slo if s.finish is not None]),
        "avg_jct": _mean([s.finish - s.job.submit for s in finished]),
        "avg_queueing_delay": _mean(
            [s.first_start - s.job.submit for s in jobs if s.first_start is not None]
        ),
        "preemptions_per_job": _mean([s.preemptions for s in jobs]),
        "makespan": makespan,
        "gpu_utilization": busy / (gpus * makespan) if makespan > 0 else None,
        "wall_seconds": result.wall_seconds,
    }
    if result.elastic:
        out |= _elastic_costs(result, busy)
    return out


def _elastic_costs(result: ReplayResult, busy: float) -> dict:
    """What elasticity cost (resizes and their overhead) and the trace's elastic ceiling."""
    jobs = result.jobs
    overhead = sum(s.overhead_gpu_seconds for s in jobs)
    resizes = sum(s.resizes for s in jobs)
    return {
        "cpu_seconds": result.cpu_seconds,
        "elastic_ceiling": ceiling([s.job for s in jobs]),
        "rigid_jobs": sum(s.job.rigid for s in jobs),
        "finished_jobs": sum(s.finish is not None for s in jobs),
        "declined_jobs": sum(s.finish is None for s in jobs),
        "started_jobs": sum(s.first_start is not None for s in jobs),
        "resizes": resizes,
        "resizes_per_job": resizes / len(jobs) if jobs else None,
        "restarts": sum(s.starts for s in jobs),
        "resize_overhead_gpu_seconds": overhead,
        "resize_overhead_share": overhead / busy if busy else None,
        "placement_failures": result.placement_failures,
        "events": result.events,
    }


def job_rows(jobs: Iterable[JobState], *, elastic: bool = False) -> Iterable[dict]:
    """One row per job. In an elastic replay ``gpus`` is the GPUs a job held on average while it
    ran (rounded), so (first start, finish, gpus) covers about the GPU time it used, and the row
    adds its sizes, resizes and pauses; a job that never ran has no start and no finish."""
    for s in jobs:
        index = met_index(s) if s.job.is_slo else None
        row = {
            "job_id": s.id,
            "submit": s.job.submit,
            "first_start": s.first_start,
            "finish": s.finish,
            "gpus": _held(s) if elastic else s.gpus,
            "kind": s.job.kind.value,
            "deadlines": "-".join(shown_seconds(d.at) for d in s.job.deadlines),
            "met_deadline_index": "" if index is None else index,
            "guaranteed": s.was_guaranteed is not None,
            "preemptions": s.preemptions,
            "restarts": s.starts,
        }
        if elastic:
            row |= {
                "min_gpus": s.job.min_size,
                "max_gpus": s.job.max_size,
                "requested_gpus": s.job.gpus,
                "resizes": s.resizes,
                "overhead_seconds": round(s.overhead_seconds, 3),
                "gpu_seconds": round(s.gpu_seconds, 3),
            }
        yield row


def _held(s: JobState) -> int:
    ran = s.first_start is not None and s.finish is not None and s.finish > s.first_start
    return round(s.gpu_seconds / (s.finish - s.first_start)) if ran else 0


def write_jobs_csv(jobs: Iterable[JobState], path: Path, *, elastic: bool = False) -> None:
    """One row per job; an elastic replay's rows also say the sizes, resizes and pauses."""
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=ELASTIC_JOB_COLUMNS if elastic else JOB_COLUMNS)
        writer.writeheader()
        writer.writerows(job_rows(jobs, elastic=elastic))
