"""Engine invariants on random traces, for every policy, checked from the outside."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from chronus_py.engine import replay, summarize
from chronus_py.jobs.model import Cluster, DeadlineOption, Job, JobKind
from chronus_py.jobs.overhead import restart_overhead
from chronus_py.policies import EDF, FIFO, LAS, SRTF
from placement import ConsolidatedAllocator

jobs_strategy = st.lists(
    st.tuples(
        st.integers(0, 2000),
        st.integers(1, 900),
        st.sampled_from([1, 1, 2, 4, 8, 16]),
        st.one_of(st.none(), st.integers(0, 3000)),
    ),
    min_size=1,
    max_size=25,
)


class CheckedAllocator(ConsolidatedAllocator):
    """Asserts that no GPU is ever held twice and usage never exceeds capacity."""

    def allocate(self, request):
        result = super().allocate(request)
        held = [(p.node, g) for pods in self._jobs.values() for p in pods for g in p.gpus]
        assert len(held) == len(set(held)) <= sum(self._size.values())
        return result


def build(rows):
    return [
        Job(
            id=str(i),
            tenant="t",
            gpus=g,
            submit=float(s),
            kind=JobKind.BEST_EFFORT if d is None else JobKind.STRICT_SLO,
            deadlines=() if d is None else (DeadlineOption(float(s + d), 1.0),),
            duration=float(w),
        )
        for i, (s, w, g, d) in enumerate(rows)
    ]


@settings(max_examples=40, deadline=None)
@given(jobs_strategy, st.sampled_from([FIFO, SRTF, EDF, LAS]))
def test_invariants(rows, policy_cls):
    jobs = build(rows)
    cluster = Cluster.uniform(2, 8)
    allocator = CheckedAllocator((n.name, n.gpus) for n in cluster.nodes)
    result = replay(jobs, cluster, policy_cls(), allocator=allocator)
    assert sorted(s.id for s in result.jobs) == sorted(j.id for j in jobs)
    for s in result.jobs:
        assert s.first_start >= s.job.submit
        assert s.finish >= s.first_start
        assert s.starts == s.preemptions + 1
        needed = s.job.duration + s.starts * restart_overhead(s.gpus)
        assert math.isclose(s.wall, needed, abs_tol=1e-6)
        assert math.isclose(s.service, needed, abs_tol=1e-6)
    busy = sum(s.gpus * s.wall for s in result.jobs)
    work = sum(s.gpus * (s.job.duration + s.starts * restart_overhead(s.gpus)) for s in result.jobs)
    assert math.isclose(busy, work, rel_tol=1e-9)
    metrics = summarize(result, trace="t", dropped={})
    assert 0 < metrics["gpu_utilization"] <= 1 + 1e-9


def test_deterministic():
    jobs = build([(i * 7 % 50, 100 + i * 13 % 400, [1, 2, 4, 8][i % 4], None) for i in range(60)])
    runs = [
        [(s.id, s.finish, s.preemptions) for s in replay(jobs, Cluster.uniform(2, 8), SRTF()).jobs]
        for _ in range(2)
    ]
    assert runs[0] == runs[1]
