"""Small builders and a minimal event loop for the scheduling-core tests.

The loop plays the cluster manager as replay does (completions first, then arrivals, then one
round), but hands the scheduler to a check after every round, so invariants are asserted at every
decision point instead of only on the final result.
"""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

from chronus_py.jobs.model import Cluster, DeadlineOption, Job, JobKind
from chronus_py.jobs.state import Status
from chronus_py.policies import Chronus
from chronus_py.round import advance
from chronus_py.scheduler import Moves, Scheduler
from chronus_py.selector import ChronusSettings

Check = Callable[[Scheduler, Moves, float], None]


def job(
    id: str,
    *,
    gpus: int = 1,
    submit: float = 0.0,
    duration: float = 1000.0,
    deadlines: Iterable[tuple[float, float]] = (),
) -> Job:
    """A job; one deadline makes it strict, several soft, none best-effort."""
    options = tuple(DeadlineOption(float(at), float(value)) for at, value in deadlines)
    kind = (
        JobKind.BEST_EFFORT
        if not options
        else JobKind.STRICT_SLO
        if len(options) == 1
        else JobKind.SOFT_SLO
    )
    return Job(
        id=id,
        tenant="t",
        gpus=gpus,
        submit=float(submit),
        kind=kind,
        deadlines=options,
        duration=float(duration),
    )


def chronus(**settings) -> Chronus:
    """Chronus on the greedy backend (no search, so plans are exact and repeatable)."""
    return Chronus(ChronusSettings(backend="greedy", **settings))


def drive(
    jobs: Sequence[Job],
    cluster: Cluster,
    scheduler_or_policy,
    *,
    check: Check | None = None,
    max_rounds: int = 5000,
) -> Scheduler:
    """Run ``jobs`` to completion with exact estimates (each job's work is its duration), calling
    ``check`` after every round; fails if the rounds do not end within ``max_rounds``."""
    scheduler = (
        scheduler_or_policy
        if isinstance(scheduler_or_policy, Scheduler)
        else Scheduler(cluster, scheduler_or_policy)
    )
    arrivals = sorted(jobs, key=lambda j: j.submit)
    ends: dict[str, tuple[float, int]] = {}  # running job -> (completion time, run it belongs to)
    now, i = 0.0, 0
    for _ in range(max_rounds):
        times = [t for t, _ in ends.values()]
        if i < len(arrivals):
            times.append(arrivals[i].submit)
        wakeup = scheduler.next_wakeup(now)
        if wakeup is not None:
            assert wakeup > now, f"wake-up {wakeup} is not after the round at {now}"
            times.append(wakeup)
        if not times:
            break
        now = max(now, min(times))
        for job_id, (at, run) in sorted(ends.items()):
            if at <= now:
                del ends[job_id]
                if scheduler.jobs[job_id].starts == run and job_id in scheduler.running:
                    scheduler.finish(job_id, now)
        while i < len(arrivals) and arrivals[i].submit <= now:
            scheduler.submit(arrivals[i])
            i += 1
        moves = advance(scheduler, now)
        for state in moves.preempted:
            ends.pop(state.id, None)
        for state in moves.started:
            ends[state.id] = (now + state.remaining(now) / state.speed, state.starts)
        if check is not None:
            check(scheduler, moves, now)
    else:
        raise AssertionError(f"not finished after {max_rounds} rounds")
    unfinished = [s.id for s in scheduler.jobs.values() if s.status is not Status.FINISHED]
    assert not unfinished and len(scheduler.jobs) == len(jobs), f"never finished: {unfinished}"
    return scheduler
