"""The scheduler: job state between rounds and the one placement walk every policy shares.

A cluster manager (or the replay engine, which plays one) calls ``submit`` when a job arrives,
``finish`` when it ends, and at each decision point the two steps of a round
(``chronus_py.round`` runs them in order): ``select(now)`` lets the policy admit, re-plan and
re-order the jobs, and ``place(now)`` walks that order against the allocator: jobs that fit get
GPUs, running jobs that no longer make the cut are preempted (if the policy is preemptive), the
rest wait. The scheduler owns every job record (:class:`~chronus_py.jobs.state.JobState`); the
policy reports what it decided (guarantees, standings) and the scheduler writes it down.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import Counter
from dataclasses import dataclass
from itertools import accumulate
from typing import Callable, Iterable, Mapping

from chronus_py.errors import ArgumentError, InputError, JobIdError
from chronus_py.estimates import EstimateErrors, Estimator, Oracle
from chronus_py.jobs.checks import check_cluster, check_job, integer, number
from chronus_py.jobs.model import Cluster, DeadlineOption, Job
from chronus_py.jobs.overhead import restart_overhead
from chronus_py.jobs.state import JobState, Status
from chronus_py.policies.base import Policy, View
from placement import Allocator, ConsolidatedAllocator, PodSpec, Request, round_up
from placement.limits import MAX_SECONDS
from placement.loading import show

SpeedModel = Callable[[Job, Mapping[str, tuple[int, ...]]], float]


@dataclass(frozen=True)
class Moves:
    """What one ``place`` call changed: jobs started (with placements), jobs preempted, and
    running jobs moved to another size (elastic ones; ``chronus_py.engine.elastic``)."""

    now: float
    started: tuple[JobState, ...]
    preempted: tuple[JobState, ...]
    resized: tuple[JobState, ...] = ()


class Scheduler:
    """One scheduler is used by one thread at a time: it takes no lock, so a cluster manager that
    submits, reports and runs rounds from several threads holds its own lock around every call
    (the service runs them all on one worker thread). A submission or report made while
    ``run_round`` runs is refused (an ArgumentError), as is a second ``run_round``; that check
    is no lock and may miss a call made at the same instant. It pickles and deep-copies,
    allocator and policy included, e.g. to try a round on a copy.

    ``round_requests``: ask the allocator for the {1, 2, 4, whole nodes} round-up of each job's
    GPUs (placement's ``round_up``, the sizes the Chronus artifact packs), so a 3-GPU job holds
    4 GPUs and odd sizes leave no holes; off, a job holds exactly what it asked for.

    ``even_gangs``: every node a job spans holds the same number of its GPUs, for a cluster
    manager that asks GPUs per node (Slurm): a 12-GPU job on 8-GPU nodes is 2 x 6 or 3 x 4, never
    8 + 4, and the default allocator spreads a gang only evenly.

    ``whole_pods``: the cluster manager runs a gang as the pods it was given and cannot reshape
    them (Kueue: a Job's pods ask fixed GPUs each), so the default allocator never falls back to
    spreading a gang's GPUs over nodes: a one-pod 4-GPU Job waits for a node with 4 free GPUs
    instead of being planned as 2 + 2, which the cluster manager refuses round after round."""

    def __init__(
        self,
        cluster: Cluster,
        policy: Policy,
        *,
        allocator: Allocator | None = None,
        estimator: Estimator | None = None,
        overhead: Callable[[int], float] = restart_overhead,
        speed: SpeedModel | None = None,
        round_requests: bool = False,
        even_gangs: bool = False,
        whole_pods: bool = False,
    ):
        cluster = check_cluster(cluster)
        if getattr(policy, "elastic", False):
            raise InputError(
                policy.name,
                "an elastic policy sizes jobs in a replay (chronus replay --elastic); a "
                "scheduling round needs one that orders a queue",
            )
        for name, value, needs in (
            ("policy", policy, ("prepare", "key", "keys")),
            ("estimator", estimator, ("estimate", "uncertainty")),
        ):
            if value is not None and not all(callable(getattr(value, m, None)) for m in needs):
                raise ArgumentError(
                    "Scheduler",
                    f"expected an object with {', '.join(needs)} methods, got {show(value)}",
                    field=name,
                )
        self.cluster = cluster
        self.policy = policy
        self.allocator = allocator or ConsolidatedAllocator(
            ((n.name, n.gpus) for n in cluster.nodes), spread=not whole_pods, even=even_gangs
        )
        self.estimator = estimator or Oracle()
        self.overhead = overhead
        self.speed = speed
        self.round_requests = round_requests
        self.even_gangs = even_gangs
        self.estimate_errors = EstimateErrors()
        self.node_gpus = max(n.gpus for n in cluster.nodes)
        self.total_gpus = cluster.gpus
        self.jobs: dict[str, JobState] = {}
        self._taken = 0  # jobs taken in, forgotten ones too: each one's ``seq``
        self.active: dict[str, JobState] = {}
        self.running: dict[str, JobState] = {}
        self._arrived: list[JobState] = []
        self._pending: list[tuple[tuple, str]] = []
        self._pending_key: dict[str, tuple] = {}
        self._pending_sizes: Counter[int] = Counter()
        self._running_key: dict[str, tuple] = {}
        self._running_sorted: list[tuple[tuple, str]] = []
        self._key_changes: list[tuple[float, int, str, int]] = []
        self.latest_submit = -math.inf  # the latest submit time of a job taken in
        self.last_round: float | None = None  # ``now`` of the last ``run_round``
        self.in_round = False  # while ``run_round`` runs: a call then comes from another thread
        # The latest report (finish, progress, ...): its time, what it said, of which job.
        self.latest_report: tuple[float, str, str] = (-math.inf, "", "")

    # -- intake ---------------------------------------------------------------------------------
    def submit(self, job: Job) -> JobState:
        """Take in a job that arrived (at ``job.submit``; a round before then is refused), its
        estimate from the estimator. A job wider than the cluster, an id taken before, or a bad
        field is an ArgumentError naming it, and nothing is changed."""
        if self.in_round:
            raise _busy("Scheduler.submit")
        job = check_job(job)
        if job.duration is None and not job.rates and type(self.estimator) is Oracle:
            raise ArgumentError(
                f"job {show(job.id)}",
                "no runtime: the scheduler was made without an estimator, so it takes the job's "
                "duration (Oracle); give one, or Scheduler(..., estimator=Fixed({id: seconds}))",
                field="duration",
            )
        if job.gpus > self.total_gpus:
            raise ArgumentError(
                f"job {show(job.id)}",
                f"{job.gpus} is more than the cluster's {self.total_gpus} GPUs",
                field="gpus",
            )
        return self._take(job)

    def _take(self, job: Job) -> JobState:
        if job.id in self.jobs:
            raise ArgumentError(
                f"job {show(job.id)}", "submitted twice: job ids are unique", field="id"
            )
        estimate = self.estimator.estimate(job)
        if type(estimate) is not float or not 0.0 <= estimate <= MAX_SECONDS:
            estimate = number(estimate, f"job {show(job.id)}", "estimate (the estimator's)")
        uncertainty = self.estimator.uncertainty(job)
        if type(uncertainty) is not float or not 0.0 <= uncertainty <= MAX_SECONDS:
            uncertainty = number(
                uncertainty, f"job {show(job.id)}", "uncertainty (the estimator's)"
            )
        state = JobState(
            job=job,
            seq=self._taken,
            estimate=estimate,
            overhead=self.overhead(job.gpus),
            uncertainty=uncertainty,
        )
        if job.submit > self.latest_submit:
            self.latest_submit = job.submit
        if self.round_requests and job.pod_gpus is None:  # fixed pods are not rounded up
            state.gpus = round_up(job.gpus, node=self.node_gpus)
        self._taken += 1
        self.jobs[job.id] = state
        self.active[job.id] = state
        self._arrived.append(state)
        self._enqueue(state, job.submit)
        return state

    def finish(self, job_id: str, now: float) -> JobState:
        """A running job ended at ``now``: its GPUs are free for the next round. A job that is
        not running (pending: :meth:`withdraw` it; finished; never submitted) is a JobIdError."""
        state = self.running.get(job_id)
        if state is None or self.in_round:
            raise self._not_held(job_id, "Scheduler.finish")
        now = _time(now, "Scheduler.finish")
        if now > self.latest_report[0]:
            self.latest_report = (now, "finished", job_id)
        del self.running[job_id]
        del self.active[job_id]
        self._set_running_key(state, None)
        self.allocator.release(job_id)
        state.stop(now)
        state.status = Status.FINISHED
        state.finish = now
        return state

    def withdraw(self, job_id: str, now: float) -> JobState:
        """Remove an active job for good (cancelled, or ended outside the scheduler), releasing
        its GPUs if it runs. It keeps status FINISHED with ``finish`` = ``now`` as the end of its
        record; the caller knows why it ended."""
        state = self._active(job_id, "Scheduler.withdraw")
        now = _time(now, "Scheduler.withdraw")
        if state.status is Status.RUNNING:
            return self.finish(job_id, now)
        if now > self.latest_report[0]:
            self.latest_report = (now, "withdrawn", job_id)
        self._dequeue(state)
        del self.active[job_id]
        if state in self._arrived:
            self._arrived.remove(state)
        state.status = Status.FINISHED
        state.finish = now
        return state

    def forget(self, job_id: str) -> None:
        """Drop an ended job's record (``jobs``), for a caller that keeps it elsewhere.

        Why: a replay reads every record at its end (its metrics), but ``chronus serve`` keeps
        ended jobs in its database and runs for months; under churn (submissions and
        cancellations at one level of waiting jobs, issue 27) the records it never read again
        held ~0.8 KB a cancelled job for good, and the cyclic collector's passes walked them.
        Forgotten, the job is as one ended before a restart: never submitted, to this
        scheduler, so an id's uniqueness is then the caller's to keep. A job still active is
        a JobIdError."""
        if self.in_round:
            raise _busy("Scheduler.forget")
        if job_id in self.active:
            why = f"{show(job_id)} has not ended (withdraw() ends a job)"
            raise JobIdError("Scheduler.forget", why, field="job_id")
        if self.jobs.pop(job_id, None) is None:
            raise self._not_held(job_id, "Scheduler.forget")

    # -- queues ---------------------------------------------------------------------------------
    def _enqueue(self, state: JobState, now: float) -> None:
        key = self.policy.key(state, now)
        bisect.insort(self._pending, (key, state.id))
        self._pending_key[state.id] = key
        self._pending_sizes[state.gpus] += 1

    def _dequeue(self, state: JobState) -> None:
        key = self._pending_key.pop(state.id)
        del self._pending[bisect.bisect_left(self._pending, (key, state.id))]
        self._pending_sizes[state.gpus] -= 1
        if not self._pending_sizes[state.gpus]:
            del self._pending_sizes[state.gpus]

    def _rekey(self, job_ids, now: float) -> None:
        """Re-sort the jobs whose key the policy says changed, pending or running."""
        for job_id in job_ids:
            state = self.active.get(job_id)
            if state is None:
                continue
            if state.status is Status.RUNNING:
                self._set_running_key(state, self.policy.key(state, now))
            else:
                self._dequeue(state)
                self._enqueue(state, now)

    def pending(self) -> list[JobState]:
        """Pending jobs in the policy's order."""
        return [self.jobs[i] for _, i in self._pending]

    def view(self, now: float) -> View:
        return View(
            now=now,
            active=self.active,
            running=self.running,
            arrived=tuple(self._arrived),
            free_gpus=self.allocator.free_gpus(),
            total_gpus=self.total_gpus,
            node_gpus=self.node_gpus,
            estimate_pad=self.estimate_errors.pad(),
            estimate_cut=self.estimate_errors.cut(),
        )

    def next_wakeup(self, now: float) -> float | None:
        """The next instant at which the plan may change without any arrival or completion."""
        while self._key_changes and not self._live(self._key_changes[0]):
            heapq.heappop(self._key_changes)
        if not self.active:
            return None
        times = [
            t
            for t in (
                self.policy.next_wakeup(now),
                self._key_changes[0][0] if self._key_changes else None,
            )
            if t is not None
        ]
        return min(times) if times else None

    def _live(self, change: tuple[float, int, str, int]) -> bool:
        """A key-change wake-up still applies only to the run of the job that scheduled it."""
        state = self.running.get(change[2])
        return state is not None and state.starts == change[3]

    # -- the two steps of a round ----------------------------------------------------------------
    def select(self, now: float) -> set[str]:
        """The policy's step: it sees the jobs that arrived, admits and re-plans (guarantees are
        written into the job records here), and every job whose order changed is re-sorted.
        Returns the ids of those jobs. Cheap enough to run on its own, e.g. to answer a
        submission with its admission before the next placement walk."""
        changed = set(self.policy.prepare(self.view(now)))
        self._arrived.clear()
        for job_id, option in self.policy.take_guarantee_changes().items():
            state = self.jobs.get(job_id)
            if state is None:  # ended and forgotten (``forget``): no record to write it in
                continue
            state.guaranteed = option
            if option is not None:
                state.was_guaranteed = option
        self._rekey(changed, now)
        while self._key_changes and self._key_changes[0][0] <= now:
            change = heapq.heappop(self._key_changes)
            if self._live(change):
                self._set_running_key(
                    self.running[change[2]], self.policy.key(self.running[change[2]], now)
                )
        return changed

    def place(self, now: float) -> Moves:
        """The placement step: start and preempt so the best-ordered fitting set runs."""
        if not self._pending:
            return Moves(now, (), ())
        if (
            self.policy.preemptive
            and self._running_sorted
            and self._pending[0] < self._running_sorted[-1]
        ):
            return self._walk(now)
        return Moves(now, tuple(self._fill(now)), ())

    def _fill(self, now: float) -> list[JobState]:
        """Start pending jobs in order while GPUs are free (skipping those that do not fit).

        A job the allocator turns down (e.g. its tenant's cells are full) is skipped for the
        rest of this round and the walk goes on with the GPUs it did not take."""
        started: list[JobState] = []
        refused: set[str] = set()
        while True:
            free = self.allocator.free_gpus()
            chosen = []
            smallest = min(self._pending_sizes, default=0)
            for _, job_id in self._pending:
                if free < smallest or free == 0:
                    break
                state = self.jobs[job_id]
                if job_id in refused:
                    continue
                if state.gpus <= free:
                    chosen.append(state)
                    free -= state.gpus
                elif not self.policy.backfill:
                    break
            placed = [state for state in chosen if self._start(state, now)]
            started += placed
            if len(placed) == len(chosen):
                return started
            refused.update(s.id for s in chosen if s.status is Status.PENDING)

    def _walk(self, now: float) -> Moves:
        """Merge running and pending jobs in key order and give GPUs to the fitting prefix.

        Running jobs whose (stale, never better than fresh) key sorts before the best pending job
        keep their GPUs whatever happens, so only the tail after it is re-keyed and walked
        (:func:`merge_walk`).
        """
        cut = bisect.bisect_left(self._running_sorted, self._pending[0])
        ids = [i for _, i in self._running_sorted[cut:]]
        tail = [self.running[i] for i in ids]
        keys = self.policy.keys(tail, now)
        self._running_key.update(zip(ids, keys))
        ranked = sorted(zip(keys, ids, [s.gpus for s in tail]))  # ids are unique: by (key, id)
        fresh = [(key, job_id) for key, job_id, _ in ranked]
        gpus = [g for _, _, g in ranked]
        del self._running_sorted[cut:]
        self._running_sorted += fresh
        self._running_sorted.sort()  # two sorted runs: one linear merge, not a bisect per job
        budget = self.allocator.free_gpus() + sum(gpus)
        smallest = min(min(self._pending_sizes), min(gpus))
        dropped, chosen = merge_walk(
            fresh, gpus, self._pending, self._gpus_of, budget, smallest, self.policy.backfill
        )
        start = [(key, self.jobs[job_id]) for key, job_id in chosen]
        preempted = [s for s in tail if s.id in dropped]
        places = {s.id: dict(s.placement) for s in preempted}
        for state in preempted:
            self._preempt(state, now)
        started = [s for _, s in start if self._start(s, now)]
        if len(started) < len(start):
            # The allocator refused a gang the GPU count promised room for (e.g. it will not
            # spread, or its tenant's cells are full): jobs stopped for it resume where they were
            # before anyone else gets their GPUs, instead of paying a restart for nothing, and
            # the gang then asks jobs ranked after it for the room it needs.
            preempted = [s for s in preempted if not self._resume(s, places[s.id], now)]
            for key, state in start:
                if state.status is Status.PENDING:
                    preempted += self._make_room(state, key, now)
                    if state.status is Status.RUNNING:
                        started.append(state)
            started += self._fill(now)
        self._rekey([s.id for s in preempted if self.policy.preempted(s, now)], now)
        return Moves(now, tuple(started), tuple(preempted))

    def _gpus_of(self, job_id: str) -> int:
        return self.jobs[job_id].gpus

    def _make_room(self, state: JobState, key: tuple, now: float) -> list[JobState]:
        """Start ``state`` (ranked ``key``), which the allocator refused although enough GPUs
        are free or held by jobs ranked after it: those are stopped, worst first, until it is
        placed, and every one whose GPUs it did not take resumes where it was. Returns the jobs
        stopped for it (none if it still does not fit).

        Without this a gang kept waiting while lower-ranked jobs held a GPU in every node or
        cell it could use, since the walk keeps running jobs by count: on a HiveD cell tree
        0.3-0.55% of the Philly traces' guaranteed jobs missed (none now), and on Slurm, which
        runs a gang only in equal shares per node, a due 4-GPU job started 564 s late."""
        victims = sorted(
            ((k, job_id) for job_id, k in self._running_key.items() if k > key), reverse=True
        )
        room = self.allocator.free_gpus() + sum(self.jobs[j].gpus for _, j in victims)
        if room < state.gpus:
            return []
        stopped, places = [], {}
        for _, job_id in victims:
            victim = self.jobs[job_id]
            places[job_id] = dict(victim.placement)
            self._preempt(victim, now)
            stopped.append(victim)
            if self._start(state, now):
                break
        return [v for v in stopped if not self._resume(v, places[v.id], now)]

    def _resume(
        self, state: JobState, placement: Mapping[str, tuple[int, ...]], now: float
    ) -> bool:
        """Undo a preemption made at ``now`` if the job's GPUs are still free: same GPUs, same
        run, no restart charged. False (and nothing changed) if they are not."""
        if self.allocator.reserve(self.request_for(state), placement).outcome != "placed":
            return False
        self._dequeue(state)
        state.preemptions -= 1
        self._run_on(state, placement, now)
        return True

    def _set_running_key(self, state: JobState, key: tuple | None) -> None:
        """Replace a running job's key in the sorted running index (None: remove it)."""
        old = self._running_key.pop(state.id, None)
        if old is not None:
            del self._running_sorted[bisect.bisect_left(self._running_sorted, (old, state.id))]
        if key is not None:
            self._running_key[state.id] = key
            bisect.insort(self._running_sorted, (key, state.id))

    def request_for(self, state: JobState) -> Request:
        """One gang on few nodes: the job's own pods if the cluster manager fixed them
        (``Job.pod_gpus``: each pod whole on a node, as the allocator packs them), else
        whole-node pods plus the remainder, or with ``even_gangs`` the fewest nodes that split
        it into equal pods."""
        g, per_node, size = state.gpus, self.node_gpus, state.job.pod_gpus
        if size is not None:
            pods: tuple[PodSpec, ...] = (PodSpec(size, g // size),)
        elif g <= per_node:
            pods = (PodSpec(g),)
        elif self.even_gangs:
            nodes = next(k for k in range(2, g + 1) if g % k == 0 and g // k <= per_node)
            pods = (PodSpec(g // nodes, nodes),)
        else:
            pods = tuple(
                p for p in (PodSpec(per_node, g // per_node), PodSpec(g % per_node, 1)) if p.gpus
            )
        return Request(job=state.id, pods=pods, vc=state.job.tenant)

    def _start(self, state: JobState, now: float) -> bool:
        result = self.allocator.allocate(self.request_for(state))
        if result.outcome != "placed":
            return False
        self._dequeue(state)
        state.starts += 1
        self._run_on(state, result.by_node(), now)
        return True

    def _preempt(self, state: JobState, now: float) -> None:
        del self.running[state.id]
        self._set_running_key(state, None)
        self.allocator.release(state.id)
        state.stop(now)
        state.placement = {}
        state.status = Status.PENDING
        state.preemptions += 1
        self._enqueue(state, now)

    # -- cluster managers: restoring state, progress reports, decisions --------------------------
    def restore(
        self,
        job: Job,
        now: float,
        *,
        work_done: float = 0.0,
        guaranteed: DeadlineOption | None = None,
        placement: Mapping[str, Iterable[int]] | None = None,
    ) -> JobState:
        """Load a job a cluster manager already tracks: submitted, with ``work_done`` seconds of
        its estimated work behind it, optionally guaranteed ``guaranteed`` (one of its deadline
        options) and, if ``placement`` (node -> GPU indices) is given, running there since ``now``.

        The allocator must then hold exactly those GPUs (``reserve``); if it cannot, nothing is
        changed and ValueError says why. Like ``submit``, the job counts as arrived at the next
        ``select``, so the policy sees it (a guaranteed job keeps its guarantee)."""
        if self.in_round:
            raise _busy("Scheduler.restore")
        job = check_job(job, "Scheduler.restore")
        now = _time(now, "Scheduler.restore")
        if type(work_done) is not float or not 0.0 <= work_done <= MAX_SECONDS:
            work_done = number(work_done, f"job {show(job.id)}", "work_done")
        if guaranteed is not None and guaranteed not in job.deadlines:
            why = (
                f"guaranteed deadline {guaranteed.at} is not one of its options"
                if isinstance(guaranteed, DeadlineOption)
                else f"expected one of its DeadlineOptions, got {show(guaranteed)}"
            )
            options = ", ".join(f"{d.at:g}" for d in job.deadlines) or "none"
            raise ArgumentError(
                f"job {show(job.id)}", f"{why} (its deadlines: {options})", field="guaranteed"
            )
        if placement is not None:
            placement = _placement(placement, job.id)
        latest, report = self.latest_submit, self.latest_report
        state = self._take(job)
        if now > self.latest_report[0]:
            self.latest_report = (now, "restored", job.id)
        self._dequeue(state)
        state.guaranteed = state.was_guaranteed = guaranteed
        if placement is not None:
            result = self.allocator.reserve(self.request_for(state), placement)
            if result.outcome != "placed":
                del self.jobs[job.id], self.active[job.id]
                self._arrived.pop()
                self._taken -= 1
                self.latest_submit, self.latest_report = latest, report
                raise ArgumentError(f"job {show(job.id)}", result.reason, field="placement")
            state.starts = 1
            state.service = work_done + state.overhead
            self._run_on(state, result.by_node(), now)
        else:
            state.service = work_done
            self._enqueue(state, now)
        return state

    def report_progress(self, job_id: str, work_done: float, now: float) -> JobState:
        """Replace the scheduler's idea of an active job's progress with an observation:
        ``work_done`` seconds of its estimated work are behind it at ``now`` (restart overheads
        are the scheduler's own, added on top). Its key is refreshed at once."""
        state = self._active(job_id, "Scheduler.report_progress")
        work_done = number(work_done, f"job {show(job_id)}", "work_done")
        now = _time(now, "Scheduler.report_progress")
        if now > self.latest_report[0]:
            self.latest_report = (now, "reported on", job_id)
        state.service = work_done + state.starts * state.overhead
        if state.status is Status.RUNNING:
            state.run_since = now
            self._rekey_running(state, now)
        else:
            self._dequeue(state)
            self._enqueue(state, now)
        return state

    def run_began(self, job_id: str, at: float, now: float) -> JobState:
        """An active job's current run began at ``at`` (the cluster manager's record), later
        than the round that started it: its progress counts from then, not from the round."""
        state = self._active(job_id, "Scheduler.run_began")
        at, now = _time(at, "Scheduler.run_began", "at"), _time(now, "Scheduler.run_began")
        if now > self.latest_report[0]:
            self.latest_report = (now, "reported on", job_id)
        if state.status is Status.RUNNING and state.run_since is not None and at > state.run_since:
            state.run_since = min(at, now)
            self._rekey_running(state, now)
        return state

    def _rekey_running(self, state: JobState, now: float) -> None:
        self._set_running_key(state, self.policy.key(state, now))
        change = self.policy.key_worsens_at(state, now)
        if change is not None:
            heapq.heappush(self._key_changes, (change, state.seq, state.id, state.starts))

    def reestimate(
        self, job_id: str, estimate: float, now: float, uncertainty: float = 0.0
    ) -> JobState:
        """Replace an active job's estimated total work and its relative uncertainty (online
        re-estimation from observed progress); its key is refreshed at once, and a lease planner
        re-plans it next round. A job's first re-estimate also teaches ``estimate_errors`` how far
        off first estimates are, which pads the plans of jobs not observed yet."""
        state = self._active(job_id, "Scheduler.reestimate")
        estimate, uncertainty = _estimate(estimate, uncertainty, job_id)
        now = _time(now, "Scheduler.reestimate")
        if now > self.latest_report[0]:
            self.latest_report = (now, "re-estimated", job_id)
        if not state.observed:
            self.estimate_errors.record(state.estimate, estimate)
            state.observed = True
        state.estimate = estimate
        state.uncertainty = uncertainty
        self._rekey([job_id], now)
        return state

    def _run_on(
        self, state: JobState, placement: Mapping[str, tuple[int, ...]], now: float
    ) -> None:
        """Mark a job running on GPUs the allocator already holds for it (``_start``'s bookkeeping
        after placement, without counting a new start)."""
        state.placement = placement
        state.speed = self.speed(state.job, placement) if self.speed else 1.0
        state.status = Status.RUNNING
        state.run_since = now
        if state.first_start is None:
            state.first_start = now
        self.running[state.id] = state
        self._rekey_running(state, now)

    def firm_estimate(
        self, job_id: str, estimate: float, now: float, uncertainty: float = 0.0
    ) -> JobState:
        """A job submitted without a runtime (``known`` False, ranked by a placeholder) was
        measured: give it its first real estimate. Not a sample of estimate error (the
        placeholder was no estimate), and the job is offered admission at the next round, as
        if it had just arrived (``chronus_py.estimates.in_place``)."""
        state = self._active(job_id, "Scheduler.firm_estimate")
        estimate, uncertainty = _estimate(estimate, uncertainty, job_id)
        now = _time(now, "Scheduler.firm_estimate")
        if now > self.latest_report[0]:
            self.latest_report = (now, "re-estimated", job_id)
        state.estimate = estimate
        state.uncertainty = uncertainty
        state.known = True
        self._rekey([job_id], now)
        self._arrived.append(state)
        return state

    def _active(self, job_id: str, source: str) -> JobState:
        state = self.active.get(job_id)
        if state is None or self.in_round:
            raise self._not_held(job_id, source)
        return state

    def _not_held(self, job_id: str, source: str) -> ArgumentError | JobIdError:
        """Why ``job_id`` is not a job ``source`` can act on: never submitted, ended, or (for
        ``finish``, which needs a running job) pending; or no call is taken now."""
        if self.in_round:
            return _busy(source)
        state = self.jobs.get(job_id) if isinstance(job_id, str) else None
        if state is None:
            why = f"{show(job_id)} was never submitted"
        elif state.status is Status.FINISHED:
            why = f"{show(job_id)} already ended (at {state.finish:g})"
        else:
            why = f"{show(job_id)} is pending, not running (withdraw() ends a job that waits)"
        return JobIdError(source, why, field="job_id")


def _busy(source: str) -> ArgumentError:
    return ArgumentError(
        source,
        "called while a round of this scheduler runs (from another thread?): a Scheduler takes "
        "one call at a time, so hold a lock around every call",
    )


def _time(value: float, source: str, field: str = "now") -> float:
    """A time argument: a finite number (absolute seconds), as a float."""
    if type(value) is float and -MAX_SECONDS <= value <= MAX_SECONDS:
        return value
    return number(value, source, field, minimum=None)


def _estimate(estimate: float, uncertainty: float, job_id: str) -> tuple[float, float]:
    where = f"job {show(job_id)}"
    return number(estimate, where, "estimate"), number(uncertainty, where, "uncertainty")


def _placement(placement: Mapping[str, Iterable[int]], job_id: str) -> dict[str, tuple[int, ...]]:
    """A placement argument (node name -> GPU indices) as the allocator takes it: names
    strings, indices ints (a numpy index as the int it is); what it holds is the allocator's
    to judge (a ValueError naming the node or GPU)."""
    where = f"job {show(job_id)}"
    if not isinstance(placement, Mapping):
        raise ArgumentError(
            where,
            f"expected a mapping of node -> GPU indices, got {show(placement)}",
            field="placement",
        )
    out = {}
    for node, gpus in placement.items():
        if not isinstance(node, str):
            raise ArgumentError(where, f"expected a node name, got {show(node)}", field="placement")
        if isinstance(gpus, (str, bytes)) or not isinstance(gpus, Iterable):
            raise ArgumentError(
                where,
                f"expected a list of GPU indices, got {show(gpus)}",
                field=f"placement[{node!r}]",
            )
        out[node] = tuple(integer(g, where, f"placement[{node!r}]", minimum=0) for g in gpus)
    return out


def merge_walk(
    running: list[tuple[tuple, str]],
    gpus: list[int],
    pending: list[tuple[tuple, str]],
    gpus_of: Callable[[str], int],
    budget: int,
    smallest: int,
    backfill: bool,
) -> tuple[set[str], list[tuple[tuple, str]]]:
    """The placement walk (:meth:`Scheduler._walk`): the ``running`` jobs (``(key, id)`` in key
    order, holding ``gpus`` each) merged in key order with the ``pending`` ones (``gpus_of``
    each), giving ``budget`` GPUs to every job that fits (to later ones only if ``backfill``)
    until fewer than ``smallest`` (the fewest any of them needs) are left. Returns the running
    jobs left without GPUs, and the pending jobs that get them (``(key, id)``, in order).

    Running jobs with no pending one between them are taken at once, as many in a row as fit in
    what is left: each fits in turn, since what is left before it covers it and every one after
    it in that row. Under churn (issue 27) the walk went job by job through some 1,000 running
    and pending jobs a round to find the few that move; it now visits one by one only the pending
    jobs it reaches and the running jobs that do not fit."""
    held = list(accumulate(gpus, initial=0))  # GPUs of the running jobs before each
    dropped: set[str] = set()
    chosen: list[tuple[tuple, str]] = []
    i = j = 0
    while i < len(running) or j < len(pending):
        if budget < smallest:
            break
        if j == len(pending) or (i < len(running) and running[i] < pending[j]):
            end = len(running) if j == len(pending) else bisect.bisect_left(running, pending[j], i)
            fit = bisect.bisect_right(held, budget + held[i], i, end + 1) - 1  # i..fit-1 fit
            if fit > i:
                budget -= held[fit] - held[i]
                i = fit
            elif backfill:
                dropped.add(running[i][1])
                i += 1
            else:
                break
            continue
        g = gpus_of(pending[j][1])
        if g <= budget:
            budget -= g
            chosen.append(pending[j])
        elif not backfill:
            break
        j += 1
    dropped.update(job_id for _, job_id in running[i:])  # never reached: no GPUs left for them
    return dropped, chosen
