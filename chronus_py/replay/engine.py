"""The replay world: true work, restart overheads and completions, driving a Scheduler.

The engine plays the cluster manager. It knows each job's true work (the trace duration unless a
``truth`` function says otherwise) and the placement slowdown; the scheduler sees only estimates
and observed service. Same-instant order is fixed: completions free GPUs first, then every
arrival at that instant is submitted, then one decision is taken.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Sequence

from chronus_py.errors import InputError
from chronus_py.model import Cluster, Job
from chronus_py.policies.base import Policy
from chronus_py.replay.clock import Clock
from chronus_py.scheduler import Estimator, Scheduler, SpeedModel, oracle_estimate
from chronus_py.state import JobState, Status
from placement import Allocator

Progress = Callable[[int, int], None]


@dataclass
class ReplayResult:
    jobs: tuple[JobState, ...]
    cluster: Cluster
    policy: str
    wall_seconds: float
    guaranteed_ids: frozenset[str] = frozenset()


def replay(jobs: Sequence[Job], cluster: Cluster, policy: Policy, *,
           allocator: Allocator | None = None, estimator: Estimator = oracle_estimate,
           truth: Callable[[Job], float] = oracle_estimate, speed: SpeedModel | None = None,
           on_progress: Progress | None = None) -> ReplayResult:
    """Replay ``jobs`` (any order) on ``cluster`` under ``policy`` until every job has finished."""
    started_at = time.perf_counter()
    ordered = sorted(jobs, key=lambda j: j.submit)
    widest = max(n.gpus for n in cluster.nodes) * len(cluster.nodes)
    for job in ordered:
        if job.gpus > cluster.gpus or job.gpus > widest:
            raise InputError(job.id, f"needs {job.gpus} GPUs, the cluster has {cluster.gpus}")
    scheduler = Scheduler(cluster, policy, allocator=allocator, estimator=estimator, speed=speed)
    work = {job.id: truth(job) for job in ordered}
    clock = Clock(ordered)
    finished = 0
    now = 0.0
    while True:
        now = clock.next_time(scheduler.next_wakeup(now))
        if now == math.inf:
            break
        for job_id, run in clock.pop_completions(now):
            state = scheduler.running.get(job_id)
            if state is not None and state.starts == run:
                scheduler.finish(job_id, now)
                finished += 1
        for job in clock.pop_arrivals(now):
            scheduler.submit(job)
        decided = scheduler.plan(now)
        for state in decided.started:
            left = work[state.id] + state.starts * state.overhead - state.service
            clock.add_completion(now + max(left, 0.0) / state.speed, state.id, state.starts)
        if on_progress and (decided.started or decided.preempted):
            on_progress(finished, len(ordered))
    stuck = [s.id for s in scheduler.jobs.values() if s.status is not Status.FINISHED]
    if stuck:
        raise InputError(stuck[0], f"{len(stuck)} job(s) could never be placed on this cluster")
    return ReplayResult(
        jobs=tuple(scheduler.jobs.values()), cluster=cluster, policy=policy.name,
        wall_seconds=time.perf_counter() - started_at,
        guaranteed_ids=frozenset(s.id for s in scheduler.jobs.values() if s.was_guaranteed),
    )
