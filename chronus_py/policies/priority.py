"""The classic baselines, each one sort key (as in the Chronus notes' comparison runs)."""

from __future__ import annotations

from chronus_py.jobs.state import JobState
from chronus_py.policies.base import OrderPolicy


class FIFO(OrderPolicy):
    """Non-preemptive, arrival order; a later job that fits starts when the head does not
    (backfill)."""

    name = "fifo"
    preemptive = False

    def key(self, job: JobState, now: float) -> tuple:
        return (job.job.submit, job.seq)


class SRTF(OrderPolicy):
    """Preemptive shortest remaining time first (estimated seconds of work left)."""

    name = "srtf"

    def key(self, job: JobState, now: float) -> tuple:
        return (job.remaining(now), job.seq)


class SRTFGPU(OrderPolicy):
    """Preemptive shortest remaining GPU-time first: SRTF weighted by GPUs, the order of the
    Chronus policy's pool. The baseline that tells how much of Chronus' result is that order."""

    name = "srtf-gpu"

    def key(self, job: JobState, now: float) -> tuple:
        return (job.remaining(now) * job.gpus, job.seq)


class EDF(OrderPolicy):
    """Preemptive earliest deadline first: SLO jobs by first deadline, then best-effort by SRTF."""

    name = "edf"

    def key(self, job: JobState, now: float) -> tuple:
        if job.job.is_slo:
            return (0, job.job.first_deadline, job.seq)
        return (1, job.remaining(now), job.seq)
