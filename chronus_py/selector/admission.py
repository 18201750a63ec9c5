"""The lease selector's state: who is guaranteed, the lease plan that keeps every guarantee,
and each job's tier for the current lease.

Guarantees are only ever given against a plan: an SLO job is guaranteed when its remaining work
fits, in leases, into the capacity the existing guarantees leave before its deadline (the lease
the deadline falls in only for a last piece of work that fits before it: ``leases.py``).
New guarantees leave ``headroom`` of each lease's GPUs to the SRTF pool, which serves short
unguaranteed jobs best. A job wider than the share that leaves may take any GPUs the plan has
free, but only when what is free before its deadline holds both its own booking and the pool's
work there, queued and expected to arrive (see ``_place``). Long multi-GPU guarantees deferred
to their deadlines otherwise fill whole days of the plan, and thousands of 1-GPU jobs miss behind
them (first session, Philly SLO: first-deadline ratio 0.775 with no headroom).
Arrivals are admitted as a batch at the decision point they arrive at (first come, first served,
each with its best deadline option that fits). At every lease boundary every guaranteed job is
re-planned from its current remaining work by ``solvers.solve`` (greedy latest-slot packing,
the MILP improving it), each charged the restarts its own plan makes it pay (a gap between its
leases, or a stop), and unguaranteed SLO jobs are offered admission again (the artifact never
retries). A guaranteed job the plan can no longer hold (it overran its estimate) is demoted and
reported.

A guaranteed job planned in the current lease does not preempt anyone before it has to: when its
planned leases are one block ending at its deadline lease, it turns ``MUST_RUN`` only at its
laxity trigger (the block's end - remaining work - one restart - ``guard``, where the block of a
job planned in the lease its deadline falls in ends at the deadline), and never before its block
starts, so it never runs outside the capacity the plan holds for it. Until then GPUs it has not
claimed serve the SRTF pool, which is where a lease-granular plan otherwise wastes them.

Tiers, best first: ``MUST_RUN`` (guaranteed and due in the current lease), ``SPOT`` (the SRTF
pool: unguaranteed SLO jobs, best-effort jobs, and guaranteed jobs still competing for a tighter
deadline option than the one they hold), ``AHEAD`` (guaranteed jobs not planned in this lease: the
plan already holds their capacity later, so running them now only earns slack and must not cost
an unprotected job its deadline), ``HOPELESS`` (an SLO job that cannot meet its last deadline even
alone: it gets leftover GPUs only, so it never pushes a job that can still make it, but it runs
whenever GPUs are idle).

There is no tier that lifts an unguaranteed job whose laxity runs out above the pool. Such a tier
(``URGENT``, until the third session) met more deadlines (MIX1: 0.9991 against 0.9947, headroom
0.7), but every job it lifted held its GPUs against all shorter work until it finished: best-effort
JCT 459 against 295 min, 0.45 against 0.22 preemptions per job (benchmarks/RESULTS.md).
"""

from __future__ import annotations

import heapq
import math
import time
from bisect import bisect_left
from dataclasses import dataclass, field, replace
from enum import IntEnum
from typing import Iterable, Mapping, NamedTuple

import numpy as np

from chronus_py.jobs.model import DeadlineOption
from chronus_py.jobs.state import JobState, Status
from chronus_py.selector.arrivals import Arrivals
from chronus_py.selector.by_lease import BookedByLease
from chronus_py.selector.fit import latest_leases
from chronus_py.selector.leases import (
    block_end,
    deadline_window,
    lease_of,
    leases_needed,
    room,
)
from chronus_py.selector.plan import LeasePlan
from chronus_py.selector.settings import ADAPTIVE, ChronusSettings
from placement import round_up
from solvers import (
    LeaseJob,
    LeaseOption,
    LeaseProblem,
    LeaseSolution,
    Placement,
    latest_slots,
    solve,
)
from solvers.flat import joined
from solvers.restarts import restarts

SLACK_LEASES = 1024
RESTART_ROUNDS = 4
"""Re-plans per lease boundary that charge guaranteed jobs the restarts their plans make them
pay (see ``LeaseSelector._charge_restarts``); a plan still short after them is kept as it is."""


class Tier(IntEnum):
    MUST_RUN = 0
    SPOT = 1
    AHEAD = 2
    HOPELESS = 3


class Ask(NamedTuple):
    """One search for a new guarantee's leases (:meth:`LeaseSelector._place`): ``work`` seconds
    on ``gpus`` GPUs by ``at``, from lease ``first`` on, with ``spare`` seconds to spare;
    ``headroom`` (None: the setting's) and ``waiting`` (the pool's GPU-seconds a wide job must
    leave room for; None: not tested). A tuple, so it is also the key of the kept search."""

    at: float
    gpus: int
    work: float
    first: int
    spare: float
    headroom: float | None = None
    waiting: float | None = None


@dataclass
class SelectorStats:
    """What the selector did, for reports and ``chronus plan``."""

    rounds: int = 0
    solve_seconds: list[float] = field(default_factory=list)
    fallbacks: int = 0
    admitted_at_arrival: int = 0
    admitted_on_retry: int = 0
    demoted: list[str] = field(default_factory=list)
    last_status: str = ""
    last_backend: str = ""


