"""Elastic replay metrics: the keys of ``chronus replay --json`` where they apply, plus what
elasticity costs (resizes and their overhead) and the trace's elastic ceiling.

Every job of an ITP trace has one deadline, so ``slo_deadline_ratio`` is the first-deadline ratio
ElasticFlow publishes: jobs finished by their deadline over all jobs (declined and dropped jobs
count as misses). ``guaranteed_miss_ratio`` is over the jobs a policy promised.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from chronus_py.elastic.engine import ElasticResult
from chronus_py.elastic.jobs import ceiling


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def summarize(result: ElasticResult, *, trace: str, dropped: Counter) -> dict:
    runs = result.runs
    finished = [r for r in runs if r.finish is not None]
    met = [r.finish is not None and r.finish <= r.deadline for r in runs]
    promised = [r for r in runs if r.was_guaranteed is not None]
    starts = [r.first_start for r in runs if r.first_start is not None]
    begin = min(r.job.submit for r in runs)
    end = max([r.finish for r in finished] or [begin])
    makespan = end - begin
    busy = sum(r.gpu_seconds for r in runs)
    overhead = sum(r.overhead_gpu_seconds for r in runs)
    resizes = sum(r.resizes for r in runs)
    return {
        "trace": trace,
        "policy": result.policy,
        "gpus": result.gpus,
        "jobs": len(runs),
        "dropped_rows": sum(dropped.values()),
        "dropped_reasons": dict(sorted(dropped.items())),
        "slo_jobs": len(runs),
        "be_jobs": 0,
        "slo_deadline_ratio": _mean(met),
        "slo_value_ratio": _mean(met),
        "slo_last_deadline_ratio": _mean(met),
        "guaranteed_jobs": len(promised),
        "guaranteed_miss_ratio": _mean(
            [r.finish is None or r.finish > r.deadline for r in promised]
        ),
        "slo_avg_jct": _mean([r.finish - r.job.submit for r in finished]),
        "avg_jct": _mean([r.finish - r.job.submit for r in finished]),
        "avg_queueing_delay": _mean(
            [s - r.job.submit for r, s in ((r, r.first_start) for r in runs) if s is not None]
        ),
        "preemptions_per_job": _mean([r.preemptions for r in runs]),
        "makespan": makespan,
        "gpu_utilization": busy / (result.gpus * makespan) if makespan > 0 else None,
        "wall_seconds": result.wall_seconds,
        "cpu_seconds": result.cpu_seconds,
        "elastic_ceiling": ceiling([r.job for r in runs]),
        "rigid_jobs": sum(r.job.rigid for r in runs),
        "finished_jobs": len(finished),
        "declined_jobs": sum(r.finish is None for r in runs),
        "started_jobs": len(starts),
        "resizes": resizes,
        "resizes_per_job": resizes / len(runs) if runs else None,
        "restarts": sum(r.starts for r in runs),
        "resize_overhead_gpu_seconds": overhead,
        "resize_overhead_share": overhead / busy if busy else None,
        "placement_failures": result.placement_failures,
        "events": result.events,
    }
