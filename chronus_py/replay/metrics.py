"""Replay metrics exactly as docs/metrics.md (v1) defines them, and the per-job CSV rows."""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path
from typing import Iterable

import numpy as np

from chronus_py.replay.engine import ReplayResult
from chronus_py.state import JobState

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
    jobs = result.jobs
    slo = [s for s in jobs if s.job.is_slo]
    be = [s for s in jobs if not s.job.is_slo]
    met = {s.id: met_index(s) for s in slo}
    guaranteed = [s for s in slo if s.was_guaranteed is not None]
    be_jct = [s.finish - s.job.submit for s in be]
    makespan = max(s.finish for s in jobs) - min(s.job.submit for s in jobs) if jobs else 0.0
    busy = sum(s.gpus * s.wall for s in jobs)
    gpus = result.cluster.gpus
    return {
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
        "guaranteed_miss_ratio": _mean([s.finish > s.was_guaranteed.at for s in guaranteed]),
        "be_avg_jct": _mean(be_jct),
        "be_p50_jct": _pct(be_jct, 50),
        "be_p95_jct": _pct(be_jct, 95),
        "be_p99_jct": _pct(be_jct, 99),
        "slo_avg_jct": _mean([s.finish - s.job.submit for s in slo]),
        "avg_jct": _mean([s.finish - s.job.submit for s in jobs]),
        "avg_queueing_delay": _mean([s.first_start - s.job.submit for s in jobs]),
        "preemptions_per_job": _mean([s.preemptions for s in jobs]),
        "makespan": makespan,
        "gpu_utilization": busy / (gpus * makespan) if makespan > 0 else None,
        "wall_seconds": result.wall_seconds,
    }


def job_rows(jobs: Iterable[JobState]) -> Iterable[dict]:
    for s in jobs:
        index = met_index(s) if s.job.is_slo else None
        yield {
            "job_id": s.id,
            "submit": s.job.submit,
            "first_start": s.first_start,
            "finish": s.finish,
            "gpus": s.gpus,
            "kind": s.job.kind.value,
            "deadlines": "-".join(f"{d.at:g}" for d in s.job.deadlines),
            "met_deadline_index": "" if index is None else index,
            "guaranteed": s.was_guaranteed is not None,
            "preemptions": s.preemptions,
            "restarts": s.starts,
        }


def write_jobs_csv(jobs: Iterable[JobState], path: Path) -> None:
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=JOB_COLUMNS)
        writer.writeheader()
        writer.writerows(job_rows(jobs))