@dataclass
class LeaseSelector:
    """``plan`` books each guaranteed job's leases (``booked``: lease indices, sorted), and
    ``guarantees`` maps it to the deadline option it was promised. The selector records its own
    decisions; the scheduler copies guarantee changes into its job records
    (``take_guarantee_changes``), so nobody else's state is written here. ``node_gpus`` is the
    cluster's GPUs per node, for the round-up of GPU requests in the plan."""

    settings: ChronusSettings
    capacity: int
    node_gpus: int = 8
    estimate_pad: float = 0.0
    estimate_cut: float = 0.0
    lease_index: int = 0
    guarantees: dict[str, DeadlineOption] = field(default_factory=dict)
    tiers: dict[str, Tier] = field(default_factory=dict)
    stats: SelectorStats = field(default_factory=SelectorStats)

    def __post_init__(self) -> None:
        self.plan = LeasePlan(self.settings.lease, self.capacity)
        self._cap = SLACK_LEASES  # leases past `first` a deadline can reach (see _window)
        self._triggers: list[tuple[float, str]] = []
        self._refused = False  # some SLO job was refused a guarantee since the last re-plan
        self._wide: dict[str, int] = {}  # guarantees wider than the share: their GPUs
        # The scheduler's active jobs, which the policy sets at each decision point: admission
        # of a job wider than the share weighs the work waiting in them (_pool_work). Not
        # pickled (__getstate__).
        self.queue: Mapping[str, JobState] | None = None
        self._pool_memo: tuple[tuple, np.ndarray, np.ndarray, np.ndarray] | None = None  # _queued
        # The work that arrived (admit_arrivals), see _pool_work(); kept for as long as the
        # longest window asked about, and at least as long as a window's cap (see _window); a
        # rate measured over a lease at least.
        lease = self.settings.lease
        self.arrivals = Arrivals(lookback=SLACK_LEASES * lease, shortest=lease)
        self._changes: dict[str, DeadlineOption | None] = {}
        self._previous: tuple[Mapping[str, tuple[int, ...]], int] = ({}, 0)  # see _hint
        self._facts: dict[str, tuple[tuple[int, ...], int, tuple[bool, float, int]]] = {}
        self._memo: dict[str, float] | None = None  # remaining work during a re-plan
        self._lost: dict[str, bool] | None = None  # hopeless() during a re-plan
        self._searched: tuple | None = None  # the last search of the plan, see _search()
        # The bookings by lease, for lease_began: set where a plan is read from a re-plan
        # (``policies/replanned.py``), else by the first lease_began on a plan (one read of
        # every booking, ``BookedByLease.spanning``).
        self.by_lease: BookedByLease | None = None

    # -- guarantees -----------------------------------------------------------------------------
    def adopt(self, states: Iterable[JobState]) -> None:
        """Take over guarantees given before this selector existed (a restored state file or a
        restarted service), so they are re-planned like the selector's own."""
        for state in states:
            if state.guaranteed is not None and state.id not in self.guarantees:
                self.guarantees[state.id] = state.guaranteed

    def guarantee(self, job_id: str) -> DeadlineOption | None:
        return self.guarantees.get(job_id)

    def take_guarantee_changes(self) -> dict[str, DeadlineOption | None]:
        """Guarantees given (the option) or withdrawn (None) since the last call."""
        changes, self._changes = self._changes, {}
        return changes

    def _promise(self, job_id: str, option: DeadlineOption) -> None:
        self.guarantees[job_id] = option
        self._changes[job_id] = option

    # -- what the policy asks -------------------------------------------------------------------
    def tier(self, job_id: str) -> Tier:
        return self.tiers.get(job_id, Tier.SPOT)

    def lease_end(self) -> float:
        return (self.lease_index + 1) * self.settings.lease

    # -- sizes ----------------------------------------------------------------------------------
    def _gpus(self, state: JobState) -> int:
        return round_up(state.gpus, node=self.node_gpus)

    def _need_seconds(self, state: JobState, now: float, first: int, *, band: bool = True) -> float:
        """Seconds of leases a new guarantee's remaining work takes: :meth:`_needs` of one job."""
        return self._needs((state,), now, first, band=band)[state.id]

    def _needs(
        self, states: Iterable[JobState], now: float, first: int, *, band: bool = True
    ) -> dict[str, float]:
        """Seconds of leases each job's remaining work as a new guarantee (top of its band, plus
        ``margin``: :meth:`_padded`) takes, with one restart allowance: a plan may leave a gap
        between leases, and the job then pays it again. (A re-plan charges guaranteed jobs
        their plan's own restarts instead, see :meth:`_charge_restarts`.)

        When a new guarantee would start with the lease ``now`` is in (a re-plan inside a lease:
        the selector's first decision, or the first after the cluster sat idle across a lease
        end), the part of it already gone counts as work too, so no promise counts on time that
        has passed. A job already guaranteed keeps the lease as a whole: its promise was shown
        to fit when it was made, and a restarted service re-planning mid-lease must not take it
        back (the laxity trigger still starts it in time).

        One loop over the jobs, the remaining work asked as :meth:`_remaining` does: a re-plan
        asks it of every SLO job (issue 27, session 16: one call chain per job was 6 % of a
        Philly SLO replay)."""
        lease, guarantees, memo = self.settings.lease, self.guarantees, self._memo
        gone_now = max(now - first * lease, 0.0)
        bare = 1.0 + self.settings.margin
        running = Status.RUNNING
        needs = {}
        for state in states:
            job_id = state.id
            remaining = None if memo is None else memo.get(job_id)
            if remaining is None:
                remaining = state.remaining(now)
                if memo is not None:
                    memo[job_id] = remaining
            work = remaining * (self._pad(state) if band else bare)
            work += 0.0 if job_id in guarantees else gone_now
            if state.status is not running and leases_needed(work, lease) == 1:
                # A pending job's work holds the start it still needs (JobState.remaining): in
                # one lease it runs through and pays no other restart.
                needs[job_id] = work
            else:
                needs[job_id] = work + state.overhead
        return needs

    def _cover(self, state: JobState, now: float) -> float:
        """How long before a deadline the job must start: its remaining work with the estimate's
        safety ``margin``, one restart and ``guard`` seconds. Without the margin here too, a job
        waiting for its laxity would find out only after starting that it was underestimated."""
        return self._padded(state, now) + state.overhead + self.settings.guard

    def _padded(self, state: JobState, now: float, *, band: bool = True) -> float:
        """Remaining work at the top of its estimate's band, plus the safety ``margin``; a job not
        observed yet gets at least ``estimate_pad``, what earlier estimates turned out to miss.
        Without ``band``: the estimate itself (only to say whether the band refused a job)."""
        if not band:
            return self._remaining(state, now) * (1.0 + self.settings.margin)
        return self._remaining(state, now) * self._pad(state)

    def _pad(self, state: JobState) -> float:
        """The factor :meth:`_padded` scales remaining work by."""
        band = state.uncertainty if state.observed else max(state.uncertainty, self.estimate_pad)
        return 1.0 + self.settings.margin + band

    def _remaining(self, state: JobState, now: float) -> float:
        """``state.remaining(now)``, asked once per job in a re-plan: :meth:`new_lease` asks
        for each job's need, options, plan, hopelessness and tier at one instant, with no job
        changing meanwhile, and keeps the answers in ``_memo`` until it returns."""
        memo = self._memo
        if memo is None:
            return state.remaining(now)
        value = memo.get(state.id)
        if value is None:
            value = memo[state.id] = state.remaining(now)
        return value

    def _kept_option(self, state: JobState, now: float, first: int) -> LeaseOption | None:
        """A guaranteed job's promise as a lease option, if its window still has room for its
        remaining leases; None if not. It is planned for its work alone:
        :meth:`_charge_restarts` adds the restarts its plan then makes it pay."""
        end, need = self._kept_window(state.id, self._padded(state, now), first)
        if end - first < need:
            return None
        return LeaseOption(end - first, need, float(self.guarantees[state.id].value))

    def _may_fit(self, state: JobState, first: int, work: float) -> bool:
        """Whether some deadline option of an unguaranteed job still has room for its remaining
        leases (``work`` seconds, :meth:`_need_seconds`): only such a job is offered admission
        again at a re-plan."""
        spare = self._spare(state)
        for d in state.job.deadlines:
            end, need = self._window(d.at, work, first, spare)
            if end - first >= need:
                return True
        return False

    def hopeless(self, state: JobState, now: float) -> bool:
        """Whether the job misses its last deadline even if its estimate is as far too high as
        estimates have been (the bottom of its band, or ``estimate_cut`` if not observed yet).
        Judged on the estimate alone, a hopeless job runs only on idle GPUs, so it is seldom
        observed and corrected: an overestimated job stayed written off (Philly SLO with profiling,
        sigma 0.3: first-deadline ratio 0.8620 and 0.48 preemptions per job, against 0.8918 and
        0.27 with the cut)."""
        lost = self._lost
        if lost is not None:  # a re-plan asks twice of each job: to retry it, to tier it
            answer = lost.get(state.id)
            if answer is not None:
                return answer
        deadlines = state.job.deadlines
        if not deadlines or not state.known:
            return False
        band = state.uncertainty if state.observed else max(state.uncertainty, self.estimate_cut)
        answer = now + self._remaining(state, now) * max(1.0 - band, 0.0) > deadlines[-1].at
        if lost is not None:
            lost[state.id] = answer
        return answer

    # -- the residual capacity of the plan (``selector/plan.py``) ---------------------------------
    @property
    def booked(self) -> dict[str, tuple[int, ...]]:
        """Each guaranteed job's booked leases (sorted lease indices)."""
        return self.plan.booked

    @property
    def _booked_leases(self) -> int:
        return self.plan.booked_leases

    def _free(self, first: int, last: int) -> np.ndarray:
        return self.plan.free(first, last)

    def _book(self, job_id: str, gpus: int, leases: np.ndarray) -> None:
        self.plan.book(job_id, gpus, leases)
        if self.by_lease is not None:
            self.by_lease.add(job_id, int(leases[0]), int(leases[-1]))

    # -- arrivals ---------------------------------------------------------------------------------
    def admit_arrivals(self, arrived: Iterable[JobState], now: float) -> set[str]:
        """Guarantee each arriving SLO job whose best fitting option fits the plan's residual."""
        changed: set[str] = set()
        first = self._admission_start(now)
        arrived = list(arrived)
        for state in arrived:
            if state.known:
                self.arrivals.record(now, state.gpus * self._remaining(state, now), state.gpus)
        for state in arrived:
            if not state.job.is_slo or state.id in self.booked or not state.known:
                continue
            if self._try_guarantee(state, now, first):
                self.stats.admitted_at_arrival += 1
            else:
                self._refused = True
            if self._set_tier(state.id, self._tier(state, now)):
                changed.add(state.id)
        return changed

    def _can_still_meet(self, state: JobState, now: float, before: float) -> bool:
        """Whether some deadline option before ``before`` can still be met from now on."""
        finish = now + self._remaining(state, now)
        return any(finish <= d.at < before for d in state.job.deadlines)

    def _admission_start(self, now: float) -> int:
        """The first lease a new guarantee may use: the current one only if it starts now."""
        current = lease_of(now, self.settings.lease)
        return current if now <= current * self.settings.lease + 1e-9 else current + 1

    def _fitting(
        self, state: JobState, now: float, first: int
    ) -> tuple[DeadlineOption, np.ndarray] | None:
        """The job's best deadline option whose remaining leases fit the plan's residual from
        lease ``first`` on within the headroom (:meth:`_place`), and those leases; None if no
        option fits."""
        gpus = self._gpus(state)
        work = self._need_seconds(state, now, first)
        need = leases_needed(work, self.settings.lease)
        self._cap = self._booked_leases + need + SLACK_LEASES
        wide = gpus > self._share()
        for option in state.job.deadlines:
            held = self._held(option.at, work, first, self._spare(state)) if wide else 0.0
            waiting = self._pool_work(state, now, option.at, held) if wide else None
            ask = Ask(option.at, gpus, work, first, self._spare(state), waiting=waiting)
            slots = self._search(ask)
            if slots is not None:
                return option, slots
        return None

    def _share(self, headroom: float | None = None) -> int:
        """GPUs of a lease new guarantees no wider than it may use: what the headroom leaves."""
        headroom = self.settings.headroom if headroom is None else headroom
        return self.capacity - int(headroom * self.capacity)

    def _search(self, ask: Ask) -> np.ndarray | None:
        """:meth:`_place`, its last answer kept while nothing it reads changed: the plan
        (the same object, no booking changed since: ``LeasePlan.version``), the window's cap
        and the arguments. A refused submission's reason (:meth:`why_not`) asks first the
        search its admission has just failed, at the same instant on the same plan (issue 27,
        session 15: 3 searches a refusal at the churn, 25 us each)."""
        plan = self.plan
        key = (ask, self._cap, len(plan.booked))
        searched = self._searched
        if searched is not None and searched[0] is plan and searched[1] == plan.version:
            if searched[2] == key:
                return searched[3]
        slots = self._place(ask)
        self._searched = plan, plan.version, key, slots
        return slots

    def _place(self, ask: Ask) -> np.ndarray | None:
        """The leases a new guarantee of ``work`` seconds on ``gpus`` GPUs by ``at`` takes (the
        latest ones with room, from lease ``first`` on), or None if it does not fit.

        A job no wider than the share the headroom leaves (:meth:`_share`) fits where the
        guarantees no wider than it leave it room in that share, as the cap per lease always
        did; wider guarantees take GPUs of the lease, not of the share. A wider job takes any
        GPUs the plan has free, but only if the GPU-time free in its window (the leases from
        ``first`` to its deadline) holds its own work (its GPUs x ``work``: since session 17
        not the whole leases it is booked in, whose unclaimed part serves the pool until its
        laxity trigger) and ``waiting``, the GPU-seconds of the pool's work in that window
        (:meth:`_pool_work`; None: not known, not tested). That tells an overloaded cluster
        from one with room. Counting the work queued and half the
        work expected to arrive (issue 28, session 13; since session 15 the share of its window
        the booking holds, :meth:`_held`), the first 6,000 jobs of Philly MIX1 at 32 GPUs get
        the cap per lease's results exactly (no wide promise: first-deadline ratio 0.9429), the
        wide-job mix at 256 GPUs 13 of its 20 wide jobs promised (ratio 0.9984 against the
        cap's 0.9971). Counting all waiting work, running or not, and no arrivals
        (session 12), a queue short for a moment let two wide promises through on that MIX1
        prefix (0.9221). Measured against it (benchmarks/RESULTS.md): a cap per lease only (no
        job wider than the share is ever promised), a whole lease no guarantee uses for a wider
        job (8-GPU jobs on 32 GPUs took the 1-GPU jobs' leases: first-deadline ratio 0.8152
        against 0.8245 on all of MIX1), a share of GPU-time over the window, and wide jobs
        admitted only while no SLO job was refused since the last re-plan (0.7530)."""
        at, gpus, work, first, spare, headroom, waiting = ask
        headroom = self.settings.headroom if headroom is None else headroom
        end, need = self._window(at, work, first, spare)
        if end - first < need or headroom >= 1.0 or gpus > self.capacity:
            return None  # headroom 1 keeps everything for the pool
        keep = self.plan.kept(headroom)
        if gpus <= self.capacity - keep:
            if not self._wide:
                return latest_leases(self.plan, first, end, gpus, need, keep)
            slots = latest_slots(self._room(first, end, keep), gpus, 0, end - first, need)
            return None if slots is None else slots + first
        slots = latest_leases(self.plan, first, end, gpus, need)
        if slots is None:
            return None
        free = self._free(first, end).sum()
        if waiting is not None and waiting + gpus * work > free * self.settings.lease:
            return None
        return slots

    def _room(self, first: int, end: int, keep: int) -> np.ndarray:
        """GPUs a new guarantee no wider than the share may take in each lease from ``first``
        to ``end``: the free GPUs above the ``keep`` the headroom holds back, where the
        guarantees wider than the share took GPUs of the lease rather than of the share."""
        free = self._free(first, end)
        if not self._wide:
            return free - keep
        return np.minimum(free, free + self._wide_used(first, end) - keep)

    def _wide_used(self, first: int, end: int) -> np.ndarray:
        """GPUs the guarantees wider than the share hold in each lease from ``first`` to
        ``end``; a job no longer booked is forgotten."""
        used = np.zeros(end - first, dtype=np.int64)
        for job_id, gpus in list(self._wide.items()):
            leases = self.booked.get(job_id)
            if leases is None:
                del self._wide[job_id]
                continue
            for lease in leases:
                if first <= lease < end:
                    used[lease - first] += gpus
        return used

    def __getstate__(self) -> dict:
        """All but the queue and what was summed from it: a plan crosses from the service's
        re-plan child pickled, and the queue is the child's copy of the scheduler's jobs; the
        policy sets the parent's own at its next decision point (``Chronus.catch_up``)."""
        return {**self.__dict__, "queue": None, "_pool_memo": None, "_searched": None}

    def _held(self, at: float, work: float, first: int, spare: float) -> float:
        """The share of a wide job's window (the leases from ``first`` to its deadline ``at``)
        its ``work`` seconds hold: the share of the work arriving in the window that its
        admission counts (:meth:`_pool_work`). Work arrives all through the window and the
        booking holds its GPUs for that share of it; the rest of the window is left to the
        pool, which catches up there. So a job with no slack weighs all the work arriving,
        one whose deadline is four times its runtime a quarter. Until session 15 a flat half
        was counted, whatever the slack (the wide mix promised 13 / 4 / 8 of its 64+ GPU jobs,
        seeds 0-2, against 14 / 8 / 8 by leases held).

        Its work in seconds, not the whole leases it is booked in (issue 28, session 17): a
        64-GPU job of 25 minutes due 56 minutes after it arrives needs two 20-minute leases of
        a window of two, and counted by leases it held all of it (it weighed every arrival, as
        a job with no slack does) where it holds less than half. A guarantee's GPUs serve the
        pool until its laxity trigger, so what it takes is its work, not its leases' rounding;
        the wide jobs refused that way were short ones, most of the wide mix's."""
        end, _ = self._window(at, work, first, spare)
        return min(1.0, work / max((end - first) * self.settings.lease, 1e-9))

    def _pool_work(self, state: JobState, now: float, until: float, held: float) -> float | None:
        """GPU-seconds of the pool's work that a wide job's window (its leases to its deadline
        ``until``) must hold besides its booking: the work queued unguaranteed at ``now``
        (``state`` left out), each job's only as far as its width can run in the window
        (:meth:`_queued`), and ``held`` (:meth:`_held`) of the work expected to arrive in it
        (None if the policy set no ``queue``). Both are counted up to the end of the window's
        last lease, over the same leases as the GPU-time free they are weighed against (until
        session 17, up to the deadline itself: a job due 56 minutes ahead on 20-minute leases
        weighed 56 minutes of the pool's work against the 40 its window holds).

        Running jobs do not count: a long best-effort run blocked every wide promise though a
        guarantee due preempts it (the wide mix: 17 of 20 wide jobs promised without it, 16
        with it; the same on MIX1). Nor does only the SLO work due in the window (19 of 20,
        but on the first 6,000 jobs of MIX1 at 32 GPUs a first-deadline ratio of 0.8242
        against 0.9429): on an overloaded cluster the work still to arrive is what the wide
        promise takes GPUs from."""
        if self.queue is None:
            return None
        first = self._admission_start(now)
        work = self._need_seconds(state, now, first)
        until = self._window(until, work, first, self._spare(state))[0] * self.settings.lease
        span = max(until - now, 0.0)
        queued = self._queued(now, span)
        if state.id in self.queue and self._waits(state):
            queued -= state.gpus * min(self._remaining(state, now), span)
        return queued + held * self.arrivals.expected(now, until)

    def _waits(self, state: JobState) -> bool:
        """Whether ``state`` is work the pool has queued: known, unguaranteed, not running."""
        return state.id not in self.booked and state.known and state.status is not Status.RUNNING

    def _queued(self, now: float, span: float) -> float:
        """GPU-seconds the jobs queued unguaranteed at ``now`` can run within ``span`` seconds:
        each its remaining work, but no more than its width for the whole span: a queued job
        cannot use more of a wide job's window than that, however long it is, and what it has
        left after the window is the pool's business after it (a modelling choice, issue 28,
        session 16). The queue's jobs are sorted by remaining work once per decision point and
        booking, so each window asks one search."""
        queue = self.queue
        key = (now, id(queue), len(self.booked), self._booked_leases)
        memo = self._pool_memo
        if memo is None or memo[0] != key:
            waiting = [
                (self._remaining(job, now), job.gpus) for job in queue.values() if self._waits(job)
            ]
            waiting.sort()
            work = np.array([r for r, _ in waiting], dtype=float)
            gpus = np.array([g for _, g in waiting], dtype=float)
            memo = self._pool_memo = (
                key,
                work,
                np.concatenate(([0.0], np.cumsum(work * gpus))),
                np.concatenate(([0.0], np.cumsum(gpus))),
            )
        _, work, done, width = memo
        shorter = int(np.searchsorted(work, span, side="right"))
        return float(done[shorter] + span * (width[-1] - width[shorter]))

    def _try_guarantee(self, state: JobState, now: float, first: int) -> bool:
        fitting = self._fitting(state, now, first)
        if fitting is None:
            return False
        option, leases = fitting
        gpus = self._gpus(state)
        self._promise(state.id, option)
        self._book(state.id, gpus, leases)
        if gpus > self._share():
            self._wide[state.id] = gpus
        return True

    def probe(self, state: JobState, now: float) -> DeadlineOption | None:
        """The deadline option ``admit_arrivals`` would guarantee ``state`` now, without booking
        it: the same test on the same residual (a dry run of admission)."""
        if not state.job.is_slo:
            return None
        fitting = self._fitting(state, now, self._admission_start(now))
        return None if fitting is None else fitting[0]

    def why_not(self, state: JobState, now: float) -> str | None:
        """Why an SLO job holds no guarantee: the test that binds for its loosest deadline
        option, tried now as admission would; None if it is guaranteed, would be now, or has
        nothing to promise. Capacity binds when the job does not fit even with no headroom, no
        guard and no estimate band; otherwise the first of headroom, guard and band whose
        removal alone lets it in, or all three together. For a job wider than the share the
        headroom is the pool's work (queued, and expected to arrive: :meth:`_pool_work`),
        which the GPU-time free before its deadline must hold too."""
        if not state.job.is_slo or not state.known or state.id in self.booked:
            return None
        first = self._admission_start(now)
        gpus, at = self._gpus(state), state.job.deadlines[-1].at
        if gpus > self.capacity:
            return f"capacity (it needs {gpus} GPUs, the cluster has {self.capacity})"
        work = self._need_seconds(state, now, first)
        bare = self._need_seconds(state, now, first, band=False)
        restart = state.overhead
        self._cap = self._booked_leases + leases_needed(work, self.settings.lease) + SLACK_LEASES
        spare = self._spare(state)
        wide = gpus > self._share()
        held = self._held(at, work, first, spare) if wide else 0.0
        waiting = self._pool_work(state, now, at, held) if wide else None
        if self._search(Ask(at, gpus, work, first, spare, waiting=waiting)) is not None:
            return None
        if self._search(Ask(at, gpus, bare, first, restart, headroom=0.0)) is None:
            return "capacity before its deadline (the GPUs not yet promised do not hold its work)"
        if self._search(Ask(at, gpus, work, first, spare, headroom=0.0)) is not None:
            if waiting is not None:
                return (
                    f"the headroom (it is wider than the {self._share()} GPUs of each lease "
                    f"left to new guarantees, and the {waiting / 3600:,.0f} GPU-hours the pool "
                    "has queued or is expected to receive by its deadline and its own do not fit "
                    "in what is free before it)"
                )
            return (
                f"the headroom (each lease keeps {self.settings.headroom:.0%} of its GPUs "
                "from new guarantees for the pool)"
            )
        if self._search(Ask(at, gpus, work, first, restart, waiting=waiting)) is not None:
            return (
                f"the guard (its deadline leaves less than the {self.settings.guard:g} s a "
                "guarantee keeps spare)"
            )
        if self._search(Ask(at, gpus, bare, first, spare, waiting=waiting)) is not None:
            return "the estimate band (its work at the top of its estimate's band does not fit)"
        return "the headroom, the guard and the estimate band together"

    # -- lease boundaries -------------------------------------------------------------------------
    def new_lease(self, active: Mapping[str, JobState], now: float) -> set[str]:
        """Re-plan every guarantee from remaining work, retry admission, and re-tier all jobs."""
        self._memo, self._lost = {}, {}
        try:
            return self._replan(active, now)
        finally:
            self._memo = self._lost = None

    def _replan(self, active: Mapping[str, JobState], now: float) -> set[str]:
        self.lease_index = lease_of(now, self.settings.lease)
        first = self.lease_index
        fixed, candidates, states = [], [], {}
        need = self._needs([s for s in active.values() if s.job.is_slo], now, first)
        self._cap = SLACK_LEASES + sum(
            leases_needed(work, self.settings.lease) for work in need.values()
        )
        for state in active.values():
            if not state.job.is_slo or not state.known:
                continue
            if state.id not in self.guarantees:
                if not self.hopeless(state, now) and self._may_fit(state, first, need[state.id]):
                    candidates.append(state)
                continue
            option = self._kept_option(state, now, first)
            if option is None:
                self._demote(state)
                continue
            states[state.id] = state
            running = state.status is Status.RUNNING
            fixed.append(LeaseJob(state.id, self._gpus(state), (option,), True, running))
        self._previous = self.booked, first
        fixed, solution, horizon = self._charge_restarts(fixed, states, now, first)
        if solution.dropped:
            fixed, solution, horizon = self._fewest_dropped(
                fixed, solution, horizon, states, now, first
            )
        self.stats.rounds += 1
        for job_id in solution.dropped:
            self._demote(states[job_id])
        self._rebook(fixed, solution, horizon, first)
        self._refused = False
        refused = self._refused_again(candidates, need, first)
        for state in candidates:
            if state.id not in refused and self._try_guarantee(state, now, first):
                self.stats.admitted_on_retry += 1
            else:
                self._refused = True
        return self._retier(active, now)

    def _refused_again(
        self, candidates: list[JobState], need: Mapping[str, float], first: int
    ) -> set[str]:
        """The ``candidates`` the retried admission (:meth:`_try_guarantee`, each in turn)
        surely refuses, judged at once on the plan as it is before the first of them: those
        with fewer leases in which ``_place`` could put them than they need, in the widest
        window any of their deadline options may get. Most of the jobs offered admission again
        at a re-plan are refused (Philly MIX2: 75 a re-plan, 11 % of a replay asking each
        option in turn), and this answer is one count per job.

        It cannot refuse a job admission would take: bookings only take GPUs, so the room
        ``_place`` counts in a lease (:meth:`_room`; or, for a job wider than the share, all
        the free GPUs) only shrinks as earlier candidates are booked; and a window's cap
        (``_window``) only grows with the leases booked, so the bound here (every candidate
        booked) is the widest. ``_place`` may still refuse a job this lets through (e.g. the
        pool's work, for a wide job); it is asked as before."""
        headroom = self.settings.headroom
        if not candidates or headroom >= 1.0:
            return set()
        lease, keep = self.settings.lease, self.plan.kept(headroom)
        leases = {s.id: leases_needed(need[s.id], lease) for s in candidates}
        cap = self._booked_leases + sum(leases.values()) + SLACK_LEASES
        # A later deadline never gives a shorter window (deadline_window), so the last one's is
        # the widest of a job's options.
        ends = {
            s.id: min(
                deadline_window(
                    max(d.at for d in s.job.deadlines), lease, need[s.id], self._spare(s)
                )[0],
                first + cap,
            )
            for s in candidates
        }
        last = max(max(ends.values()), first)
        free, narrow = self._free(first, last), self._room(first, last, keep)
        # Leases with room, counted once per width as prefix sums: candidates are many, their
        # widths few (Philly: 1-64 GPUs).
        fitting: dict[int, np.ndarray] = {}
        refused = set()
        for state in candidates:
            gpus = self._gpus(state)
            prefix = fitting.get(gpus)
            if prefix is None:
                room = narrow if gpus <= self.capacity - keep else free
                prefix = fitting[gpus] = np.concatenate(([0], np.cumsum(room >= gpus)))
            if prefix[max(ends[state.id] - first, 0)] < leases[state.id]:
                refused.add(state.id)
        return refused

    def recheck(self, state: JobState, promised: DeadlineOption | None, now: float) -> bool:
        """Plan a job again as it is ``now`` after this plan was made on an older snapshot of
        it (the service's re-plan computes on a fork, and the job started or was stopped before
        the commit); True if its tier changed.

        ``promised``: its promise in the plan being replaced. If this plan dropped it, it is
        booked again where the plan's residual holds it as it is now (:meth:`_keep`); only a
        job it does not fit stays demoted. A job this plan still books keeps its leases; its
        tier is set again either way (a job seen pending and now running must not keep the
        hopeless tier that the start latency charged to it earned it)."""
        if promised is not None and state.id not in self.booked and state.known:
            self._keep(state, promised, now)
        return self._set_tier(state.id, self._tier(state, now))

    def _keep(self, state: JobState, promised: DeadlineOption, now: float) -> None:
        """Book ``promised`` again for a job as a kept promise (no headroom, from this plan's
        lease on), if the leases left hold its remaining work from ``now``: a running job's in
        one block from this lease on, which it runs through with no restart, else (or a
        waiting job's) with one restart allowance, as a new guarantee. Unlike a re-plan's kept
        promise, the part of this lease already gone counts as work: the commit comes late in
        it, and the promise is checked from now, not from when it was first shown to fit."""
        lease, first = self.settings.lease, self.lease_index
        gone = max(now - first * lease, 0.0)
        work = self._padded(state, now) + gone
        gpus = self._gpus(state)
        self.guarantees[state.id] = promised  # _kept_window reads it
        slots = None
        if state.status is Status.RUNNING:
            self._cap = self._booked_leases + leases_needed(work, lease) + SLACK_LEASES
            end, need = self._kept_window(state.id, work, first)
            if end - first >= need and (self._free(first, first + need) >= gpus).all():
                slots = np.arange(first, first + need)
        if slots is None:
            work = self._need_seconds(state, now, first) + gone
            self._cap = self._booked_leases + leases_needed(work, lease) + SLACK_LEASES
            end, need = self._kept_window(state.id, work, first)
            if gpus <= self.capacity:
                slots = latest_leases(self.plan, first, end, gpus, need)
        if slots is None or not slots.size:
            del self.guarantees[state.id]
            return
        self._promise(state.id, promised)
        self._book(state.id, gpus, slots)
        demoted = self.stats.demoted
        if state.id in demoted:  # the demotion this plan counted did not happen
            del demoted[len(demoted) - 1 - demoted[::-1].index(state.id)]

    def _rebook(
        self, fixed: list[LeaseJob], solution: LeaseSolution, horizon: int, first: int
    ) -> None:
        """Book the re-plan's ``solution`` in place of the previous plan, all jobs in one pass."""
        planned = [job for job in fixed if solution.option[job.id] is not None]
        parts = [solution.slots[job.id] for job in planned]
        sizes = [len(part) for part in parts]
        slots = joined(parts, sizes)
        ids, gpus = [job.id for job in planned], [job.gpus for job in planned]
        self.plan.rebook(first, horizon, ids, gpus, slots, sizes)
        self._facts = {}

    def _solve(
        self, fixed: list[LeaseJob], first: int, checked: LeaseProblem | None = None
    ) -> tuple[LeaseSolution, int, LeaseProblem]:
        """Plan the guaranteed jobs over the leases from ``first`` on, warm-started from the
        current plan; returns the solution, the plan's horizon (in leases) and the problem
        solved. ``checked``: an earlier problem of this re-plan, whose jobs (the same objects)
        need no second check (``LeaseProblem.checked``)."""
        horizon = max((o.deadline_slot for j in fixed for o in j.options), default=0)
        capacity = np.full(max(horizon, 1), self.capacity, dtype=np.int64)
        problem = LeaseProblem(capacity, tuple(fixed), self._objective(), checked)
        started = time.perf_counter()
        backend = self.settings.backend
        solution = solve(
            problem,
            backend=backend,
            time_limit_s=self.settings.time_limit_s,
            deterministic_time=self.settings.deterministic_time if backend == "cpsat" else None,
            hint=self._hint(problem),
        )
        self.stats.solve_seconds.append(time.perf_counter() - started)
        self.stats.fallbacks += solution.stats.fallback
        self.stats.last_status = solution.stats.status
        self.stats.last_backend = solution.stats.backend
        return solution, horizon, problem

    def _hint(self, problem: LeaseProblem) -> dict[str, Placement]:
        """The previous plan's placements of ``problem``'s jobs from the re-plan's first lease on
        (``_previous``: the plan and that lease, set once per re-plan), as solver slots (option
        0: a fixed job carries only its guaranteed one). Only placements with as many leases
        as the job's option needs are given: the packer drops any other before looking at its
        slots, and the previous plan's leases include restarts the first solve does not ask
        for, so most hints are of that kind and converting them all was a replay's
        ``_as_hint`` time (issue 27)."""
        plan, first = self._previous
        hint = {}
        for job in problem.jobs:
            leases = plan.get(job.id)
            if leases is None:
                continue
            past = bisect_left(leases, first)  # booked leases are sorted
            if len(leases) - past == job.options[0].leases_needed:
                hint[job.id] = Placement(0, tuple([t - first for t in leases[past:]]))
        return hint

    def _charge_restarts(
        self,
        fixed: list[LeaseJob],
        states: Mapping[str, JobState],
        now: float,
        first: int,
        *,
        whole: bool = True,
    ) -> tuple[list[LeaseJob], LeaseSolution, int]:
        """Plan the guaranteed jobs, each charged the restarts its own plan makes it pay.

        A job is first planned for its work alone; every gap between its planned leases, and a
        stop if it runs now but is not planned in the current lease, then costs it a restart.
        A job whose leases do not hold its work plus those restarts asks for as many more as it
        needs and the plan is solved again, at most ``RESTART_ROUNDS`` times. One restart
        allowance for every job, as new guarantees get, was too few for a plan with two gaps
        and one too many for a job that had paid for its gap and was planned as one block: the
        re-plan then demoted it (property tests, 1-node clusters of 4 and 8 GPUs).

        Whether a job's slots hold it depends on the job and those slots only, so each verdict
        is kept for the rounds that give the job the same slots: most jobs keep theirs, and
        re-checking all of them every round was most of a replay's time (issue 27).

        ``fixed`` comes planned for each job's work alone (its one option is the
        ``_kept_window`` of its padded work, with ``whole``), so slots that cost such a job no
        restart hold it by construction (the solver gives it that option's leases, before its
        deadline slot) and are not checked again (issue 27, session 13)."""
        solution, horizon, problem = self._solve(fixed, first)
        alone = {job.id: job for job in fixed}
        verdicts: dict[str, tuple[tuple[int, ...], LeaseJob | None]] = {}
        for _ in range(RESTART_ROUNDS):
            short = {}
            for job in fixed:
                slots = solution.slots.get(job.id) if solution.option[job.id] is not None else ()
                if not slots:
                    continue
                kept = verdicts.get(job.id)
                if kept is None or kept[0] != slots:
                    paid = restarts(slots, running=job.running)
                    if paid == 0 and job is alone[job.id]:
                        kept = slots, None
                    else:
                        state = states[job.id]
                        restarted = self._padded(state, now) + paid * state.overhead
                        kept = slots, self._short(job, slots, restarted, first, whole)
                    verdicts[job.id] = kept
                if kept[1] is not None:
                    short[job.id] = kept[1]
            if not short:
                break
            fixed = [short.get(job.id, job) for job in fixed]
            solution, horizon, problem = self._solve(fixed, first, problem)
        return fixed, solution, horizon

    def _short(
        self, job: LeaseJob, slots: tuple[int, ...], work: float, first: int, whole: bool
    ) -> LeaseJob | None:
        """``job`` asking for the leases its ``work`` (with the restarts ``slots`` make it pay)
        takes, if ``slots`` are too few or end too late for it; None if they hold it."""
        end, need = self._kept_window(job.id, work, first, whole)
        if need > len(slots) or max(slots) >= end - first:
            return self._replanned(job, work, first, whole=whole)
        return None

    def _fewest_dropped(
        self,
        fixed: list[LeaseJob],
        solution: LeaseSolution,
        horizon: int,
        states: Mapping[str, JobState],
        now: float,
        first: int,
    ) -> tuple[list[LeaseJob], LeaseSolution, int]:
        """A re-plan that drops a guarantee, against others, keeping the one that drops fewest
        (the first on ties). The greedy plan may find no room for a job's restarts that a plan
        counting one restart for every job, as before, still has; or for a job it planned in
        later leases that could have run on from this one (ending in it, or, last, in one block
        with every running job kept so and the others charged their plan's restarts); and a
        job may fit only with the part of the lease its deadline falls in, which each of these
        is tried with too."""
        padded = [self._padded(states[job.id], now) for job in fixed]
        plans, kept = [], []
        for whole in (True, False):
            alone = [
                self._replanned(job, work, first, whole=whole) for job, work in zip(fixed, padded)
            ]
            allowed = [
                self._replanned(
                    job, self._need_seconds(states[job.id], now, first), first, whole=whole
                )
                for job in fixed
            ]
            running = [self._kept_running(a, most=1) or b for a, b in zip(alone, allowed)]
            if not whole:
                plans.append(self._charge_restarts(alone, states, now, first, whole=False))
            plans += [(jobs, *self._solve(jobs, first)[:2]) for jobs in (allowed, running)]
            on = [self._kept_running(a) or a for a in alone]
            kept.append(self._charge_restarts(on, states, now, first, whole=whole))
        for plan in plans + kept:
            if len(plan[1].dropped) < len(solution.dropped):
                fixed, solution, horizon = plan
        return fixed, solution, horizon

    def _replanned(self, job: LeaseJob, work: float, first: int, *, whole: bool = True) -> LeaseJob:
        """``job`` (a guaranteed one: its only option is its promise) asking for the leases
        ``work`` seconds take by its promised deadline (``_kept_window``)."""
        end, need = self._kept_window(job.id, work, first, whole)
        option = replace(job.options[0], deadline_slot=end - first, leases_needed=need)
        return replace(job, options=(option,))

    def _kept_running(self, job: LeaseJob, *, most: int | None = None) -> LeaseJob | None:
        """``job`` (planned for its work alone, :meth:`_replanned`) held to the leases from the
        current one on, one block, if it runs and its work fits its window so in at most
        ``most`` leases (kept running, it pays no restart); else None. Planned in later leases,
        such a job is charged a restart for the stop and may need a lease more than its window
        has. With one lease (``most`` 1), the greedy plan spread it over a lease a job due later
        needed (random small clusters); with a start costing about a lease (a long start
        latency, no guard), a plan that pushed a running job's work late demoted it, though
        running on it finished hours early (``benchmarks/guarantee_scenarios.py
        --overhead-scale 10``)."""
        option = job.options[0]
        need = option.leases_needed
        if not job.running or option.deadline_slot < need or (most is not None and need > most):
            return None
        return replace(job, options=(replace(option, deadline_slot=need),))

    def _objective(self) -> str:
        """The plan's secondary goal this round: ``adaptive`` runs guaranteed work early only when
        no SLO job was refused since the last re-plan (nobody waits for the capacity it takes)."""
        if self.settings.objective != ADAPTIVE:
            return self.settings.objective
        return "minimize" if self._refused else "maximize"

    def _planned_tier(self, state: JobState, now: float) -> Tier:
        """MUST_RUN if the plan needs the job in the current lease now, else AHEAD (with a
        trigger queued for the instant its laxity runs out, if that is within this lease)."""
        leases = self.booked[state.id]  # sorted and distinct: one block iff its ends say so
        i = bisect_left(leases, self.lease_index)
        if i == len(leases) or leases[i] != self.lease_index:
            return Tier.AHEAD
        end, by = block_end(leases, self.guarantees[state.id].at, self.settings.lease)
        if leases[0] != end - len(leases) or leases[-1] != end - 1:
            return Tier.MUST_RUN
        trigger = by - self._cover(state, now)
        if trigger <= now:
            return Tier.MUST_RUN
        heapq.heappush(self._triggers, (trigger, state.id))
        return Tier.AHEAD

    def _tier(self, state: JobState, now: float) -> Tier:
        """The job's tier now, queueing a trigger for when it next has to change.

        A soft job guaranteed only a later option still competes in the pool for the tighter
        options it can meet: the guarantee is its floor, not its target."""
        if state.id in self.booked:
            planned = self._planned_tier(state, now)
            promised = self.guarantees[state.id]
            if (
                planned is Tier.AHEAD
                and promised != state.job.deadlines[0]
                and self._can_still_meet(state, now, before=promised.at)
            ):
                return Tier.SPOT
            return planned
        if not state.job.is_slo or not self.hopeless(state, now):
            return Tier.SPOT
        return Tier.HOPELESS

    def _set_tier(self, job_id: str, tier: Tier) -> bool:
        """Record a tier; True if it changed."""
        if self.tier(job_id) is tier:
            return False
        if tier is Tier.SPOT:
            self.tiers.pop(job_id, None)
        else:
            self.tiers[job_id] = tier
        return True

    def lease_began(self, now: float) -> None:
        """The lease ``now`` falls in began, re-planned elsewhere (the service's child process,
        ``Policy.replan_started``): this plan goes on deciding until that one is committed, so
        the jobs it booked in this lease are re-tiered at the next :meth:`due`, as if their
        trigger came. Kept in the tiers of the lease before, they waited for the commit and a
        round after it: at 120x on a loaded machine, up to 860 s of a 1200 s lease, and a
        guarantee that needed the whole lease broke (Slurm 24.11, issue 26 session 12).
        Only the candidates of the index of bookings by lease are read
        (:class:`~chronus_py.selector.by_lease.BookedByLease`); a plan without one (built in
        this process, not read from a re-plan) is indexed here, once: the service's first
        call is before its first fork, so the calls while the child computes read only the
        candidates (every booking read then was a page copy each, 19-25 ms of CPU at 6,024
        guarantees, issue 27 session 15)."""
        self.lease_index = lease_of(now, self.settings.lease)
        booked, index = self.booked, self.by_lease
        if index is None or not index.holds(booked):
            index = self.by_lease = BookedByLease.spanning(booked)
        for job_id in sorted(index.candidates(self.lease_index)):
            leases = booked.get(job_id, ())
            i = bisect_left(leases, self.lease_index)  # booked leases are sorted
            if i < len(leases) and leases[i] == self.lease_index:
                heapq.heappush(self._triggers, (now, job_id))

    def due(self, active: Mapping[str, JobState], now: float) -> set[str]:
        """Jobs whose laxity trigger has come, re-tiered (MUST_RUN)."""
        changed = set()
        while self._triggers and self._triggers[0][0] <= now:
            _, job_id = heapq.heappop(self._triggers)
            state = active.get(job_id)
            if state is not None and self._set_tier(job_id, self._tier(state, now)):
                changed.add(job_id)
        return changed

    def stop_breaks_plan(self, state: JobState, now: float, remaining: float | None = None) -> bool:
        """Whether stopping a running guaranteed job now would break its plan, so it must not
        be stopped for pool jobs. A stop costs the restart it paid plus a new one:
        - in its block (planned in this lease), that moves its laxity trigger one restart
          earlier than its progress does, so a job that started within one restart of its
          trigger would be due at once;
        - planned only in later leases, its work plus the restart, and one more for each gap
          between those leases, may outgrow them (each stop in the pool adds up to a restart:
          enough of them and it is demoted).
        At full speed neither answer changes while it runs on, so the key set at its start
        stays right. ``remaining``: ``state.remaining(now)``, if the caller has it already."""
        leases = self.plan.booked.get(state.id)
        if leases is None:
            return False
        restart = state.overhead if state.status is Status.RUNNING else 0.0
        kept = self._facts.get(state.id)  # _plan_facts' answer, read here without a call
        if kept is not None and kept[0] is leases and kept[1] == self.lease_index:
            in_block, by, gaps = kept[2]
        else:
            in_block, by, gaps = self._plan_facts(state.id, leases)
        if remaining is None:
            remaining = self._remaining(state, now)
        padded = remaining * self._pad(state)  # _padded, as _cover too, without asking again
        if in_block:
            return by - (padded + state.overhead + self.settings.guard) - restart <= now
        work = padded + restart + gaps * state.overhead
        return work > by + 1e-9 * self.settings.lease

    def _plan_facts(self, job_id: str, leases: tuple[int, ...]) -> tuple[bool, float, int]:
        """What :meth:`stop_breaks_plan` needs of a job's booked ``leases`` in this lease:
        whether the current lease is one of them, and then the instant its block must end by,
        else the seconds its later leases hold before its deadline and the gaps between them.
        They change only with the plan or the lease, while the policy asks at every decision
        for every running job (Philly MIX2: 894,538 times), so each is kept until then
        (``_facts``, which :meth:`stop_breaks_plan` reads before asking here)."""
        at, lease = self.guarantees[job_id].at, self.settings.lease
        i = bisect_left(leases, self.lease_index)  # booked leases are sorted
        if i < len(leases) and leases[i] == self.lease_index:
            facts = (True, block_end(leases, at, lease)[1], 0)
        else:
            later = leases[i:]
            facts = (False, room(later, at, lease), restarts(later, running=False))
        self._facts[job_id] = (leases, self.lease_index, facts)
        return facts

    def preempted(self, state: JobState, now: float) -> bool:
        """Re-tier a guaranteed job just preempted; True if its tier changed. Its trigger was
        timed before it started: the restart it lost (and the one it now needs again) make it
        due earlier, and a stale trigger would start it too late for the leases it holds."""
        if state.id not in self.booked:
            return False
        return self._set_tier(state.id, self._tier(state, now))

    def next_trigger(self) -> float | None:
        return self._triggers[0][0] if self._triggers else None

    def _demote(self, state: JobState) -> None:
        del self.guarantees[state.id]
        self._changes[state.id] = None
        self.plan.release(state.id)
        self.stats.demoted.append(state.id)

    def _retier(self, active: Mapping[str, JobState], now: float) -> set[str]:
        changed = set()
        self._triggers = []
        tiers, spot = self.tiers, Tier.SPOT
        for job_id, state in active.items():
            tier = self._tier(state, now)
            if tiers.get(job_id, spot) is not tier:  # most keep theirs: no _set_tier call
                self._set_tier(job_id, tier)
                changed.add(job_id)
        for job_id in [j for j in self.tiers if j not in active]:
            del self.tiers[job_id]
        for job_id in [j for j in self.guarantees if j not in active]:
            del self.guarantees[job_id]
        return changed

    # -- bounds: memory follows the leases that matter, never the value of a time ----------------
    def _spare(self, state: JobState) -> float:
        """What a *new* guarantee keeps spare in the lease its deadline falls in: one restart,
        for a start ahead of its plan that a due job then stops, and the ``guard``, the slack
        guarantees keep for what the plan does not model (a cluster manager's start latency;
        Slurm at 120x compression: 6 of 82 guarantees broken without it)."""
        return state.overhead + self.settings.guard

    def _kept_window(
        self, job_id: str, work: float, first: int, whole: bool = True
    ) -> tuple[int, int]:
        """A guaranteed job's window in a re-plan: with ``whole``, the leases that end by its
        deadline; the lease its deadline falls in too, with nothing spare, if the job is planned
        there already, those leases are too few, or not ``whole``. Dropping a promise does not
        help it be kept; but planned in that lease when whole ones would do, guaranteed jobs ran
        later and stopped more jobs (Philly MIX2: 0.2169 against 0.2060 preemptions per job),
        and a spare there dropped jobs the plan had room for."""
        at = self.guarantees[job_id].at
        end, need = self._window(at, work, first, math.inf)
        booked = self.booked.get(job_id)
        if whole and end - first >= need and not (booked and booked[-1] >= end):
            return end, need
        return self._window(at, work, first, 0.0)

    def _window(self, at: float, work: float, first: int, spare: float) -> tuple[int, int]:
        """:func:`deadline_window` of ``work`` seconds by ``at`` with ``spare`` seconds to spare
        in the lease ``at`` falls in, its end capped ``self._cap`` leases past ``first``.

        ``_cap`` is the work of every job the plan could hold (in leases) plus ``SLACK_LEASES``:
        within that many leases every job fits even if all run one after another, so a later
        deadline cannot change whether a job fits, only how far ahead it may be planned. Capping
        keeps the plan's arrays sized by work: deadlines in epoch milliseconds or at 1e308 used
        to allocate gigabytes. A capped plan only runs a job earlier than its deadline needs."""
        end, need = deadline_window(at, self.settings.lease, work, spare)
        return min(end, first + self._cap), need
