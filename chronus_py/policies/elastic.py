"""Three elastic policies, so they compare side by side on the one replay loop.

- ``ElasticChronus``: admits each job on its own against the lease plan (its minimum satisfactory
  share must fit without breaking any earlier lease); each lease holds one (re)start overhead's
  worth of GPU time in reserve; a declined job is retried when capacity frees and
  runs on idle GPUs meanwhile; leftover GPUs go by marginal gain, and a running job is only grown
  when the time it saves pays ``payback`` times the resize overhead. With ``backend="cpsat"`` a
  job the greedy plan refuses on arrival gets a second, exact chance from CP-SAT.
- ``ElasticFlowStyle``: written from the ElasticFlow paper (ASPLOS'23): arrivals merged into
  60 s slots, all admitted jobs and the newcomers planned by minimum satisfactory share in
  deadline order, and the newcomers admitted only if every job fits - otherwise all of them are
  declined (and dropped). Leftover GPUs by marginal gain, resizing freely.
- ``ElasticEDF``: no admission; in deadline order every job takes its largest size that fits.

They are registered in ``chronus_py.policies.POLICIES`` beside the rigid ones (``elastic`` marks
them: they name every job's size at each event instead of ordering a queue, so
``chronus_py.engine.replay`` runs them behind its ``ElasticScheduler``). Their promises live in the
one lease plan the rigid selector books too (``selector/plan.py``: a size per lease, one booking
per promised job), fitted by minimum satisfactory share (``selector/fit.py``), and read the one
:class:`~chronus_py.selector.ChronusSettings` (``lease`` is the lease length, ``headroom`` the
share kept unpromised) from elastic mode's own defaults, ``ELASTIC_DEFAULTS``.
"""

from __future__ import annotations

import heapq
import math
import time
from typing import Any, Mapping

import numpy as np

from chronus_py.jobs.state import JobState
from chronus_py.policies.base import ElasticView, SizingPolicy
from chronus_py.selector.fit import min_share, size_tables
from chronus_py.selector.plan import LeasePlan, Sizes
from chronus_py.selector.settings import ELASTIC_DEFAULTS, ChronusSettings
from solvers.elastic import ElasticTask, plan_elastic

BACKENDS = ("greedy", "cpsat")

INF = float("inf")


def distribute(
    now: float,
    runs: list[JobState],
    base: dict[str, int],
    free: int,
    cluster: ElasticView,
    *,
    payback: float = 0.0,
    stick: float = 1.0,
) -> dict[str, int]:
    """Give ``free`` GPUs on top of ``base`` sizes: first a start to stopped jobs in deadline order,
    then doublings by marginal gain (seconds of remaining runtime saved per extra GPU).

    With ``payback`` > 0, a running job is not grown past its current size unless the runtime the
    move saves is at least ``payback`` x its overhead; ``stick`` multiplies the gain of steps back
    to a job's current size (moving away from it costs a resize too)."""
    sizes = dict(base)
    heap: list[tuple[int, float, int, JobState, int]] = []
    seq = 0
    grow_cost: dict[int, float] = {}

    def push(r: JobState) -> None:
        nonlocal seq
        t = sizes.get(r.id, 0)
        nxt = r.next_size.get(t)
        if nxt is None:
            return
        if t == 0:
            key = (0, r.deadline)
        else:
            rates = r.rate_of
            work = left[r.id]
            saved = work / rates[t] - work / rates[nxt]
            if payback and nxt > r.size > 0:
                cost = grow_cost.get(nxt)
                if cost is None:
                    cost = grow_cost[nxt] = cluster.overhead.seconds(
                        nxt, cluster.gpus, from_stopped=False, known_gpus=False
                    )
                if saved < payback * cost:
                    return
            gain = saved / (nxt - t)
            if nxt <= r.size:
                gain *= stick
            key = (1, -gain)
        seq += 1
        heapq.heappush(heap, (key[0], key[1], seq, r, nxt))

    left = {r.id: r.remaining(now) for r in runs}  # fixed while GPUs are handed out
    for r in runs:
        push(r)
    while heap and free > 0:
        _, _, _, r, nxt = heapq.heappop(heap)
        extra = nxt - sizes.get(r.id, 0)
        if extra > free:
            continue
        sizes[r.id] = nxt
        free -= extra
        push(r)
    return sizes


