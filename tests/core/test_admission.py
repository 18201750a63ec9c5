"""Admission, hand-computed: a guarantee is given when the job's remaining work fits in whole leases
under the headroom, refused otherwise, and a soft job gets its best option that fits.

Arithmetic used throughout: a restart costs 30 s x (1 + log2 GPUs) (30, 60, 90, 120 s for 1, 2, 4,
8 GPUs; 77.55 s for 3); a pending job's remaining work counts the start it still needs; the plan
needs ``ceil((remaining + one restart) / lease)`` leases; a deadline ``D`` may use the leases
before ``floor(D / lease)``; new guarantees may use ``capacity - int(headroom x capacity)`` GPUs
of each lease, or any GPUs free if they are wider and what is free before their deadline holds
them and the pool's waiting work, and take the latest leases that fit.
"""

from __future__ import annotations

import math
import pickle

import numpy as np
from core_helpers import chronus, job
from hypothesis import given, settings
from hypothesis import strategies as st

from chronus_py.jobs.model import Cluster, DeadlineOption
from chronus_py.round import run_round
from chronus_py.scheduler import Scheduler
from chronus_py.selector import ChronusSettings, LeaseSelector, Tier
from chronus_py.selector.admission import Ask
from chronus_py.selector.arrivals import Arrivals


def test_guaranteed_in_whole_leases_under_the_headroom_else_refused():
    # 1 node x 4 GPUs, lease 600 s, headroom 0.5: new guarantees may use 4 - int(2.0) = 2 GPUs.
    # A: 2 GPUs, 1000 s: remaining 1000 + 60 = 1060, needs ceil((1060 + 60) / 600) = 2 leases
    #    before floor(3000 / 600) = 5: the latest two, leases 3 and 4.
    # B: the same: leases 3, 4 are full (2 of 2), so leases 1 and 2.
    # C: 1 GPU, 500 s: remaining 530, needs ceil(560 / 600) = 1 lease before floor(1800/600) = 3;
    #    leases 1 and 2 are full, so lease 0.
    # D: like A: lease 0 has 2 - 1 = 1 GPU left and the others none: refused.
    jobs = [
        job("A", gpus=2, deadlines=[(3000, 10)]),
        job("B", gpus=2, deadlines=[(3000, 10)]),
        job("C", duration=500, deadlines=[(1800, 10)]),
        job("D", gpus=2, deadlines=[(3000, 10)]),
    ]
    policy = chronus(lease=600.0, headroom=0.5)
    scheduler = Scheduler(Cluster.uniform(1, 4), policy)
    for j in jobs:
        scheduler.submit(j)
    plan = run_round(scheduler, 0.0)
    selector = policy.selector
    assert selector.booked == {"A": (3, 4), "B": (1, 2), "C": (0,)}
    assert selector.guarantees == {
        j: DeadlineOption(d, 10.0) for j, d in [("A", 3000.0), ("B", 3000.0), ("C", 1800.0)]
    }
    assert [scheduler.jobs[j].guaranteed for j in "ABCD"] == [
        DeadlineOption(3000.0, 10.0),
        DeadlineOption(3000.0, 10.0),
        DeadlineOption(1800.0, 10.0),
        None,
    ]
    # Tiers: C is planned in the current lease (not one block ending at its deadline): must run;
    # A and B are planned later (ahead); D is in the pool.
    assert [selector.tier(j) for j in "ABCD"] == [Tier.AHEAD, Tier.AHEAD, Tier.MUST_RUN, Tier.SPOT]
    assert plan.lease_plan == {"A": (1800.0, 2400.0), "B": (600.0, 1200.0), "C": (0.0,)}
    assert plan.solver["admitted"] == 3 and plan.solver["demoted"] == []
    # Placement: C (1 GPU), then D (2 GPUs); A and B need 2 of the 1 GPU left.
    decisions = {d.job_id: d for d in plan.decisions}
    assert {j: str(d.action) for j, d in decisions.items()} == {
        "A": "wait",
        "B": "wait",
        "C": "start",
        "D": "start",
    }
    # Without the headroom D would fit leases 3 and 4 (2 GPUs free each): the headroom binds.
    assert "not guaranteed, held back by the headroom (each lease keeps 50% of its GPUs " in (
        decisions["D"].reason
    )


