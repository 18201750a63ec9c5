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

from typing import Any, Collection, Iterator, Mapping, Sequence

from chronus_py.errors import ArgumentError
from chronus_py.jobs.model import DeadlineOption
from chronus_py.jobs.state import JobState, Status
from chronus_py.policies.base import LeaseReport, OrderPolicy, Sizes, View
from chronus_py.policies.booked_starts import BookedStarts
from chronus_py.policies.replanned import Replanned, release
from chronus_py.selector import ChronusSettings, LeaseSelector, SelectorStats, Tier
from placement.loading import show

POOL = (
    "no deadline option fits the lease plan's free capacity; competes in the pool by remaining "
    "GPU-time"
)
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
        if settings is not None and not isinstance(settings, ChronusSettings):
            raise ArgumentError(
                "Chronus",
                f"expected ChronusSettings, got {show(settings)}: Chronus(ChronusSettings(...)), "
                "or ChronusSettings.from_mapping for a mapping",
                field="settings",
            )
        self.settings = settings or ChronusSettings()
        self.selector: LeaseSelector | None = None
        self._view: View | None = None  # the last decision point's, to say why a job waits
        self._retired: LeaseSelector | None = None  # the plan the last re-plan replaced
        self._jobs: Mapping[str, JobState] | None = None  # the one scheduler's active jobs

    def prepare(self, view: View) -> Collection[str]:
        if view.active is not self._jobs:
            if self._jobs is not None:
                # Its lease plan holds another scheduler's jobs and capacity: shared, a round
                # planned on the first cluster's GPUs and then failed on a job it never had.
                raise ArgumentError(
                    "Chronus",
                    "already plans for another Scheduler: give each Scheduler its own "
                    "Chronus(...) (a copy.deepcopy of the scheduler copies its policy too)",
                    field="policy",
                )
            self._jobs = view.active
        self._view = view
        if self.selector is None:
            self.selector = LeaseSelector(self.settings, view.total_gpus, node_gpus=view.node_gpus)
            self.selector.lease_index = -1
        self.selector.adopt(view.arrived)
        self.selector.estimate_pad = view.estimate_pad
        self.selector.estimate_cut = view.estimate_cut
        self.selector.queue = view.active
        changed: set[str] = set()
        if view.now >= self.selector.lease_end() - 1e-9 or self.selector.lease_index < 0:
            changed |= self.selector.new_lease(view.active, view.now)
        if view.arrived:
            changed |= self.selector.admit_arrivals(view.arrived, view.now)
        return changed | self.selector.due(view.active, view.now)

    def key(self, job: JobState, now: float) -> tuple:
        return self.keys((job,), now)[0]

    def keys(self, jobs: Sequence[JobState], now: float) -> list[tuple]:
        """Asked for every running job the walk re-keys at every decision (Philly MIX2: 951,729
        keys), so in one loop: the tier is read from the selector's table directly, the remaining
        work is asked once, and only a guaranteed job asks whether a stop breaks its plan."""
        selector = self.selector
        if selector is None:
            return [(Tier.SPOT, job.remaining(now) * job.gpus, job.seq) for job in jobs]
        tiers, booked, breaks = selector.tiers, selector.booked, selector.stop_breaks_plan
        spot, ahead, running = Tier.SPOT, Tier.AHEAD, Status.RUNNING
        keys = []
        for job in jobs:
            remaining = job.remaining(now)
            tier = tiers.get(job.id, spot)
            if job.status is running and (tier is spot or tier is ahead):
                if job.id in booked and breaks(job, now, remaining):
                    keys.append((spot, PROTECTED, job.seq))
                    continue
                tier = spot
            keys.append((tier, remaining * job.gpus, job.seq))
        return keys

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
            lease_plan=BookedStarts(selector.booked, lease),
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

    # -- what the round and the service ask beyond the order (``base.Policy``) --------------------
    def probe(self, job: JobState, now: float) -> DeadlineOption | None:
        if self.selector is None:
            return None
        return self.selector.probe(job, now)

    def refusal(self, job: JobState, now: float, *, detail: bool = True) -> str:
        """Hopeless, or not fitting the plan; in ``detail``, also the test that refused it
        (``LeaseSelector.why_not``: capacity, the headroom, the guard or the estimate band)."""
        if not job.job.is_slo or self.selector is None:
            return super().refusal(job, now)
        if self.selector.hopeless(job, now):
            return "cannot meet its last deadline even alone; runs on leftover GPUs"
        why = self.selector.why_not(job, now) if detail else None
        return f"{POOL}; held back by {why}" if why else POOL

    def solver_stats(self) -> SelectorStats | None:
        return self.selector.stats if self.selector else None

    def replan_due(self, now: float) -> bool:
        selector = self.selector
        if selector is None or selector.lease_index < 0:
            return False
        return now >= selector.lease_end() - 1e-9

    def replan(self, active: Mapping[str, JobState], now: float) -> Any:
        """The new lease's plan: the selector itself, re-planned, and the jobs whose tier
        changed (:class:`~chronus_py.policies.replanned.Replanned`)."""
        self.selector.queue = active
        changed = self.selector.new_lease(active, now)
        return Replanned(self.selector, changed)

    def replan_load(self, result: Any) -> Iterator[None]:
        return result.load()

    def replan_release(self) -> Iterator[None]:
        retired, self._retired = self._retired, None
        return release(retired)

    def replan_started(self, now: float) -> None:
        self.selector.lease_began(now)

    def catch_up(self, result: Any, arrived: Sequence[JobState], now: float) -> Collection[str]:
        """Jobs admitted while the re-plan computed keep their promises: adopted, then booked
        into the new plan (the result's own selector, not yet this policy's) where they fit;
        one that does not is re-planned at the next lease like a restored one. Returns those
        whose key differs from the one the committed plan gave them."""
        selector = result.selector
        selector.adopt(arrived)
        selector.queue = self.selector.queue  # the new plan crossed without it
        changed = selector.admit_arrivals(arrived, now)
        # Against the committed plan, whose tiers the queue's keys hold: a waiting job of the
        # same tier keeps its key there (a running one's key also asks its bookings).
        return [
            state.id
            for state in arrived
            if state.id in changed
            and (
                state.status is Status.RUNNING
                or selector.tier(state.id) is not self.selector.tier(state.id)
            )
        ]

    def recheck(self, result: Any, moved: Sequence[JobState], now: float) -> Collection[str]:
        """Each job that started or stopped since the fork planned again in the new plan as it
        is now (``LeaseSelector.recheck``), keeping the promise the committed plan gave it if
        the new plan holds it. Such jobs are few (those a round or two started), so all are
        re-sorted."""
        for state in moved:
            result.selector.recheck(state, self.selector.guarantee(state.id), now)
        return [state.id for state in moved]

    def commit_replan(
        self,
        result: Any,
        arrived: Sequence[JobState],
        now: float,
        moved: Sequence[JobState] = (),
    ) -> Collection[str]:
        """The last jobs that moved (:meth:`recheck`, first: their promises are older) and
        arrivals (:meth:`catch_up`) caught up, then the new plan is this policy's."""
        if result is None:
            self.selector.lease_index -= 1  # the lease is due again: the next prepare re-plans
            return ()
        changed = result.changed | set(self.recheck(result, moved, now))
        changed |= set(self.catch_up(result, arrived, now))
        self._retired = self.selector  # freed by replan_release, if the caller asks
        self.selector = result.selector
        return changed

    def size(self, job: Sizes, view: View) -> int:
        """An SLO job's smallest size the lease plan can guarantee now (the admission probe,
        against the guarantees already given), else its largest, which competes unguaranteed
        with the best chance."""
        if len(job.sizes) == 1 or not job.job.is_slo or self.selector is None:
            return super().size(job, view)
        return next(
            (n for n in job.sizes if self.probe(job.at[n], view.now) is not None), job.sizes[-1]
        )
