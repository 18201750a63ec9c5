"""The one replay loop: true work, completions and arrivals on one clock, driving a stage.

The loop plays the cluster manager for any trace and policy. The stage is the rigid
:class:`~chronus_py.scheduler.Scheduler` for a policy that orders a queue, the
:class:`~chronus_py.engine.elastic.ElasticScheduler` for one that names every job's size; both
take ``submit``, ``finish``, ``next_wakeup`` and a round (``select``, ``place`` ->
:class:`~chronus_py.scheduler.Moves`: started, preempted, resized). The loop knows each job's
true work (the trace duration unless a ``truth`` function says otherwise; an elastic job's
iterations) and the placement slowdown; the stage sees only estimates and observed service.

Each instant is the earliest of the next arrival group, the next completion and the next
wake-up (the stage's, the profiling pool's, a re-estimate). Same-instant order is fixed:
completions free GPUs first (in submission order), then every arrival of the instant is
submitted (or sent to the profiling pool first), then one decision is taken, and each run it
started or resized gets its completion on the clock, stamped with the run segment
(``JobState.segment``) so a later move makes it stale. An elastic job also counts as done
within a tolerance of its work (``ElasticScheduler.due``). When estimates can be wrong (rigid
policies), the loop re-estimates every ``reestimate_every`` seconds: a job that has run for
``observe`` seconds reports its iteration rate, which with its known iteration count gives its
true work, and the scheduler gets that figure.
"""

from __future__ import annotations

import gc
import math
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterator, Sequence

from chronus_py.engine.clock import Clock, Tolerance
from chronus_py.engine.elastic import ElasticScheduler
from chronus_py.engine.profiling import ProfilingPool
from chronus_py.errors import InputError
from chronus_py.estimates import Estimator, Oracle
from chronus_py.jobs.model import Cluster, Job
from chronus_py.jobs.overhead import Overhead, default_overhead, make_overhead, per_start
from chronus_py.jobs.state import JobState, Status
from chronus_py.policies.base import ElasticPolicy, Policy
from chronus_py.round import advance
from chronus_py.scheduler import Scheduler, SpeedModel
from placement import Allocator

if TYPE_CHECKING:
    from chronus_py.estimates.in_place import InPlaceEstimation

Progress = Callable[[int, int], None]

NO_ESTIMATES = (
    "an elastic job's work is iterations on its throughput curve, while the estimate stages "
    "give seconds at its requested size (a size its curve may not hold), and the elastic stage "
    "cannot correct a wrong figure while the job runs, so they are not converted"
)
"""Why an elastic replay refuses the estimate stages (issue 25, session 12). Converting an
estimate through the curve (seconds at the requested size times that size's rate) needs the
requested size on the curve, the elastic stage to plan on the converted figure
(``JobState.estimate``) while the loop runs the trace's iterations, and a re-estimate once the
job has run, as the rigid ``Scheduler.reestimate`` does; the completion tolerance
(``Tolerance.done``) would also have to count against the true work. Not done: refused."""


@dataclass
class ReplayResult:
    """Every job's record after a replay, its CPU seconds and instants (``events``); an elastic
    replay (``elastic`` True) also counts the sizes the allocator could not place, and its summary
    reports all three."""

    jobs: tuple[JobState, ...]
    cluster: Cluster
    policy: str
    wall_seconds: float
    elastic: bool = False
    cpu_seconds: float | None = None
    events: int = 0
    placement_failures: int = 0


YOUNG_PASS = 50_000
"""Allocations between two passes of the cyclic collector over young objects in a replay and in
``chronus serve`` (Python's default: 700)."""