def test_headroom_keeps_a_share_of_each_lease_but_never_more_than_a_jobs_width():
    # 1 node x 8 GPUs, lease 1200 s, headroom 0.5: 4 GPUs per lease for new guarantees, or
    # any free GPUs for a job wider than 4 (the pool is empty: nothing else to hold).
    # W (8 GPUs): 1000 + 120 (its start) = 1120 s, one lease run through, the latest free one
    #   before floor(12000 / 1200) = 10: lease 9. (A cap of 4 per lease refused it at any
    #   deadline.)
    # T (3 GPUs) is planned as 4 (the {1, 2, 4, whole nodes} round-up): remaining 1000 + 77.55
    #   (its start) = 1077.55 s: one lease before floor(2400 / 1200) = 2, the latest: lease 1.
    # F (4 GPUs): 1000 + 90 = 1090 s, one lease; lease 1 is full (4 of 4): lease 0.
    # O (1 GPU, same deadline): both leases hold 4 of 4: held back by the headroom.
    jobs = [
        job("W", gpus=8, deadlines=[(12000, 1)]),
        job("T", gpus=3, deadlines=[(2400, 1)]),
        job("F", gpus=4, deadlines=[(2400, 1)]),
        job("O", gpus=1, deadlines=[(2400, 1)]),
    ]
    policy = chronus(lease=1200.0, headroom=0.5)
    scheduler = Scheduler(Cluster.uniform(1, 8), policy)
    for j in jobs:
        scheduler.submit(j)
    scheduler.select(0.0)
    selector = policy.selector
    assert selector.booked == {"W": (9,), "T": (1,), "F": (0,)}
    assert selector.why_not(scheduler.jobs["O"], 0.0).startswith("the headroom")
    assert selector.why_not(scheduler.jobs["W"], 0.0) is None  # guaranteed: nothing to say
    # V (8 GPUs, 2000 s: two leases by 2400) finds both promised to T and F: capacity.
    scheduler.submit(job("V", gpus=8, duration=2000, deadlines=[(2400, 1)]))
    assert selector.why_not(scheduler.jobs["V"], 0.0).startswith("capacity before its deadline")
    # Headroom 1 keeps every lease for the pool: nobody is guaranteed, whatever their width.
    policy = chronus(lease=1200.0, headroom=1.0)
    scheduler = Scheduler(Cluster.uniform(1, 8), policy)
    scheduler.submit(jobs[0])
    scheduler.select(0.0)
    assert policy.selector.booked == {}
    policy = chronus(lease=1200.0, headroom=0.0)
    scheduler = Scheduler(Cluster.uniform(1, 8), policy)
    scheduler.submit(job("L", gpus=8, duration=1150, deadlines=[(12000, 1)]))
    scheduler.select(0.0)
    # L: 1150 + 120 = 1270 s, two leases, + 120 for the gap = 1390 s: still two, 8 and 9.
    assert policy.selector.booked == {"L": (8, 9)}


