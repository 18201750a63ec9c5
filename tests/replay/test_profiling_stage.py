"""The profiling stage and online re-estimation, on hand-computed traces."""

from __future__ import annotations

import math

import pytest

from chronus_py.engine import replay
from chronus_py.engine.profiling import ProfilingPool
from chronus_py.estimates import Fixed, Noisy
from chronus_py.jobs.model import Cluster, DeadlineOption, Job, JobKind
from chronus_py.jobs.state import JobState
from chronus_py.policies import SRTF
from chronus_py.selector import ChronusSettings, LeaseSelector


def job(id, submit, duration, gpus=1, iterations=None):
    return Job(
        id=id,
        tenant="t",
        gpus=gpus,
        submit=submit,
        kind=JobKind.BEST_EFFORT,
        duration=duration,
        iterations=iterations,
    )


def test_short_jobs_finish_in_the_pool_and_others_wait_for_it():
    pool = ProfilingPool(nodes=1, gpus_per_node=1, window=300, cv=0.0)
    jobs = [job("short", 0, 100), job("long", 0, 1000), job("late", 10, 1000)]
    done = {s.id: s for s in replay(jobs, Cluster.uniform(2, 1), SRTF(), profiling=pool).jobs}
    assert done["short"].finish == 100 and done["short"].starts == 1
    # "long" waits for the pool (100 s), is profiled 300 s, then runs 1000 s + 30 s overhead.
    assert done["long"].first_start == 400 and done["long"].finish == 400 + 1030
    assert done["late"].first_start == 700 and done["late"].finish == 700 + 1030


def test_wide_jobs_are_profiled_on_one_node():
    pool = ProfilingPool(nodes=1, gpus_per_node=8, window=300, cv=0.0)
    assert pool.gpus_for(job("w", 0, 10, gpus=32)) == 8


def test_profiled_estimate_error_shrinks_with_observed_iterations():
    def spread(iterations):
        pool = ProfilingPool(window=300, cv=0.05)
        errors = [
            math.log(pool._measure(job(str(i), 0, 3000, iterations=iterations), 3000.0) / 3000)
            for i in range(2000)
        ]
        return math.sqrt(sum(e * e for e in errors) / len(errors))

    assert abs(spread(10) - 0.05) < 0.005  # one iteration seen in the window
    assert abs(spread(1000) - 0.05 / 10) < 0.0005  # a hundred seen


def test_reestimation_corrects_a_wrong_estimate_and_srtf_follows_it():
    # A's estimate says 100 s but it really needs 2000 s; B (500 s) arrives later.
    jobs = [job("A", 0, 100), job("B", 50, 500)]
    truth = {"A": 2000.0, "B": 500.0}
    result = replay(
        jobs,
        Cluster.uniform(1, 1),
        SRTF(),
        truth=Fixed(truth),
        reestimate_every=300.0,
        observe=300.0,
    )
    done = {s.id: s for s in result.jobs}
    # Without re-estimation A (remaining 100) keeps B waiting; at t=300 A is re-estimated
    # to 2000 s of work, B (530) now beats A's 1730 left and preempts it.
    assert done["B"].first_start == 300 and done["B"].finish == 830
    assert done["A"].finish == 830 + 2000 + 60 - 300


def test_noisy_truth_is_per_job_and_seeded():
    a = job("a", 0, 100)
    assert Noisy(0.3, 1).estimate(a) == Noisy(0.3, 1).estimate(a) != Noisy(0.3, 2).estimate(a)
    assert Noisy(0.0, 1).estimate(a) == 100


def test_profiler_reports_its_band_and_planning_pads_by_it():
    pool = ProfilingPool(nodes=1, gpus_per_node=1, window=300, cv=0.05)
    jobs = [job("G", 0, 6000.0, iterations=10)]  # one iteration per window: band = 2 x 5%
    replay(jobs, Cluster.uniform(1, 1), SRTF(), profiling=pool)
    assert math.isclose(pool.uncertainty(jobs[0]), 0.10)

    selector = LeaseSelector(ChronusSettings(lease=1200.0), capacity=8)
    state = JobState(job=jobs[0], seq=0, estimate=2350.0, overhead=30.0)
    assert selector._need_seconds(state, 0.0, 0) == pytest.approx(2410.0)  # 2350 + 2 x 30
    state.uncertainty = 0.10
    assert selector._need_seconds(state, 0.0, 0) == pytest.approx(2648.0)  # 2380 x 1.1 + 30
    state.estimate = 2000.0
    state.uncertainty = 0.0
    assert selector._need_seconds(state, 0.0, 0) == pytest.approx(2060.0)  # 2000 + 2 x 30
    state.uncertainty = 0.10
    assert selector._need_seconds(state, 0.0, 0) == pytest.approx(2263.0)  # 2030 x 1.1 + 30
    state.uncertainty = 0.20
    assert selector._need_seconds(state, 0.0, 0) == pytest.approx(2466.0)  # 2030 x 1.2 + 30


def slo(id, submit, duration, deadline, gpus=1):
    return Job(
        id=id,
        tenant="t",
        gpus=gpus,
        submit=submit,
        kind=JobKind.STRICT_SLO,
        duration=duration,
        deadlines=(DeadlineOption(deadline, 1.0),),
    )


def pool_starts(order):
    """Profiling start per job: a 2-GPU pool, an 8-GPU job queued ahead of two 1-GPU jobs."""
    pool = ProfilingPool(nodes=1, gpus_per_node=2, window=300, cv=0.0, order=order)
    jobs = [
        job("busy", 0, 1000),
        slo("wide", 1, 1000, 10_000, gpus=2),
        job("be", 2, 1000),
        slo("tight", 3, 1000, 2_000),
    ]
    starts = {}
    for j in jobs:
        pool.arrive(j, j.duration)
        pool.pop(j.submit)
    while pool.next_time() < math.inf:
        for j, start, _, _ in pool.pop(pool.next_time()):
            starts[j.id] = start
    return starts


def test_fifo_pool_profiles_in_arrival_order_and_blocks_behind_the_head():
    assert pool_starts("fifo") == {"busy": 0, "wide": 300, "be": 600, "tight": 600}


def test_deadline_pool_profiles_the_tightest_deadline_first_and_backfills():
    # "be" fills the GPU "wide" (2 GPUs) cannot use yet; when "busy" ends, "tight" goes before
    # "wide" (earlier deadline), which gets both GPUs once "tight" and "be" are done.
    assert pool_starts("deadline") == {"busy": 0, "be": 2, "tight": 300, "wide": 600}


def test_unknown_pool_order_is_rejected():
    with pytest.raises(ValueError, match="order"):
        ProfilingPool(order="lifo")