def resumes(booking: Sizes) -> int:
    """How often a job following ``booking`` starts again after a lease without GPUs."""
    sizes = booking.sizes
    return int(np.count_nonzero((sizes[1:] > 0) & (sizes[:-1] == 0)))


class LeasePolicy(SizingPolicy):
    """What Chronus and the ElasticFlow-style peer share: promises booked in a lease plan
    (``plan``: each promised job's size per lease), the plan's wake-ups, and execution = each
    job's booked size now plus leftover GPUs."""

    name = "lease"
    payback = 0.0
    stick = 1.0

    def __init__(self, slot: float = 60.0, reserve: float = 0.0, headroom: float = 0.0):
        self.slot = slot
        self.reserve = reserve
        self.headroom = headroom
        self.plan = LeasePlan(slot, 0)
        self.tables: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.peaks: dict[str, tuple[Sizes, int]] = {}

    def planned_work(self, r: JobState, cluster: ElasticView, now: float) -> float:
        """Iterations the lease must hold: the remaining ones plus ``reserve`` overheads' worth at
        the job's fastest rate - a (re)start for a stopped job, a resize onto new GPUs for a
        running one - and the rest of a pause the job is in now. Holding the overhead inside the
        lease (not as slack after it) keeps GPUs reserved for the time the job spends paused. A
        job promised while still paused by its start, planned without the rest of that pause,
        missed (property test: 19 s of a 29 s start left, done 0.3 s late)."""
        paused = max(r.paused_until - now, 0.0) if r.size else 0.0
        if self.reserve:
            o = cluster.overhead
            pause = (
                o.seconds(r.job.max_size, cluster.gpus, from_stopped=False, known_gpus=False)
                if r.size
                else o.worst(r.job.max_size, cluster.gpus)
            )
            paused += self.reserve * pause
        return r.remaining(now) + paused * r.job.top_rate

    def tables_of(self, r: JobState) -> tuple[np.ndarray, np.ndarray]:
        if r.id not in self.tables:
            self.tables[r.id] = size_tables(r.job)
        return self.tables[r.id]

    def fit(self, plan: LeasePlan, r: JobState, cluster: ElasticView, now: float) -> Sizes | None:
        """The job's booking on ``plan`` (minimum satisfactory share). With a ``reserve``, every
        gap in it (leases at 0 GPUs between leases with GPUs) is a stop and a resume the job pays
        a start for, so the booking also holds a start's worth of work per resume: refitted until
        it holds one for each of its own resumes. A booking with gaps that held only one start
        broke its promise (property test: a 4-GPU job resumed four times, done 278 s late)."""
        work = self.planned_work(r, cluster, now)
        tables = self.tables_of(r)
        sizes = min_share(plan, r.job, work, now, r.deadline, tables, self.headroom)
        if not self.reserve:
            return sizes
        start = self.reserve * cluster.overhead.worst(r.job.max_size, cluster.gpus)
        held = 0
        while sizes is not None:
            needed = resumes(sizes)
            if needed <= held:
                return sizes
            held = needed
            work_held = work + held * start * r.job.top_rate
            sizes = min_share(plan, r.job, work_held, now, r.deadline, tables, self.headroom)
        return None

    def replan(self, now: float, runs: list[JobState], cluster: ElasticView) -> LeasePlan | None:
        """A fresh plan of ``runs`` in deadline order, or None if any does not fit."""
        plan, missing = self.plan_all(now, runs, cluster)
        return None if missing else plan

    def plan_all(
        self, now: float, runs: list[JobState], cluster: ElasticView
    ) -> tuple[LeasePlan, set[str]]:
        """A fresh plan of ``runs`` in deadline order, and the ids of those that do not fit."""
        plan = LeasePlan(self.slot, cluster.gpus, math.floor(now / self.slot))
        missing: set[str] = set()
        for r in sorted(runs, key=lambda r: (r.deadline, r.id)):
            sizes = self.fit(plan, r, cluster, now)
            if sizes is None:
                missing.add(r.id)
            else:
                plan.book_sizes(r.id, sizes)
        return plan, missing

    def current(self, cluster: ElasticView) -> LeasePlan:
        """The plan of the current promises, on the cluster's GPUs now."""
        self.plan.capacity = cluster.gpus
        return self.plan

    def refresh_changes(self) -> None:
        """Each booking's largest size, so ``next_wake`` skips the jobs already running above
        it."""
        self.peaks = {
            id: (booking, int(booking.sizes.max(initial=0)))
            for id, booking in self.plan.sized.items()
        }

    def next_wake(self, now: float, sizes: dict[str, int]) -> float:
        """The first lease boundary after ``now`` where some booking asks for more GPUs than the
        job has: execution must be looked at again there."""
        lease = math.floor(now / self.slot) + 1
        wake = INF
        for id, (booking, peak) in self.peaks.items():
            size = sizes.get(id, 0)
            if size >= peak or booking.end <= lease:
                continue
            skip = max(0, lease - booking.start)
            above = np.flatnonzero(booking.sizes[skip:] > size)
            if above.size:
                wake = min(wake, (booking.start + skip + int(above[0])) * self.slot)
        return wake

    def assign(
        self, now: float, active: list[JobState], cluster: ElasticView
    ) -> tuple[dict[str, int], float]:
        lease = math.floor(now / self.slot)
        promised = [r for r in active if r.guaranteed]
        booked = self.plan.sized
        base = {r.id: booked[r.id].at(lease) for r in promised if r.id in booked}
        free = cluster.gpus - sum(base.values())
        sizes = distribute(
            now, promised, base, free, cluster, payback=self.payback, stick=self.stick
        )
        idle = cluster.gpus - sum(sizes.values())
        for r in sorted(
            (r for r in active if not r.guaranteed and not r.dropped), key=lambda r: r.deadline
        ):
            fits = [n for n in r.job.sizes if n <= idle]
            if fits:
                sizes[r.id] = r.size if r.size in fits and self.stick > 1 else fits[-1]
                idle -= sizes[r.id]
        return sizes, self.next_wake(now, sizes)

    def finished(self, run: JobState) -> None:
        self.plan.release(run.id)
        self.tables.pop(run.id, None)
        self.peaks.pop(run.id, None)