def test_a_job_wider_than_the_share_is_promised_only_where_the_pools_work_fits_too():
    # 1 node x 8 GPUs, lease 1200 s, headroom 0.5 (share 4 GPUs), guard 0. Two best-effort jobs
    # of 4 GPUs x 36,000 s (+ 90 s start each: 288,720 GPU-s) arrive at 0 and wait (nothing is
    # started here). W and X (8 GPUs, 1000 + 120 s: one lease, 8,960 GPU-s of work) arrive at
    # T = 1,200,000 (lease 1000); nothing arrived over the span before T as long as their
    # windows, and the work arriving at T is the work being admitted, not a rate: nothing is
    # expected to arrive. A queued job counts as much of its work as its width runs in the
    # window: in 12,000 s, 48,000 GPU-s of each best-effort job's 144,360.
    # W by T + 12,000: leases 1000-1009 hold 96,000 GPU-s, less than its own 9,600, the
    # queue's 96,000 and X's 8,960: held back by the headroom.
    # X by T + 48,000: 384,000 GPU-s hold 9,600 + 288,720 + W's 8,960: promised the
    # latest lease before floor((T + 48,000) / 1200) = 1040.
    policy = chronus(lease=1200.0, headroom=0.5, guard=0.0)
    scheduler = Scheduler(Cluster.uniform(1, 8), policy)
    scheduler.submit(job("B1", gpus=4, duration=36000))
    scheduler.submit(job("B2", gpus=4, duration=36000))
    scheduler.select(0.0)
    t = 1_200_000.0
    scheduler.submit(job("W", gpus=8, submit=t, deadlines=[(t + 12000, 1)]))
    scheduler.submit(job("X", gpus=8, submit=t, deadlines=[(t + 48000, 1)]))
    scheduler.select(t)
    selector = policy.selector
    assert selector.booked == {"X": (1039,)}
    # Asked again, X booked: the 96,000 GPU-s queued for W's window are 27 GPU-hours.
    assert policy.refusal(scheduler.jobs["W"], t).endswith(
        "held back by the headroom (it is wider than the 4 GPUs of each lease left to new "
        "guarantees, and the 27 GPU-hours the pool has queued or is expected to receive by its "
        "deadline and its own do not fit in what is free before it)"
    )
    # The selector keeps the queue the policy set at the decision point, until it is pickled
    # (a re-plan crossing from the service's child): then nothing is known to wait, W fits.
    assert selector.probe(scheduler.jobs["W"], t) is None
    crossed = pickle.loads(pickle.dumps(selector))
    assert crossed.queue is None and crossed.booked == {"X": (1039,)}
    assert crossed.probe(scheduler.jobs["W"], t) == DeadlineOption(t + 12000, 1.0)


def queued_then_wide(queued, wide):
    """1 node x 8 GPUs, lease 1200 s, headroom 0.5 (share 4 GPUs), guard 0: ``queued``
    submitted at 0 (nothing is started here), then the ``wide`` job at its own submit time."""
    policy = chronus(lease=1200.0, headroom=0.5, guard=0.0)
    scheduler = Scheduler(Cluster.uniform(1, 8), policy)
    scheduler.submit(queued)
    scheduler.select(0.0)
    scheduler.submit(wide)
    scheduler.select(wide.submit)
    return policy, scheduler


def test_a_queued_job_weighs_on_a_wide_job_only_as_far_as_its_width_runs_in_the_window():
    # As above, with one best-effort job of 4 GPUs x 36,000 s queued (+ 90 s start: 144,360
    # GPU-s). W (8 GPUs, 1000 + 120 s: 9,600 GPU-s in one lease) by T + 12,000: leases
    # 1000-1009 hold 96,000 GPU-s. The queued job can run 4 x 12,000 = 48,000 GPU-s of its
    # work in W's window, and 57,600 fit: promised the latest lease, 1009. Counted in full (the
    # rule until session 16), 153,960 did not.
    t = 1_200_000.0
    policy, scheduler = queued_then_wide(
        job("B", gpus=4, duration=36000), job("W", gpus=8, submit=t, deadlines=[(t + 12000, 1)])
    )
    assert policy.selector.booked == {"W": (1009,)}
    assert policy.selector._pool_work(scheduler.jobs["W"], t, t + 12000, 0.0) == 48000.0


def test_a_wide_job_weighs_the_work_arriving_in_the_share_of_its_window_it_holds():
    # 1 node x 8 GPUs, lease 1200 s, headroom 0.5, guard 0. R (best-effort, 8 GPUs x 36,000 s,
    # + 120 s start: 288,960 GPU-s) arrives at 0 and waits (nothing is started here). At 12,000
    # (lease 10) a job of 8 GPUs arrives with its deadline at 60,000: leases 10-49, 384,000
    # GPU-s free. Arrived over the 12,000 s before (the history is shorter than the 48,000 s
    # ahead): R's 288,960 GPU-s, 24.08 GPU-s a second; expected by 60,000: 1,155,840 GPU-s.
    # This cluster receives three times the work it can run.
    def arriving(duration: float):
        policy = chronus(lease=1200.0, headroom=0.5, guard=0.0)
        scheduler = Scheduler(Cluster.uniform(1, 8), policy)
        scheduler.submit(job("R", gpus=8, duration=36000))
        scheduler.select(0.0)
        scheduler.submit(
            job("W", gpus=8, submit=12000.0, duration=duration, deadlines=[(60000, 1)])
        )
        scheduler.select(12000.0)
        return policy, scheduler

    # W of 6,000 s (+ 120 s start + 120 s for a gap: 6,240 s) holds 0.13 of its window's
    # 48,000 s, so it weighs 0.13 of the work arriving: 288,960 + 150,259 = 439,219 GPU-s (122
    # GPU-hours) and its own 49,920 do not fit; the queue alone would.
    policy, scheduler = arriving(6000.0)
    assert policy.selector.booked == {}
    assert policy.refusal(scheduler.jobs["W"], 12000.0).endswith(
        "and the 122 GPU-hours the pool has queued or is expected to receive by its deadline "
        "and its own do not fit in what is free before it)"
    )
    # W of 1,000 s (+ 120 s + 120 s: 1,240 s) weighs 0.026 of it: 288,960 + 29,760 + its own
    # 9,920 fit, promised in the latest lease (a flat half of the arrivals, 577,920 GPU-s, did
    # not: the rule until session 15).
    policy, scheduler = arriving(1000.0)
    assert policy.selector.booked == {"W": (49,)}


