"""Small elastic jobs and a replay on a tiny cluster, for hand-computed cases."""

from __future__ import annotations

from chronus_py.elastic.engine import ElasticEngine, ElasticResult
from chronus_py.elastic.jobs import ElasticJob
from chronus_py.elastic.overhead import ResizeOverhead
from chronus_py.elastic.run import Run
from chronus_py.model import Cluster
from placement import ConsolidatedAllocator


def job(
    id: str,
    submit: float,
    deadline: float,
    iterations: float,
    sizes=(1, 2, 4),
    rates=(1.0, 2.0, 4.0),
) -> ElasticJob:
    return ElasticJob(
        id=id,
        submit=submit,
        deadline=deadline,
        iterations=iterations,
        model="m",
        batch=64,
        requested=sizes[-1],
        sizes=tuple(sizes),
        rates=tuple(rates),
    )


def replay(jobs, policy, nodes=1, per_node=4, allocator=None, overhead=None) -> ElasticResult:
    cluster = Cluster.uniform(nodes, per_node)
    alloc = allocator or ConsolidatedAllocator([(n.name, n.gpus) for n in cluster.nodes])
    engine = ElasticEngine(
        list(jobs), alloc, cluster.gpus, per_node, policy, overhead or ResizeOverhead()
    )
    return engine.run()


def by_id(result: ElasticResult) -> dict[str, Run]:
    return {r.id: r for r in result.runs}