@contextmanager
def _paced_collector() -> Iterator[None]:
    """The cyclic collector run seldom while a replay runs, the process's thresholds restored
    after. A replay allocates millions of short-lived tuples (keys, plans) and almost no
    cycles, and at the default pace the collector went over the live jobs and plans 1,670
    times: 3.0 of 44.9 CPU s on Philly MIX2 (issue 27, session 14)."""
    thresholds = gc.get_threshold()
    gc.set_threshold(YOUNG_PASS, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


@_paced_collector()
def replay(
    jobs: Sequence[Job],
    cluster: Cluster,
    policy: Policy | ElasticPolicy,
    *,
    allocator: Allocator | None = None,
    estimator: Estimator | None = None,
    truth: Estimator | None = None,
    speed: SpeedModel | None = None,
    profiling: ProfilingPool | None = None,
    reestimate_every: float | None = None,
    observe: float = 300.0,
    round_requests: bool = False,
    estimation: InPlaceEstimation | None = None,
    overhead: str | Overhead | None = None,
    on_progress: Progress | None = None,
) -> ReplayResult:
    """Replay ``jobs`` (any order) on ``cluster`` under ``policy`` until every job has finished.
    ``truth`` gives each job's true work (default: its trace duration), ``estimator`` what the
    scheduler is told (default: the truth's oracle; the profiling pool when there is one);
    ``estimation``: jobs arrive with no runtime and are measured in place (its docstring);
    ``overhead``: the overhead model or its name (``chronus_py.jobs.overhead``; default
    chronus-restart, pause for an elastic policy): a rigid policy's jobs get each start's
    seconds added to their work, an elastic policy's jobs pause.

    An elastic policy (``policy.elastic``: it names every job's size instead of ordering a queue)
    runs on :class:`~chronus_py.engine.elastic.ElasticScheduler` in the same loop. It takes none
    of the estimate stages (``estimator``, ``truth``, ``speed``, ``profiling``,
    ``reestimate_every``, ``round_requests``, ``estimation``): :data:`NO_ESTIMATES` says why."""
    started_at, cpu = time.perf_counter(), time.process_time()
    elastic = policy.elastic
    model = _overhead_model(overhead, elastic)
    ordered = sorted(jobs, key=lambda j: j.submit)
    total = cluster.gpus  # a sum over the nodes: once, not per job (issue 27)
    for job in ordered:
        if job.min_size > total:
            raise InputError(f"job {job.id}", f"needs {job.min_size} GPUs, the cluster has {total}")
    stage: Scheduler | ElasticScheduler
    if elastic:
        _refuse_estimates(
            policy,
            estimator=estimator,
            truth=truth,
            speed=speed,
            profiling=profiling,
            reestimate_every=reestimate_every,
            round_requests=round_requests,
            estimation=estimation,
        )
        stage = ElasticScheduler(cluster, policy, overhead=model, allocator=allocator)
        work = {job.id: job.work for job in ordered}
    else:
        stage = Scheduler(
            cluster,
            policy,
            allocator=allocator,
            estimator=profiling or estimation or estimator,
            overhead=per_start(model, cluster.gpus),
            speed=speed,
            round_requests=round_requests,
        )
        truth = truth or Oracle()
        work = {job.id: truth.estimate(job) for job in ordered}
    clock = Clock(ordered, policy.arrival_window)
    tolerance = Tolerance(policy.done_tolerance)

    def live(job_id: str, run: int) -> bool:
        state = stage.running.get(job_id)
        return state is not None and state.segment == run

    def due(job_id: str, run: int, now: float) -> bool:
        """A completion held for a little later that counts as done now (True too for a
        stale one, which is then dropped)."""
        return not live(job_id, run) or tolerance.done(stage.running[job_id], now)

    profiled: list[JobState] = []
    unsure: set[str] = set()
    next_check = math.inf
    finished = 0
    events = 0
    idle = 0  # wake-ups in a row on an idle cluster with nothing left to come and nothing started
    now = 0.0
    while True:
        wakeups = [
            t
            for t in (
                stage.next_wakeup(now),
                next_check,
                profiling.next_time() if profiling else None,
                estimation.next_time() if estimation else None,
            )
            if t is not None
        ]
        now = clock.next_time(min(wakeups, default=None), live)
        if now == math.inf:
            break
        events += 1
        popped = clock.pop_completions(now, tolerance.within, due)
        done = {job_id: stage.running[job_id] for job_id, run in popped if live(job_id, run)}
        for state in sorted(done.values(), key=lambda s: s.seq):
            stage.finish(state.id, now)
            finished += 1
        for job in clock.pop_arrivals(now):
            if profiling:
                profiling.arrive(job, work[job.id])
            elif estimation:
                estimation.arrive(stage.submit(job), work[job.id])
            else:
                unsure.add(stage.submit(job).id)
        for job, start, done_in_pool, end in profiling.pop(now) if profiling else ():
            if done_in_pool:
                profiled.append(_finished_in_pool(job, start, end, work[job.id]))
                finished += 1
            else:
                unsure.add(stage.submit(job).id)
        unsure = {i for i in unsure if stage.jobs[i].estimate != work[i]}
        if now >= next_check:
            unsure = _reestimate(stage, unsure, work, now, observe)
            next_check = math.inf
        if reestimate_every and unsure and next_check == math.inf:
            next_check = now + reestimate_every
        if estimation:
            estimation.update(stage, now)
        decided = advance(stage, now)
        for state in decided.started + decided.resized:
            target = work[state.id] + state.starts * state.overhead
            clock.add_completion(state.completes_at(target), state.id, state.segment)
            tolerance.widen(state, now)
            if estimation:
                estimation.started(state, now)
        if on_progress and (decided.started or decided.preempted or decided.resized):
            on_progress(finished, len(ordered))
        if decided.started or decided.resized or stage.running or not clock.quiet():
            idle = 0
        elif not (next_check < math.inf or _pending(profiling) or _pending(estimation)):
            idle += 1
            if idle >= STUCK_WAKEUPS and _unfinished(stage):
                break
    stuck = _unfinished(stage)
    if stuck:
        first = stage.jobs[stuck[0]]
        others = f" (nor {len(stuck) - 1} other job(s))" if len(stuck) > 1 else ""
        if allocator is None:
            raise InputError(f"job {first.id}", f"could never be placed on this cluster{others}")
        raise InputError(
            f"job {first.id}",
            f"needs {first.job.min_size} GPUs, which virtual cluster {first.job.tenant!r} can "
            f"never place{others}: give its tenant another one with --tenant-map",
        )
    return ReplayResult(
        jobs=tuple(stage.jobs.values()) + tuple(profiled),
        cluster=cluster,
        policy=policy.name,
        wall_seconds=time.perf_counter() - started_at,
        elastic=elastic,
        cpu_seconds=time.process_time() - cpu,
        events=events,
        placement_failures=stage.placement_failures if elastic else 0,
    )


STUCK_WAKEUPS = 3
"""Wake-ups in a row (lease boundaries, say) at which nothing runs, nothing is left to arrive or
complete, and a round starts nothing, before the jobs left are said never to fit: a round on an
idle cluster starts whatever fits it (a policy waiting for a boundary starts it at the next),
so they never will. Without this a policy that wakes at every lease boundary, as Chronus
does, went on waking for ever (a job wider than its HiveD virtual cluster)."""


def _pending(stage: ProfilingPool | InPlaceEstimation | None) -> bool:
    """Whether an estimate stage (the profiling pool, in-place measurement) has work to come."""
    return stage is not None and stage.next_time() < math.inf


def _unfinished(stage: Scheduler | ElasticScheduler) -> list[str]:
    """Jobs neither finished nor dropped, in submission order."""
    return [s.id for s in stage.jobs.values() if s.status is not Status.FINISHED and not s.dropped]


def _overhead_model(overhead: str | Overhead | None, elastic: bool) -> Overhead:
    if overhead is not None and not isinstance(overhead, str):
        return overhead
    try:
        return make_overhead(overhead or default_overhead(elastic))
    except ValueError as exc:
        raise InputError("--overhead", str(exc)) from None


def _refuse_estimates(policy: ElasticPolicy, **stages) -> None:
    given = [name for name, value in stages.items() if value]
    if given:
        raise InputError(policy.name, f"{given[0]}: {NO_ESTIMATES}")


def _finished_in_pool(job: Job, start: float, end: float, work: float) -> JobState:
    """A job whose work ended inside its profiling window: it never met the scheduler."""
    return JobState(
        job=job,
        seq=-1,
        estimate=work,
        overhead=0.0,
        status=Status.FINISHED,
        service=work,
        wall=end - start,
        starts=1,
        first_start=start,
        finish=end,
    )


def _reestimate(
    scheduler: Scheduler, unsure: set[str], work: dict[str, float], now: float, observe: float
) -> set[str]:
    """Give every job observed long enough its true work; return the jobs still unobserved."""
    left = set()
    for job_id in sorted(unsure, key=lambda i: scheduler.jobs[i].seq):
        state = scheduler.jobs[job_id]
        if state.status is Status.FINISHED:
            continue
        if state.service_at(now) >= observe:
            scheduler.reestimate(job_id, work[job_id], now)
        else:
            left.add(job_id)
    return left
