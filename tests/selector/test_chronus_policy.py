"""The Chronus policy on tiny traces with hand-computed outcomes (lease 1200 s, 1 GPU; a 60 s
guard keeps the trigger arithmetic readable)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chronus_py.engine import replay, summarize
from chronus_py.jobs.model import Cluster, DeadlineOption, Job, JobKind
from chronus_py.jobs.state import JobState
from chronus_py.policies import Chronus
from chronus_py.selector import ChronusSettings, LeaseSelector


def job(id, submit, duration, gpus=1, deadlines=()):
    kind = (
        JobKind.BEST_EFFORT
        if not deadlines
        else (JobKind.SOFT_SLO if len(deadlines) > 1 else JobKind.STRICT_SLO)
    )
    return Job(
        id=id,
        tenant="t",
        gpus=gpus,
        submit=submit,
        kind=kind,
        duration=duration,
        deadlines=tuple(DeadlineOption(at, v) for at, v in deadlines),
    )


def test_guaranteed_job_yields_to_best_effort_until_its_laxity_runs_out():
    jobs = [job("A", 0, 10000), job("B", 0, 1000, deadlines=[(2400, 10)])]
    result = replay(
        jobs, Cluster.uniform(1, 1), Chronus(ChronusSettings(backend="greedy", guard=60.0))
    )
    done = {s.id: s for s in result.jobs}
    # B is planned in lease 1 (latest slot); it turns must-run at 2400 - 1030 - 30 - 60 = 1280.
    assert done["B"].first_start == 1280 and done["B"].finish == 2310
    assert done["A"].finish == 2310 + 10000 + 2 * 30 - 1280
    metrics = summarize(result, trace="t", dropped={})
    assert metrics["guaranteed_jobs"] == 1 and metrics["guaranteed_miss_ratio"] == 0.0
    # With the default 2 h guard the trigger (2400 - 1060 - 7200) has long passed, but B still
    # waits for the lease its plan holds for it.
    done = {
        s.id: s
        for s in replay(
            jobs, Cluster.uniform(1, 1), Chronus(ChronusSettings(backend="greedy"))
        ).jobs
    }
    assert done["B"].first_start == 1200 and done["B"].finish == 2230


def test_unfit_job_is_not_guaranteed_but_still_runs():
    jobs = [job("B", 0, 1000, deadlines=[(1200, 10)]), job("C", 0, 1000, deadlines=[(1200, 10)])]
    result = replay(
        jobs, Cluster.uniform(1, 1), Chronus(ChronusSettings(backend="greedy", guard=60.0))
    )
    done = {s.id: s for s in result.jobs}
    assert done["B"].was_guaranteed is not None and done["C"].was_guaranteed is None
    # C runs as spot until B's trigger (1200 - 1030 - 30 - 60 = 80), then resumes after B.
    assert done["B"].first_start == 80 and done["B"].finish == 80 + 1030
    assert done["C"].finish == 1110 + 1000 + 2 * 30 - 80


def test_soft_job_gets_its_best_fitting_option():
    jobs = [job("X", 0, 2000, deadlines=[(1200, 10), (3600, 8), (6000, 5)])]
    result = replay(
        jobs, Cluster.uniform(1, 1), Chronus(ChronusSettings(backend="greedy", guard=60.0))
    )
    assert result.jobs[0].was_guaranteed == DeadlineOption(3600, 8)


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 4000),
            st.integers(60, 3000),
            st.sampled_from([1, 2, 4, 8]),
            st.one_of(st.none(), st.floats(1.2, 4.0)),
        ),
        min_size=1,
        max_size=20,
    )
)
def test_plan_never_exceeds_capacity_and_guarantees_hold(rows):
    jobs = [
        job(str(i), s, d, g, () if k is None else [(s + k * d, 10)])
        for i, (s, d, g, k) in enumerate(rows)
    ]
    policy = Chronus(ChronusSettings(backend="greedy", guard=60.0))
    original = LeaseSelector._book

    def checked(self, job_id, gpus, leases):
        original(self, job_id, gpus, leases)
        assert np.all(self.plan.used <= self.capacity)

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
    done = {
        s.id: s
        for s in replay(
            [g, job("long", 100, 5000)],
            Cluster.uniform(1, 1),
            Chronus(ChronusSettings(backend="greedy", guard=60.0)),
        ).jobs
    }
    assert done["G"].was_guaranteed is not None and done["G"].first_start == 0
    assert done["G"].preemptions == 0 and done["long"].first_start == done["G"].finish == 1030
    done = {
        s.id: s
        for s in replay(
            [g, job("short", 100, 100)],
            Cluster.uniform(1, 1),
            Chronus(ChronusSettings(backend="greedy", guard=60.0)),
        ).jobs
    }
    assert done["short"].first_start == 100 and done["G"].preemptions == 1


def test_pool_orders_by_remaining_gpu_time():
    # W (2 GPUs, 3000 s) holds more GPU-time than S (1 GPU, 5000 s), so S goes first although
    # W is shorter in time, as the SRTF baseline would order them.
    jobs = [job("W", 0, 3000, gpus=2), job("S", 0, 5000)]
    done = {
        s.id: s
        for s in replay(
            jobs, Cluster.uniform(1, 2), Chronus(ChronusSettings(backend="greedy"))
        ).jobs
    }
    assert done["S"].first_start == 0 and done["W"].first_start == done["S"].finish == 5030


def test_unguaranteed_job_whose_laxity_runs_out_does_not_jump_the_pool():
    # No guarantees (headroom 1). T's laxity runs out at 3100 - 2030 - 30 - 60 = 980, while it
    # waits behind S, which has less GPU-time left: T still waits, and S is not stopped.
    jobs = [job("S", 0, 1000), job("T", 0, 2000, deadlines=[(3100, 10)])]
    done = {
        s.id: s
        for s in replay(
            jobs,
            Cluster.uniform(1, 1),
            Chronus(ChronusSettings(backend="greedy", guard=60.0, headroom=1.0)),
        ).jobs
    }
    assert done["T"].was_guaranteed is None and done["S"].preemptions == 0
    assert done["T"].first_start == 1030 and done["T"].finish == 3060


def _state(id, gpus, duration, deadlines):
    return JobState(
        job=job(id, 0, duration, gpus, deadlines), seq=0, estimate=duration, overhead=0.0
    )


def test_adaptive_objective_runs_guarantees_early_only_when_nobody_was_refused():
    def planned(refuse: bool) -> tuple[int, ...]:
        selector = LeaseSelector(
            ChronusSettings(objective="adaptive", backend="greedy", headroom=0.5), capacity=2
        )
        g = _state("G", 1, 1000, [(12000, 10)])
        active = {"G": g}
        if refuse:
            active["R"] = _state("R", 2, 1000, [(2400, 10)])  # new guarantees may use one GPU only
        selector.new_lease({"G": g}, 0.0)
        selector.admit_arrivals(list(active.values()), 0.0)
        selector.new_lease(active, 1200.0)
        return selector.booked["G"]

    assert planned(refuse=False) == (1,)  # maximize: the lease that starts now
    assert planned(refuse=True) == (9,)  # minimize: the last lease before the deadline


@pytest.mark.parametrize(
    "options, message",
    [
        ({"headroom": 1.5}, "headroom: must be <= 1, got 1.5"),
        ({"headroom": "0.5"}, "headroom: expected a number, got '0.5'"),
        ({"deterministic_time": 0}, "deterministic_time: must be > 0, got 0"),
        ({"guard": -1.0}, "guard: must be >= 0, got -1.0"),
        ({"lease": 0}, "lease: must be > 0, got 0"),
        ({"objective": "asap"}, "objective: unknown 'asap' (have: maximize, minimize, adaptive)"),
        ({"backend": "gurobi"}, "backend: unknown 'gurobi' (have: cpsat, cbc, greedy)"),
        (
            {"gpus_per_node": 0},
            "'gpus_per_node': unknown setting (have: backend, deterministic_time, guard, "
            "headroom, lease, margin, objective, time_limit_s)",
        ),
    ],
)
def test_bad_lease_settings_are_refused_by_name(options, message):
    with pytest.raises(ValueError) as raised:
        ChronusSettings.from_mapping(options)
    assert str(raised.value) == message