def hopeless(r: JobState, now: float) -> bool:
    """Cannot meet its deadline even alone at its fastest size from now."""
    return now + r.remaining(now) / r.job.top_rate > r.deadline


class ElasticChronus(LeasePolicy):
    """``backend`` "greedy" admits by the greedy lease plan only; "cpsat" asks CP-SAT (a plan of
    every promised job and the newcomer at once, ``solvers.elastic``) whenever the greedy plan
    refuses a job that arrived, with ``time_limit`` seconds per call. ``exact`` counts those
    calls, the admissions they rescued and their seconds."""

    name = "elastic-chronus"

    def __init__(
        self,
        slot: float = 60.0,
        reserve: float = 1.0,
        payback: float = 3.0,
        stick: float = 2.0,
        replan_on_reject: bool = True,
        backend: str = "greedy",
        time_limit: float = 0.5,
        headroom: float = 0.0,
    ):
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
        super().__init__(slot=slot, reserve=reserve, headroom=headroom)
        self.replan_on_reject = replan_on_reject
        self.payback = payback
        self.stick = stick
        self.backend = backend
        self.time_limit = time_limit
        self.exact_stats = {"calls": 0, "rescued": 0, "seconds": 0.0}
        self.waiting: dict[str, JobState] = {}
        self.capacity_freed = False

    def admit(
        self, now: float, arrivals: list[JobState], active: list[JobState], cluster: ElasticView
    ) -> None:
        promised = [r for r in active if r.guaranteed]
        for r in arrivals:
            self.waiting[r.id] = r
        self._try_waiting(now, promised, cluster, full=self.replan_on_reject)

    def _try_waiting(
        self, now: float, promised: list[JobState], cluster: ElasticView, *, full: bool
    ) -> None:
        """Admit waiting jobs one at a time in deadline order: into the capacity the current
        bookings leave (still valid: promised jobs ran at least their booked sizes), else
        (``full``) into a fresh plan of everyone promised - which drops what jobs ahead of their
        bookings no longer need - and else with the job inserted in deadline order. A job that
        cannot fit keeps waiting (and runs on idle GPUs) until it is hopeless."""
        self.current(cluster)
        compacted = False
        for r in sorted(self.waiting.values(), key=lambda r: (r.deadline, r.id)):
            if hopeless(r, now):
                r.dropped = True
                del self.waiting[r.id]
                continue
            sizes = self.fit(self.plan, r, cluster, now)
            if sizes is None and full and not compacted:
                compacted = True
                fresh = self.replan(now, promised, cluster)
                if fresh is not None:
                    self.plan = fresh
                    sizes = self.fit(self.plan, r, cluster, now)
            if sizes is not None:
                self.plan.book_sizes(r.id, sizes)
            elif full:
                trial = self.insert(now, r, promised, cluster)
                if trial is None and self.backend == "cpsat":
                    trial = self.exact(now, r, promised, cluster)
                if trial is not None:
                    self.plan = trial
            if r.id in self.plan.sized:
                r.guaranteed = r.was_guaranteed = r.job.deadlines[0]
                promised.append(r)
                del self.waiting[r.id]
        self.refresh_changes()

    def insert(
        self, now: float, r: JobState, promised: list[JobState], cluster: ElasticView
    ) -> LeasePlan | None:
        """The plan with ``r`` inserted in deadline order: promised jobs due before it keep their
        bookings, ``r`` is fitted next and the later ones are fitted again after it; None if any
        does not fit (then nothing changes)."""
        key = (r.deadline, r.id)
        plan = LeasePlan(self.slot, cluster.gpus, math.floor(now / self.slot))
        booked = self.plan.sized
        later = []
        for p in promised:
            if (p.deadline, p.id) < key and p.id in booked:
                plan.book_sizes(p.id, booked[p.id])
            else:
                later.append(p)
        for q in [r] + sorted(later, key=lambda q: (q.deadline, q.id)):
            sizes = self.fit(plan, q, cluster, now)
            if sizes is None:
                return None
            plan.book_sizes(q.id, sizes)
        return plan

    def exact(
        self, now: float, r: JobState, promised: list[JobState], cluster: ElasticView
    ) -> LeasePlan | None:
        """Every promised job and ``r`` planned at once by CP-SAT (``solvers.elastic``), or None
        if it finds no plan in time; promised jobs already past their deadline lease cannot be
        planned, so then nothing is tried."""
        origin = math.floor(now / self.slot)
        plan = LeasePlan(self.slot, cluster.gpus, origin)
        jobs = [*promised, r]
        tasks = [
            ElasticTask(
                q.id,
                q.job.sizes,
                q.job.throughputs,
                self.planned_work(q, cluster, now),
                math.floor(q.deadline / self.slot) - origin,
            )
            for q in jobs
        ]
        if any(t.end <= 0 for t in tasks):
            return None
        started = time.perf_counter()
        segments = plan_elastic(
            tasks,
            plan.capacity - plan.kept(self.headroom),
            self.slot,
            (origin + 1) * self.slot - now,
            time_limit_s=self.time_limit,
            threads=1,
        )
        self.exact_stats["calls"] += 1
        self.exact_stats["seconds"] += time.perf_counter() - started
        if segments is None or any(not segments[q.id] for q in jobs):
            return None
        for q in jobs:
            parts = segments[q.id]
            start = parts[0].start
            sizes = np.zeros(parts[-1].stop - start, dtype=np.int64)
            for part in parts:
                sizes[part.start - start : part.stop - start] = part.gpus
            plan.book_sizes(q.id, Sizes(origin + start, sizes))
        self.exact_stats["rescued"] += 1
        return plan

    def assign(
        self, now: float, active: list[JobState], cluster: ElasticView
    ) -> tuple[dict[str, int], float]:
        if self.capacity_freed and self.waiting:
            self.capacity_freed = False
            self._try_waiting(now, [r for r in active if r.guaranteed], cluster, full=False)
        return super().assign(now, active, cluster)

    def finished(self, run: JobState) -> None:
        super().finished(run)
        self.waiting.pop(run.id, None)
        self.capacity_freed = True