def test_a_wide_job_weighs_its_work_not_the_whole_leases_it_is_booked_in():
    # 1 node x 8 GPUs, lease 1200 s, headroom 0.5 (share 4 GPUs), guard 0. B (best-effort, 1
    # GPU x 1,000 s + 30 s start) arrives at 0 and waits. W (8 GPUs x 1,500 s + 120 s start +
    # 120 s for a gap: 1,740 s, two leases) arrives at T = 1,200,000 (lease 1000), due at
    # T + 2,400: its window is leases 1000-1001, 19,200 GPU-s, nothing booked. Its work takes
    # 13,920 of them and holds 0.725 of the window; B's 1,030 fit beside it: promised in both
    # leases. Counted by its leases (the rule until session 17), its booking took all 19,200
    # and B's queued work refused it.
    t = 1_200_000.0
    policy, scheduler = queued_then_wide(
        job("B", gpus=1, duration=1000),
        job("W", gpus=8, submit=t, duration=1500, deadlines=[(t + 2400, 1)]),
    )
    selector, w = policy.selector, scheduler.jobs["W"]
    assert selector.booked == {"W": (1000, 1001)}
    assert selector._held(t + 2400, 1740.0, 1000, selector._spare(w)) == 0.725
    assert selector._pool_work(w, t, t + 2400, 0.725) == 1030.0


def test_work_expected_to_arrive_comes_at_the_rate_seen_over_as_long_a_span_before():
    arrivals = Arrivals(lookback=20.0)
    for at, work in [(0.0, 100.0), (10.0, 50.0), (20.0, 30.0)]:
        arrivals.record(at, work, 10)  # 10 GPUs: no job here is longer than a span asked
    assert arrivals.expected(20.0, 20.0) == 0.0
    # The 30 arriving at 20 is the work being admitted then, not a rate: 50 over [10, 20).
    assert arrivals.expected(20.0, 30.0) == 50.0
    assert arrivals.expected(25.0, 35.0) == 30.0  # the 30 over [15, 25), for the next 10 s
    assert arrivals.expected(20.0, 60.0) == 300.0  # 150 over the 20 s since the first, for 40
    # Asked 40 s ahead, 40 s are kept: at 100 the first three go, their total stays; a longer
    # span is measured over the 40 s kept.
    arrivals.record(100.0, 10.0, 10)
    assert arrivals.times == [100.0] and arrivals.works == [10.0]
    assert arrivals.expected(100.0, 110.0) == 0.0  # only the work arriving now
    assert arrivals.expected(105.0, 115.0) == 10.0
    assert arrivals.expected(110.0, 210.0) == 20.0  # the 10 over the 50 s since 60
    # Over a span of at least 50 s: the 10 at 100 are 0.2 a second, not 1.
    arrivals.shortest = 50.0
    assert arrivals.expected(105.0, 115.0) == 2.0


