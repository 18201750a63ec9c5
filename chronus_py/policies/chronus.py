"""The Chronus policy: lease-based guarantees from the selector, then SRTF.

Order: jobs the lease plan must run in this lease, then every other job by remaining GPU-time
(non-guaranteed SLO and best-effort alike, plus guaranteed jobs ahead of their plan, which only
earns them slack), then guaranteed jobs waiting for their planned leases, then hopeless SLO jobs.
Unlike the artifact, nothing is stopped at a lease boundary unless the new order needs its GPUs,
so a job that keeps its place runs on.

The pool is ordered by remaining GPU-time, as the issue asks, not by remaining time as our
``srtf`` baseline is: a 1-GPU job of 5 h no longer waits behind a 32-GPU job of 4 h, which
holds 32 times the capacity. On MIX1 that alone took best-effort JCT from 558 to 459 min and
the first-deadline ratio from 0.9979 to 0.9991 (benchmarks/RESULTS.md).

A guaranteed job running ahead of its plan (it started on GPUs nobody else wanted) competes by
remaining GPU-time like any pool job, instead of being the first to go: stopping it for a longer
job only wastes its restart and adds a preemption. Once a stop would break its plan (it would be
due at once, or its work plus the new restart would outgrow the leases it holds), no pool job may
take its GPUs; a guaranteed job due in this lease still may, since the plan holds this lease's
GPUs for that job and the one running ahead only borrows them.
"""

from __future__ import annotations

from typing import Collection, Mapping

from chronus_py.model import DeadlineOption
from chronus_py.policies.base import LeaseReport, OrderPolicy, View
from chronus_py.selector import ChronusSettings, LeaseSelector, Tier
from chronus_py.state import JobState, Status

STANDINGS = {
    Tier.MUST_RUN: "guaranteed, due in this lease",
    Tier.SPOT: "runs on spare capacity by remaining GPU-time",
    Tier.AHEAD: "guaranteed, ahead of its lease plan (capacity is held for it later)",
    Tier.HOPELESS: "cannot meet its last deadline even alone; leftover GPUs only",
}


PROTECTED = -1.0
"""The GPU-time a protected job is ranked by: ahead of every pool job (their GPU-time is >= 0),
behind every job due in this lease, whose leases the plan holds now."""


class Chronus(OrderPolicy):
    """The policy holds its settings and, from the first decision point on (when the cluster's
    size is known), its lease selector."""

    name = "chronus"

    def __init__(self, settings: ChronusSettings | None = None):
        self.settings = settings or ChronusSettings()
        self.selector: LeaseSelector | None = None
        self._view: View | None = None  # the last decision point's, to say why a job waits

    def prepare(self, view: View) -> Collection[str]:
        self._view = view
        if self.selector is None:
            self.selector = LeaseSelector(self.settings, view.total_gpus, node_gpus=view.node_gpus)
            self.selector.lease_index = -1
        self.selector.adopt(view.arrived)
        self.selector.estimate_pad = view.estimate_pad
        self.selector.estimate_cut = view.estimate_cut
        changed: set[str] = set()
        if view.now >= self.selector.lease_end() - 1e-9 or self.selector.lease_index < 0:
            changed |= self.selector.new_lease(view.active, view.now)
        if view.arrived:
            changed |= self.selector.admit_arrivals(view.arrived, view.now)
        return changed | self.selector.due(view.active, view.now)

    def key(self, job: JobState, now: float) -> tuple:
        tier = self.selector.tier(job.id) if self.selector else Tier.SPOT
        if job.status is Status.RUNNING and tier in (Tier.AHEAD, Tier.SPOT) and self.selector:
            if self.selector.stop_breaks_plan(job, now):
                return (Tier.SPOT, PROTECTED, job.seq)
            tier = Tier.SPOT
        return (tier, job.remaining(now) * job.gpus, job.seq)

    def next_wakeup(self, now: float) -> float | None:
        if self.selector is None:
            return None
        trigger = self.selector.next_trigger()
        return (
            self.selector.lease_end()
            if trigger is None
            else min(trigger, self.selector.lease_end())
        )

    def preempted(self, job: JobState, now: float) -> bool:
        return self.selector.preempted(job, now) if self.selector else False

    def take_guarantee_changes(self) -> Mapping[str, DeadlineOption | None]:
        return self.selector.take_guarantee_changes() if self.selector else {}

    def standing(self, job_id: str) -> str:
        """The job's tier; for an SLO job in the pool, also the test that refused it a
        guarantee (``LeaseSelector.why_not``)."""
        tier = self.selector.tier(job_id) if self.selector else Tier.SPOT
        state = self._view.active.get(job_id) if self._view else None
        if tier is Tier.SPOT and state is not None and job_id not in self.selector.booked:
            why = self.selector.why_not(state, self._view.now)
            if why:
                return f"{STANDINGS[tier]}; not guaranteed, held back by {why}"
        return STANDINGS[tier]

    def lease_report(self) -> LeaseReport | None:
        if self.selector is None:
            return None
        selector, lease = self.selector, self.settings.lease
        stats = selector.stats
        return LeaseReport(
            lease_end=selector.lease_end(),
            lease_plan={
                job: tuple(k * lease for k in leases) for job, leases in selector.booked.items()
            },
            solver={
                "backend": stats.last_backend,
                "status": stats.last_status,
                "rounds": stats.rounds,
                "fallbacks": stats.fallbacks,
                "admitted": stats.admitted_at_arrival + stats.admitted_on_retry,
                "demoted": list(stats.demoted),
            },
            solve_seconds=sum(stats.solve_seconds),
        )
