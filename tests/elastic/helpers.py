"""Small elastic jobs and a replay on a tiny cluster, for hand-computed cases."""

from __future__ import annotations

from chronus_py.elastic.engine import ElasticEngine, ElasticResult
from chronus_py.model import Cluster, DeadlineOption, Job, JobKind
from chronus_py.overhead import PauseOverhead
from chronus_py.state import JobState
from placement import ConsolidatedAllocator


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


def replay(jobs, policy, nodes=1, per_node=4, allocator=None, overhead=None) -> ElasticResult:
    cluster = Cluster.uniform(nodes, per_node)
    alloc = allocator or ConsolidatedAllocator([(n.name, n.gpus) for n in cluster.nodes])
    engine = ElasticEngine(
        list(jobs), alloc, cluster.gpus, per_node, policy, overhead or PauseOverhead()
    )
    return engine.run()


def by_id(result: ElasticResult) -> dict[str, JobState]:
    return {r.id: r for r in result.runs}