def test_an_arriving_job_counts_no_more_than_its_gpus_for_the_time_ahead():
    # An 8-GPU job of 10 h and a 4-GPU job of 10 min arrive at 0. At 3,600 s, for the next
    # 3,600 s (the rate over the hour before): the long one can run 8 x 3,600 = 28,800 GPU-s of
    # its 288,000 in that time, the short one all its 2,400: 31,200 expected, not 290,400 (the
    # rule until session 17, which read a burst of long jobs as more work than the window holds).
    arrivals = Arrivals()
    arrivals.record(0.0, 8 * 36000.0, 8)
    arrivals.record(0.0, 4 * 600.0, 4)
    assert math.isclose(arrivals.expected(3600.0, 7200.0), 31200.0)
    # Two hours ahead, at the rate of the one hour seen: 8 x 7,200 + 2,400 GPU-s came in that
    # hour that can run in two, twice over.
    assert math.isclose(arrivals.expected(3600.0, 10800.0), 120000.0)


def test_a_refused_guarantee_names_the_guard_or_the_estimate_band_when_they_bind():
    # 1 node x 8 GPUs, lease 1200 s, no headroom. G (1 GPU, 1000 s + 30 s start) by 2300:
    # the lease its deadline falls in holds 1100 s, not 1030 + 30 + the 600 s guard: with
    # lease 0 taken by a wide job, only the guard stands between G and lease 1.
    policy = chronus(lease=1200.0, headroom=0.0, guard=600.0)
    scheduler = Scheduler(Cluster.uniform(1, 8), policy)
    scheduler.submit(job("X", gpus=8, duration=1000, deadlines=[(1200, 1)]))
    scheduler.submit(job("G", duration=1000, deadlines=[(2300, 1)]))
    scheduler.select(0.0)
    selector = policy.selector
    assert set(selector.booked) == {"X"}
    assert selector.why_not(scheduler.jobs["G"], 0.0).startswith("the guard")
    # B: the same job with a band of 20 %: 1030 x 1.2 = 1236 s needs two leases; without the
    # band one, which the guard-free lease 1 holds (guard 0 here).
    policy = chronus(lease=1200.0, headroom=0.0, guard=0.0)
    scheduler = Scheduler(Cluster.uniform(1, 8), policy)
    scheduler.submit(job("X", gpus=8, duration=1000, deadlines=[(1200, 1)]))
    scheduler.submit(job("B", duration=1000, deadlines=[(2300, 1)]))
    scheduler.jobs["B"].uncertainty = 0.2
    scheduler.jobs["B"].observed = True
    scheduler.select(0.0)
    assert "B" not in policy.selector.booked
    assert policy.selector.why_not(scheduler.jobs["B"], 0.0).startswith("the estimate band")


def test_soft_job_gets_its_best_option_that_fits_and_still_competes_for_a_tighter_one():
    # 1 GPU, lease 600 s, no headroom, guard 0.
    # G (strict, 1000 s by 1800): remaining 1030, 2 leases before lease 3: leases 1, 2.
    # S (soft, 1000 s; 900 / 1800 / 3600): 2 leases. 900 leaves floor(900/600) = 1 lease: too
    #   few. 1800: only lease 0 is free before lease 3: no. 3600: the latest two free before
    #   lease 6: leases 4, 5. S is guaranteed (3600, 3), its best option that fits.
    g = job("G", deadlines=[(1800, 10)])
    s = job("S", deadlines=[(900, 10), (1800, 6), (3600, 3)])
    policy = chronus(lease=600.0, headroom=0.0, guard=0.0)
    scheduler = Scheduler(Cluster.uniform(1, 1), policy)
    scheduler.submit(g)
    scheduler.submit(s)
    plan = run_round(scheduler, 0.0)
    assert policy.selector.booked == {"G": (1, 2), "S": (4, 5)}
    assert scheduler.jobs["S"].guaranteed == DeadlineOption(3600.0, 3.0)
    # G is planned later: ahead. S is planned later too, but could still finish by 1800
    # (0 + 1030 <= 1800): it competes in the pool, so it runs now, before G.
    assert policy.selector.tier("G") is Tier.AHEAD and policy.selector.tier("S") is Tier.SPOT
    assert [(d.job_id, str(d.action), d.deadline) for d in plan.decisions] == [
        ("G", "wait", 1800.0),
        ("S", "start", 3600.0),
    ]


def test_soft_job_holding_its_tightest_option_is_not_lifted_into_the_pool():
    # A soft job guaranteed its tightest option has nothing better to compete for: planned
    # later, it is ahead like a strict one. 1000 s (2 leases) by 1800 or 3600: leases 1, 2.
    policy = chronus(lease=600.0, headroom=0.0)
    scheduler = Scheduler(Cluster.uniform(1, 1), policy)
    scheduler.submit(job("S", deadlines=[(1800, 6), (3600, 3)]))
    scheduler.select(0.0)
    assert policy.selector.booked == {"S": (1, 2)} and policy.selector.tier("S") is Tier.AHEAD


