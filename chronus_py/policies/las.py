"""Tiresias-style discretised two-dimensional least-attained-service (2D-LAS, NSDI'19).

Attained service is GPU-seconds (GPUs x time run), so wide and long jobs sink together. Jobs sit in
queues cut at ``thresholds``; a lower queue always runs first and jobs within a queue keep arrival
order, which avoids the thrashing of continuous LAS. A running job's key worsens only when it
crosses a threshold, so the scheduler wakes up exactly then. Tiresias' starvation knob (promote a
job that waited too long) is not modelled.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from chronus_py.jobs.state import JobState
from chronus_py.policies.base import OrderPolicy

HOUR = 3600.0


@dataclass
class LAS(OrderPolicy):
    thresholds: tuple[float, ...] = (1 * HOUR, 10 * HOUR)
    name: str = "las"

    def queue(self, job: JobState, now: float) -> int:
        return bisect.bisect_right(self.thresholds, job.attained(now))

    def key(self, job: JobState, now: float) -> tuple:
        return (self.queue(job, now), job.job.submit, job.seq)

    def key_worsens_at(self, job: JobState, now: float) -> float | None:
        q = self.queue(job, now)
        if q >= len(self.thresholds):
            return None
        rate = job.gpus * job.speed
        return now + (self.thresholds[q] - job.attained(now)) / rate