class ElasticFlowStyle(LeasePolicy):
    name = "elasticflow"

    def __init__(self, slot: float = 60.0, headroom: float = 0.0):
        super().__init__(slot=slot, headroom=headroom)
        self.arrival_window = slot  # arrivals are merged per slot of its plan

    def admit(
        self, now: float, arrivals: list[JobState], active: list[JobState], cluster: ElasticView
    ) -> None:
        """All newcomers or none: they are admitted if they fit and every promised job that fits
        without them still fits (a job already behind its plan does not block everyone after)."""
        promised = [r for r in active if r.guaranteed]
        plan, behind = self.plan_all(now, promised, cluster)
        trial, missing = self.plan_all(now, promised + arrivals, cluster)
        if missing <= behind:
            self.plan = trial
            for r in arrivals:
                r.guaranteed = r.was_guaranteed = r.job.deadlines[0]
        else:
            self.plan = plan
            for r in arrivals:
                r.dropped = True
        self.refresh_changes()


class ElasticEDF(SizingPolicy):
    name = "elastic-edf"

    def admit(
        self, now: float, arrivals: list[JobState], active: list[JobState], cluster: ElasticView
    ) -> None:
        return None

    def assign(
        self, now: float, active: list[JobState], cluster: ElasticView
    ) -> tuple[dict[str, int], float]:
        idle = cluster.gpus
        sizes: dict[str, int] = {}
        for r in sorted(active, key=lambda r: (r.deadline, r.id)):
            fits = [n for n in r.job.sizes if n <= idle]
            if fits:
                sizes[r.id] = fits[-1]
                idle -= fits[-1]
        return sizes, INF


def elastic_settings(options: Mapping[str, Any]) -> ChronusSettings:
    """The one ChronusSettings, from elastic mode's defaults under ``options`` (checked)."""
    return ChronusSettings.from_mapping({**ELASTIC_DEFAULTS, **options})


def elastic_chronus(options: Mapping[str, Any]) -> ElasticChronus:
    """Elastic Chronus from the lease planner's settings: ``lease`` is its slot, ``headroom`` the
    share its plan keeps unpromised, ``backend`` greedy or cpsat, ``time_limit_s`` per CP-SAT
    call."""
    s = elastic_settings(options)
    return ElasticChronus(
        slot=s.lease, headroom=s.headroom, backend=s.backend, time_limit=s.time_limit_s
    )


def elasticflow(options: Mapping[str, Any]) -> ElasticFlowStyle:
    """The ElasticFlow-style peer on the same lease planner settings (``lease``: its slot)."""
    s = elastic_settings(options)
    return ElasticFlowStyle(slot=s.lease, headroom=s.headroom)