def test_arrival_mid_lease_is_planned_from_the_next_lease_and_a_refused_job_is_retried():
    # 1 GPU, lease 600 s, no headroom, guard 0. At 0, G (1000 s by 1800) takes leases 1 and 2,
    #   and starts at once on the idle GPU (spare capacity).
    # R arrives at 100 (mid-lease: its plan may start at lease 1): 950 s by 2400 needs
    #   ceil((980 + 30) / 600) = 2 leases in [1, 4): only lease 3 is free: refused, in the pool,
    #   where it has more GPU-time left (980) than G (930): G runs on.
    # At 600 G has 430 s left: 1 lease, re-planned into lease 2 only. R is retried: leases 1
    #   and 3 are free: guaranteed. Its leases are not one block ending at its deadline, so it
    #   must run now, and G, ahead of its plan, yields the GPU.
    g = job("G", deadlines=[(1800, 10)])
    r = job("R", submit=100, duration=950, deadlines=[(2400, 10)])
    policy = chronus(lease=600.0, headroom=0.0, guard=0.0)
    scheduler = Scheduler(Cluster.uniform(1, 1), policy)
    scheduler.submit(g)
    run_round(scheduler, 0.0)
    scheduler.submit(r)
    plan = run_round(scheduler, 100.0)
    assert [(d.job_id, str(d.action)) for d in plan.decisions] == [("G", "continue"), ("R", "wait")]
    assert policy.selector.booked == {"G": (1, 2)} and "R" not in policy.selector.guarantees
    assert policy.selector.stats.admitted_at_arrival == 0  # G was admitted by the first re-plan
    plan = run_round(scheduler, 600.0)
    assert policy.selector.booked == {"G": (2,), "R": (1, 3)}
    assert policy.selector.stats.admitted_on_retry == 2 and plan.solver["admitted"] == 2
    assert scheduler.jobs["R"].guaranteed == DeadlineOption(2400.0, 10.0)
    assert policy.selector.tier("R") is Tier.MUST_RUN and policy.selector.tier("G") is Tier.AHEAD
    assert [(d.job_id, str(d.action)) for d in plan.decisions] == [("G", "preempt"), ("R", "start")]


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from([8, 32, 256, 960]),
    st.sampled_from([0.0, 0.5, 0.9]),
    st.lists(st.tuples(st.integers(1, 64), st.integers(0, 11)), max_size=30),
    st.integers(1, 128),
    st.integers(1, 6),
    st.integers(1, 12),
    st.sampled_from([None, 0.0, 50_000.0, 500_000.0]),
)
def test_the_headroom_admits_jobs_no_wider_than_its_share_as_a_cap_per_lease_did(
    capacity, headroom, bookings, gpus, need, end, waiting
):
    """For a job no wider than the share the headroom leaves, admission is the cap per lease
    it always was (so the Philly replays at 960 GPUs, no job above 32, do not move); a wider
    job fits any leases with room, if the GPU-time free before its deadline holds its own
    booking and the pool's ``waiting`` work."""
    selector = LeaseSelector(
        ChronusSettings(lease=100.0, headroom=headroom, guard=0.0), capacity, node_gpus=1
    )
    for i, (width, lease) in enumerate(bookings):
        if selector._free(0, 12)[lease] >= width:
            selector._book(f"b{i}", width, np.array([lease]))
    gpus = min(gpus, capacity)
    placed = selector._place(Ask(end * 100.0, gpus, need * 100.0 - 1.0, 0, 0.0, waiting=waiting))
    free = selector._free(0, end)
    cap = capacity - int(headroom * capacity)
    room = free - int(headroom * capacity) if gpus <= cap else free
    fits = np.flatnonzero(room >= gpus)
    expected = fits[-need:] if len(fits) >= need else None
    if gpus > cap and waiting is not None and waiting + gpus * need * 100.0 > free.sum() * 100.0:
        expected = None
    if expected is None:
        assert placed is None
    else:
        assert placed is not None and placed.tolist() == expected.tolist()
