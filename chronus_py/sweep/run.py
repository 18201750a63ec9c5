"""One run of a sweep: a pure function of its :class:`RunConfig`, so any executor gives the same
row.

``run`` replays the run's :class:`~chronus_py.engine.setup.ReplaySetup` (the same setup
``chronus replay`` builds), or for an elastic policy the elastic replay of ``chronus replay
--elastic``, and returns the metrics row (plus the run's parameters) and a few small series the
plots need. Nothing
depends on the worker, the order of runs or the clock except the ``wall_seconds`` metric.
"""

from __future__ import annotations

import json
import math
import traceback
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Sequence

import numpy as np

from chronus_py.engine.metrics import met_index
from chronus_py.sweep.grid import RunConfig
from chronus_py.sweep.record import BusyRecorder, hourly_busy

DAY = 86400.0
METRIC_COLUMNS = (
    "gpus",
    "jobs",
    "dropped_rows",
    "dropped_reasons",
    "slo_jobs",
    "be_jobs",
    "slo_deadline_ratio",
    "slo_value_ratio",
    "slo_last_deadline_ratio",
    "guaranteed_jobs",
    "guaranteed_miss_ratio",
    "be_avg_jct",
    "be_p50_jct",
    "be_p95_jct",
    "be_p99_jct",
    "slo_avg_jct",
    "avg_jct",
    "avg_queueing_delay",
    "preemptions_per_job",
    "makespan",
    "gpu_utilization",
    "wall_seconds",
    "elastic_ceiling",
    "declined_jobs",
    "resizes_per_job",
    "resize_overhead_share",
)
QUANTILES = np.linspace(0, 100, 101)


@dataclass(frozen=True)
class RunResult:
    """``row``: parameters + metrics (or + ``error``); ``series``: per-run data for the plots."""

    config: RunConfig
    row: dict[str, Any]
    series: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return bool(self.row.get("error"))


@lru_cache(maxsize=4)
def _read(trace: str):
    from chronus_py.readers import read_trace

    return read_trace(trace)


def run(config: RunConfig) -> RunResult:
    """Replay one grid point. Raises on bad input (``safe_run`` turns that into a row)."""
    if config.elastic:
        return run_elastic(config)
    from chronus_py.engine import summarize
    from chronus_py.engine.setup import run_setup

    recorders: list[BusyRecorder] = []

    def record(policy):
        recorders.append(BusyRecorder(policy))
        return recorders[-1]

    result, loaded = run_setup(config.setup(), trace=_read(config.trace), wrap_policy=record)
    metrics = summarize(result, trace=loaded.name, dropped=loaded.dropped)
    metrics["dropped_reasons"] = json.dumps(metrics["dropped_reasons"], sort_keys=True)
    row = {**config.columns(), **{k: metrics.get(k) for k in METRIC_COLUMNS}, "error": ""}
    return RunResult(config, row, series(result.jobs, recorders[0], result.cluster.gpus))


def run_elastic(config: RunConfig) -> RunResult:
    """An elastic grid point: ``chronus replay --elastic POLICY`` with the run's tables,
    cluster and resize overhead scale. Its row has the rigid metrics that apply (every ITP job
    is an SLO job) and what elasticity costs; its series the per-day deadline ratio and the
    preemption counts."""
    from pathlib import Path

    from chronus_py.engine.elastic_setup import replay_trace

    metrics, result = replay_trace(
        config.trace,
        throughputs=None if config.throughputs is None else Path(config.throughputs),
        policy=config.policy,
        nodes=config.nodes,
        gpus_per_node=config.gpus_per_node,
        resize_scale=config.resize_scale,
    )
    metrics["dropped_reasons"] = json.dumps(metrics["dropped_reasons"], sort_keys=True)
    row = {**config.columns(), **{k: metrics.get(k) for k in METRIC_COLUMNS}, "error": ""}
    origin = min(r.job.submit for r in result.jobs)
    days: dict[int, list[bool]] = {}
    for r in result.jobs:
        met = r.finish is not None and r.finish <= r.deadline
        days.setdefault(int((r.job.submit - origin) // DAY), []).append(met)
    return RunResult(
        config,
        row,
        {
            "daily_deadline_ratio": [
                [d, float(np.mean(m)), len(m)] for d, m in sorted(days.items())
            ],
            "preemption_counts": np.bincount([r.preemptions for r in result.jobs]).tolist(),
        },
    )


def safe_run(config: RunConfig) -> RunResult:
    """``run``, but a failure becomes a row with its error, so one bad run never stops a sweep."""
    try:
        return run(config)
    except Exception as exc:  # the sweep records any failure of a run and goes on
        return failed(config, exc)


def failed(config: RunConfig, exc: BaseException) -> RunResult:
    last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    where = f" (at {last[0].filename.rsplit('/', 1)[-1]}:{last[0].lineno})" if last else ""
    message = " ".join(f"{type(exc).__name__}: {exc}".split())
    return RunResult(
        config, {**config.columns(), **{k: None for k in METRIC_COLUMNS}, "error": message + where}
    )


def series(jobs: Sequence, recorder: BusyRecorder, gpus: int) -> dict[str, Any]:
    """Small per-run data: BE JCT percentiles (0..100), per-day first-deadline ratio by submit
    day, exact hourly GPU utilisation, and how many jobs were preempted k times."""
    origin = min(s.job.submit for s in jobs)
    be = [s.finish - s.job.submit for s in jobs if not s.job.is_slo]
    days: dict[int, list[bool]] = {}
    for s in jobs:
        if s.job.is_slo:
            days.setdefault(int((s.job.submit - origin) // DAY), []).append(met_index(s) == 0)
    times, level = recorder.levels(jobs)
    hourly = hourly_busy(times, level, origin) / (gpus * 3600.0)
    counts = np.bincount([s.preemptions for s in jobs]).tolist()
    return {
        "be_jct_percentiles": np.percentile(be, QUANTILES).round(3).tolist() if be else [],
        "daily_deadline_ratio": [[d, float(np.mean(m)), len(m)] for d, m in sorted(days.items())],
        "hourly_utilization": [round(float(u), 5) for u in hourly],
        "preemption_counts": counts,
    }


def same_metrics(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Rows equal except wall time (the only clock-dependent metric); NaN equals NaN."""
    keys = (set(a) | set(b)) - {"wall_seconds"}

    def norm(v: Any) -> Any:
        return None if v is None or (isinstance(v, float) and math.isnan(v)) or v == "" else v

    return all(norm(a.get(k)) == norm(b.get(k)) for k in keys)
