"""The replay world: true work, restart overheads and completions, driving a Scheduler.

The engine plays the cluster manager. It knows each job's true work (the trace duration unless a
``truth`` function says otherwise) and the placement slowdown; the scheduler sees only estimates
and observed service. Same-instant order is fixed: completions free GPUs first, then every
arrival at that instant is submitted (or sent to the profiling pool first), then one decision is
taken. When estimates can be wrong, the engine re-estimates every ``reestimate_every`` seconds:
a job that has run for ``observe`` seconds reports its iteration rate, which with its known
iteration count gives its true work, and the scheduler gets that figure.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

from chronus_py.engine.clock import Clock
from chronus_py.engine.elastic import ElasticEngine, ElasticPolicy
from chronus_py.engine.profiling import ProfilingPool
from chronus_py.errors import InputError
from chronus_py.estimates import Estimator, Oracle
from chronus_py.jobs.model import Cluster, Job
from chronus_py.jobs.overhead import Overhead, default_overhead, make_overhead, per_start
from chronus_py.jobs.state import JobState, Status
from chronus_py.policies.base import Policy
from chronus_py.round import advance
from chronus_py.scheduler import Scheduler, SpeedModel
from placement import Allocator, ConsolidatedAllocator

if TYPE_CHECKING:
    from chronus_py.estimates.in_place import InPlaceEstimation

Progress = Callable[[int, int], None]


@dataclass
class ReplayResult:
    """Every job's record after a replay. An elastic replay also counts its CPU seconds, events
    and the sizes the allocator could not place (``elastic`` True)."""

    jobs: tuple[JobState, ...]
    cluster: Cluster
    policy: str
    wall_seconds: float
    elastic: bool = False
    cpu_seconds: float | None = None
    events: int = 0
    placement_failures: int = 0


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
    runs on the elastic event loop (``chronus_py.engine.elastic``), which shares the job, its
    state and progress model, the overhead models and the result, but not yet the estimate
    stages: with one, ``profiling``, ``estimation``, ``truth``, ``speed`` and the rest are
    refused."""
    started_at = time.perf_counter()
    if overhead is None or isinstance(overhead, str):
        try:
            model = make_overhead(overhead or default_overhead(_elastic(policy)))
        except ValueError as exc:
            raise InputError("--overhead", str(exc)) from None
    else:
        model = overhead
    if _elastic(policy):
        given = [
            name
            for name, value in (
                ("estimator", estimator),
                ("truth", truth),
                ("speed", speed),
                ("profiling", profiling),
                ("reestimate_every", reestimate_every),
                ("round_requests", round_requests),
                ("estimation", estimation),
            )
            if value
        ]
        if given:
            raise InputError(policy.name, f"an elastic policy does not take {given[0]} yet")
        return _replay_elastic(jobs, cluster, policy, allocator, model, on_progress, started_at)
    ordered = sorted(jobs, key=lambda j: j.submit)
    widest = max(n.gpus for n in cluster.nodes) * len(cluster.nodes)
    for job in ordered:
        if job.gpus > cluster.gpus or job.gpus > widest:
            raise InputError(job.id, f"needs {job.gpus} GPUs, the cluster has {cluster.gpus}")
    per_start_work = per_start(model, cluster.gpus)
    scheduler = Scheduler(
        cluster,
        policy,
        allocator=allocator,
        estimator=profiling or estimation or estimator,
        overhead=per_start_work,
        speed=speed,
        round_requests=round_requests,
    )
    truth = truth or Oracle()
    work = {job.id: truth.estimate(job) for job in ordered}
    clock = Clock(ordered)
    profiled: list[JobState] = []
    unsure: set[str] = set()
    next_check = math.inf
    finished = 0
    now = 0.0
    while True:
        wakeups = [
            t
            for t in (
                scheduler.next_wakeup(now),
                next_check,
                profiling.next_time() if profiling else None,
                estimation.next_time() if estimation else None,
            )
            if t is not None
        ]
        now = clock.next_time(min(wakeups, default=None))
        if now == math.inf:
            break
        for job_id, run in clock.pop_completions(now):
            state = scheduler.running.get(job_id)
            if state is not None and state.starts == run:
                scheduler.finish(job_id, now)
                finished += 1
        for job in clock.pop_arrivals(now):
            if profiling:
                profiling.arrive(job, work[job.id])
            elif estimation:
                estimation.arrive(scheduler.submit(job), work[job.id])
            else:
                unsure.add(scheduler.submit(job).id)
        for job, start, done, end in profiling.pop(now) if profiling else ():
            if done:
                profiled.append(_finished_in_pool(job, start, end, work[job.id]))
                finished += 1
            else:
                unsure.add(scheduler.submit(job).id)
        unsure = {i for i in unsure if scheduler.jobs[i].estimate != work[i]}
        if now >= next_check:
            unsure = _reestimate(scheduler, unsure, work, now, observe)
            next_check = math.inf
        if reestimate_every and unsure and next_check == math.inf:
            next_check = now + reestimate_every
        if estimation:
            estimation.update(scheduler, now)
        decided = advance(scheduler, now)
        for state in decided.started:
            left = work[state.id] + state.starts * state.overhead - state.service
            clock.add_completion(now + max(left, 0.0) / state.speed, state.id, state.starts)
            if estimation:
                estimation.started(state, now)
        if on_progress and (decided.started or decided.preempted):
            on_progress(finished, len(ordered))
    stuck = [s.id for s in scheduler.jobs.values() if s.status is not Status.FINISHED]
    if stuck:
        raise InputError(stuck[0], f"{len(stuck)} job(s) could never be placed on this cluster")
    return ReplayResult(
        jobs=tuple(scheduler.jobs.values()) + tuple(profiled),
        cluster=cluster,
        policy=policy.name,
        wall_seconds=time.perf_counter() - started_at,
    )


def _elastic(policy: Policy | ElasticPolicy) -> bool:
    return getattr(policy, "elastic", False)


def _replay_elastic(
    jobs: Sequence[Job],
    cluster: Cluster,
    policy: ElasticPolicy,
    allocator: Allocator | None,
    model: Overhead,
    on_progress: Progress | None,
    started_at: float,
) -> ReplayResult:
    cpu = time.process_time()
    allocator = allocator or ConsolidatedAllocator((n.name, n.gpus) for n in cluster.nodes)
    engine = ElasticEngine(jobs, allocator, cluster, policy, model)
    states = engine.run(on_progress=on_progress)
    return ReplayResult(
        jobs=tuple(states),
        cluster=cluster,
        policy=policy.name,
        wall_seconds=time.perf_counter() - started_at,
        elastic=True,
        cpu_seconds=time.process_time() - cpu,
        events=engine.events,
        placement_failures=engine.placement_failures,
    )


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
