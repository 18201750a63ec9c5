"""Small elastic jobs and a replay on a tiny cluster, for hand-computed cases."""

from __future__ import annotations

from chronus_py.engine import ReplayResult
from chronus_py.engine import replay as replay_jobs
from chronus_py.jobs.model import Cluster, DeadlineOption, Job, JobKind
from chronus_py.jobs.state import JobState


def job(
    id: str,
    submit: float,
    deadline: float,
    iterations: float,
    sizes=(1, 2, 4),
    rates=(1.0, 2.0, 4.0),
) -> Job:
    return Job(
        id=id,
        tenant="default",
        gpus=sizes[-1],
        submit=submit,
        kind=JobKind.STRICT_SLO,
        deadlines=(DeadlineOption(deadline, 1.0),),
        duration=iterations / rates[-1],
        iterations=iterations,
        model="m",
        batch=64,
        sizes=tuple(sizes),
        rates=tuple(rates),
    )


def replay(jobs, policy, nodes=1, per_node=4, allocator=None, overhead=None) -> ReplayResult:
    """Through the one replay entry point, as ``chronus replay --elastic`` runs it."""
    return replay_jobs(
        list(jobs), Cluster.uniform(nodes, per_node), policy, allocator=allocator, overhead=overhead
    )


def by_id(result: ReplayResult) -> dict[str, JobState]:
    return {r.id: r for r in result.jobs}
