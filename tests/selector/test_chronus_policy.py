"""The Chronus policy on tiny traces with hand-computed outcomes (lease 1200 s, 1 GPU; a 60 s
guard keeps the trigger arithmetic readable)."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from chronus_py.model import Cluster, DeadlineOption, Job, JobKind
from chronus_py.policies import Chronus
from chronus_py.replay import replay, summarize
from chronus_py.selector import LeaseSelector


def job(id, submit, duration, gpus=1, deadlines=()):
    kind = JobKind.BEST_EFFORT if not deadlines else (
        JobKind.SOFT_SLO if len(deadlines) > 1 else JobKind.STRICT_SLO)
    return Job(id=id, tenant="t", gpus=gpus, submit=submit, kind=kind, duration=duration,
               deadlines=tuple(DeadlineOption(at, v) for at, v in deadlines))


def test_guaranteed_job_yields_to_best_effort_until_its_laxity_runs_out():
    jobs = [job("A", 0, 10000), job("B", 0, 1000, deadlines=[(2400, 10)])]
    result = replay(jobs, Cluster.uniform(1, 1), Chronus(backend=None, guard=60.0))
    done = {s.id: s for s in result.jobs}
    # B is planned in lease 1 (latest slot); it turns must-run at 2400 - 1030 - 30 - 60 = 1280.
    assert done["B"].first_start == 1280 and done["B"].finish == 2310
    assert done["A"].finish == 2310 + 10000 + 2 * 30 - 1280
    metrics = summarize(result, trace="t", dropped={})
    assert metrics["guaranteed_jobs"] == 1 and metrics["guaranteed_miss_ratio"] == 0.0
    # With the default 2 h guard the trigger (2400 - 1060 - 7200) has long passed, but B still
    # waits for the lease its plan holds for it.
    done = {s.id: s for s in replay(jobs, Cluster.uniform(1, 1), Chronus(backend=None)).jobs}
    assert done["B"].first_start == 1200 and done["B"].finish == 2230


def test_unfit_job_is_not_guaranteed_but_still_runs():
    jobs = [job("B", 0, 1000, deadlines=[(1200, 10)]), job("C", 0, 1000, deadlines=[(1200, 10)])]
    result = replay(jobs, Cluster.uniform(1, 1), Chronus(backend=None, guard=60.0))
    done = {s.id: s for s in result.jobs}
    assert done["B"].was_guaranteed is not None and done["C"].was_guaranteed is None
    # C runs as spot until B's trigger (1200 - 1030 - 30 - 60 = 80), then resumes after B.
    assert done["B"].first_start == 80 and done["B"].finish == 80 + 1030
    assert done["C"].finish == 1110 + 1000 + 2 * 30 - 80


def test_soft_job_gets_its_best_fitting_option():
    jobs = [job("X", 0, 2000, deadlines=[(1200, 10), (3600, 8), (6000, 5)])]
    result = replay(jobs, Cluster.uniform(1, 1), Chronus(backend=None, guard=60.0))
    assert result.jobs[0].was_guaranteed == DeadlineOption(3600, 8)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4000), st.integers(60, 3000), st.sampled_from([1, 2, 4, 8]),
                          st.one_of(st.none(), st.floats(1.2, 4.0))), min_size=1, max_size=20))
def test_plan_never_exceeds_capacity_and_guarantees_hold(rows):
    jobs = [job(str(i), s, d, g, () if k is None else [(s + k * d, 10)]) for i, (s, d, g, k) in enumerate(rows)]
    policy = Chronus(backend=None, guard=60.0)
    original = LeaseSelector._book

    def checked(self, job_id, gpus, leases):
        original(self, job_id, gpus, leases)
        assert np.all(self._used <= self.capacity)

    LeaseSelector._book = checked
    try:
        result = replay(jobs, Cluster.uniform(1, 8), policy)
    finally:
        LeaseSelector._book = original
    for s in result.jobs:
        if s.was_guaranteed is not None and s.id not in policy.selector.stats.demoted:
            assert s.finish <= s.was_guaranteed.at + 1e-6


def test_guaranteed_job_running_ahead_of_its_plan_is_not_stopped_for_a_longer_job():
    # G is guaranteed for lease 7 (latest slot) but starts at once on the idle GPU. A longer
    # best-effort job arriving later does not stop it; a shorter one does (SRTF among spot jobs).
    g = job("G", 0, 1000, deadlines=[(9600, 10)])
    done = {s.id: s for s in replay([g, job("long", 100, 5000)], Cluster.uniform(1, 1), Chronus(backend=None, guard=60.0)).jobs}
    assert done["G"].was_guaranteed is not None and done["G"].first_start == 0
    assert done["G"].preemptions == 0 and done["long"].first_start == done["G"].finish == 1030
    done = {s.id: s for s in replay([g, job("short", 100, 100)], Cluster.uniform(1, 1), Chronus(backend=None, guard=60.0)).jobs}
    assert done["short"].first_start == 100 and done["G"].preemptions == 1
