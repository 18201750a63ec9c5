"""The scheduler's own bookkeeping: intake, restore, progress reports, the round-up, the
placement walk when the allocator turns a gang down that the GPU count allows, and the walk's
runs of running jobs taken at once against the walk job by job.

An allocator that does not spread a gang over nodes (``ConsolidatedAllocator(spread=False)``)
is the real allocator that refuses such gangs here; HiveD tenants with full cells do the same.
"""

from __future__ import annotations

import heapq
from dataclasses import replace
from pathlib import Path

import pytest
from core_helpers import chronus, job
from hypothesis import given
from hypothesis import strategies as st

from chronus_py.jobs.model import Cluster, DeadlineOption, Node
from chronus_py.policies import make_policy
from chronus_py.round import advance, run_round
from chronus_py.scheduler import Scheduler, merge_walk
from chronus_py.selector import Tier
from placement import CellAllocator, ConsolidatedAllocator, load_config

RACKS = Path(__file__).resolve().parents[1] / "placement" / "configs" / "rack-2x2.yaml"


def unspread(cluster: Cluster, policy) -> Scheduler:
    allocator = ConsolidatedAllocator(((n.name, n.gpus) for n in cluster.nodes), spread=False)
    return Scheduler(cluster, policy, allocator=allocator)


def test_a_job_is_submitted_once():
    scheduler = Scheduler(Cluster.uniform(1, 1), make_policy("fifo"))
    scheduler.submit(job("A"))
    with pytest.raises(ValueError, match="job 'A': id: submitted twice"):
        scheduler.submit(job("A"))


def test_round_requests_hold_the_round_up():
    # 3 GPUs round up to 4: on 1 x 8 GPUs two such jobs fill the node, a third waits.
    scheduler = Scheduler(Cluster.uniform(1, 8), make_policy("srtf"), round_requests=True)
    for name in "ABC":
        scheduler.submit(job(name, gpus=3))
    moves = advance(scheduler, 0.0)
    assert [s.id for s in moves.started] == ["A", "B"] and scheduler.allocator.free_gpus() == 0
    assert [len(g) for s in moves.started for g in s.placement.values()] == [4, 4]


@pytest.mark.parametrize(
    ("gpus", "even", "shares"),
    [
        (12, False, [8, 4]),  # whole nodes plus the remainder
        (12, True, [6, 6]),  # the fewest nodes with equal shares
        (24, True, [8, 8, 8]),
        (10, True, [5, 5]),
        (9, True, [3, 3, 3]),  # never 6 + 3: two of its pods would fit one node
        (6, True, [6]),  # fits one node
    ],
)
def test_even_gangs_give_every_node_of_a_job_the_same_share(gpus, even, shares):
    # Slurm asks GPUs per node: a 12-GPU job is 2 x 6 there, never 8 + 4.
    scheduler = Scheduler(Cluster.uniform(3, 8), make_policy("fifo"), even_gangs=even)
    scheduler.submit(job("A", gpus=gpus))
    (started,) = advance(scheduler, 0.0).started
    assert sorted((len(g) for g in started.placement.values()), reverse=True) == shares


@pytest.mark.parametrize(("whole_pods", "placed"), [(False, [1, 1, 2]), (True, None)])
def test_whole_pods_never_spread_a_gang_that_does_not_fit_a_node(whole_pods, placed):
    # Three 4-GPU nodes with 2, 1 and 1 GPUs free: the default allocator spreads a 4-GPU job
    # over them, as the Chronus artifact does; a Kueue Job's one 4-GPU pod cannot be split, so
    # with whole pods it waits instead of being planned where it cannot run.
    scheduler = Scheduler(Cluster.uniform(3, 4), make_policy("fifo"), whole_pods=whole_pods)
    for name, gpus in (("x", 2), ("y", 3), ("z", 3)):
        scheduler.submit(job(name, gpus=gpus, duration=1e6))
    advance(scheduler, 0.0)
    scheduler.submit(job("A", gpus=4, submit=1.0))
    started = advance(scheduler, 1.0).started
    if placed is None:
        assert not started and not scheduler.jobs["A"].placement
    else:
        (state,) = started
        assert sorted(len(g) for g in state.placement.values()) == placed


@pytest.mark.parametrize(
    ("gpus", "pod_gpus", "busy", "placed"),
    [
        (6, 3, (), [3, 3]),  # 2 pods of 3 on 4-GPU nodes: one each (never 4 + 2)
        (3, 1, (("x", 2), ("y", 3)), [1, 2]),  # 3 pods of 1 where 2 + 1 GPUs are free
        (6, 2, (), [2, 4]),  # 3 pods of 2: two on one node, one on the other
    ],
)
def test_a_job_of_fixed_pods_is_placed_as_its_pods_each_whole(gpus, pod_gpus, busy, placed):
    # A Kueue Job's pods ask fixed GPUs: the gang is those pods, each on one node, wherever
    # they fit. Split as whole nodes plus the remainder (4 + 2, one of 3), pods of 3 could not
    # fill it and 3 pods of 1 waited for a node with 3 free GPUs.
    scheduler = Scheduler(Cluster.uniform(2, 4), make_policy("fifo"), whole_pods=True)
    for name, n in busy:
        scheduler.submit(job(name, gpus=n, duration=1e6))
    advance(scheduler, 0.0)
    scheduler.submit(replace(job("A", gpus=gpus, submit=1.0), pod_gpus=pod_gpus))
    (state,) = advance(scheduler, 1.0).started
    assert sorted(len(g) for g in state.placement.values()) == placed
    assert all(len(g) % pod_gpus == 0 for g in state.placement.values())


def test_pods_must_make_up_a_job():
    scheduler = Scheduler(Cluster.uniform(2, 4), make_policy("fifo"), whole_pods=True)
    with pytest.raises(ValueError, match="job 'A': pod_gpus: pods of 4 GPUs must make up"):
        scheduler.submit(replace(job("A", gpus=6), pod_gpus=4))


def test_a_run_that_began_late_counts_from_then_and_only_later_starts_move_it():
    scheduler = Scheduler(Cluster.uniform(1, 1), make_policy("srtf"))
    scheduler.submit(job("A", duration=1000))
    advance(scheduler, 0.0)
    state = scheduler.running["A"]
    before = state.remaining(200.0)
    scheduler.run_began("A", 120.0, now=200.0)  # the backend ran it from 120, not 0
    assert state.run_since == 120.0 and state.remaining(200.0) == before + 120.0
    scheduler.run_began("A", 60.0, now=200.0)  # an earlier record changes nothing
    assert state.run_since == 120.0


def test_restore_refuses_a_foreign_guarantee_and_busy_gpus_and_changes_nothing():
    scheduler = Scheduler(Cluster.uniform(1, 4), make_policy("fifo"))
    a = job("A", gpus=2, deadlines=[(3000, 1)])
    with pytest.raises(ValueError, match="guaranteed deadline 2000.0 is not one of its options"):
        scheduler.restore(a, 0.0, guaranteed=DeadlineOption(2000.0, 1.0))
    scheduler.restore(a, 0.0, placement={"node0": [0, 1]})
    with pytest.raises(ValueError, match="GPU 1 of node node0 is not free"):
        scheduler.restore(job("B", gpus=2), 0.0, placement={"node0": [1, 2]})
    assert list(scheduler.jobs) == ["A"] and scheduler.allocator.free_gpus() == 2
    assert [s.id for s in advance(scheduler, 0.0).started] == []  # B was never added
    scheduler.restore(job("B", gpus=2), 0.0, placement={"node0": [2, 3]})
    assert set(scheduler.running) == {"A", "B"}


def test_a_progress_report_reschedules_the_next_key_change():
    # LAS with one threshold at 100 GPU-seconds, 1 GPU. A starts at 0 (its first 30 s are its
    # restart): it would cross the threshold at 100. At 20 it reports 10 s of work done: 10 +
    # 30 = 40 GPU-seconds attained, so it crosses at 20 + 60 = 80, the next wake-up.
    scheduler = Scheduler(Cluster.uniform(1, 1), make_policy("las", {"thresholds": (100.0,)}))
    scheduler.submit(job("A"))
    advance(scheduler, 0.0)
    assert scheduler.next_wakeup(0.0) == 100.0
    scheduler.report_progress("A", 10.0, 20.0)
    assert scheduler.jobs["A"].service_at(20.0) == 40.0 and scheduler.next_wakeup(20.0) == 80.0


def test_a_gang_the_allocator_refuses_is_skipped_for_the_round():
    # 2 nodes x 4 GPUs, X and Y running with 2 GPUs on each node: 4 GPUs free, 2 + 2. C (3 GPUs,
    # first in FIFO order) fits the count but no node: skipped; D (1 GPU) starts behind it.
    cluster = Cluster.uniform(2, 4)
    scheduler = unspread(cluster, make_policy("fifo"))
    scheduler.restore(job("X", gpus=2, duration=5000), 0.0, placement={"node0": [0, 1]})
    scheduler.restore(job("Y", gpus=2, duration=5000), 0.0, placement={"node1": [0, 1]})
    scheduler.submit(job("C", gpus=3, submit=10))
    scheduler.submit(job("D", gpus=1, submit=10))
    plan = run_round(scheduler, 10.0)
    assert {d.job_id: str(d.action) for d in plan.decisions} == {
        "X": "continue",
        "Y": "continue",
        "C": "wait",
        "D": "start",
    }
    assert {d.job_id: d.reason for d in plan.decisions}["C"] == (
        "3 GPUs free, but no placement holds its gang (e.g. its tenant's cells are full)"
    )


def srtf_on_two_nodes(short: float) -> Scheduler:
    # SRTF on 2 nodes x 4 GPUs: A, B (``short`` s) and C, D (3000 s), 2 GPUs each, one short and
    # one long job per node. W (4 GPUs, 100 s) arrives at 100; the gang does not spread.
    scheduler = unspread(Cluster.uniform(2, 4), make_policy("srtf"))
    for name, duration, where in (
        ("A", short, "node0"),
        ("B", short, "node1"),
        ("C", 3000, "node0"),
        ("D", 3000, "node1"),
    ):
        gpus = [0, 1] if duration == short else [2, 3]
        scheduler.restore(job(name, gpus=2, duration=duration), 0.0, placement={where: gpus})
    scheduler.submit(job("W", gpus=4, submit=100, duration=100))
    return scheduler


def test_a_gang_refused_by_placement_takes_the_room_of_jobs_ranked_after_it():
    # W fits by count in place of C and D, but their GPUs are 2 + 2 on two nodes. Jobs ranked
    # after W (all four: A and B have 1000 s) are stopped, worst first (D, C, then B), until W is
    # placed on node1; C, stopped on the way, resumes where it was without a restart.
    scheduler = srtf_on_two_nodes(1000)
    moves = advance(scheduler, 100.0)
    assert [s.id for s in moves.started] == ["W"] and [s.id for s in moves.preempted] == ["D", "B"]
    assert scheduler.jobs["W"].placement == {"node1": (0, 1, 2, 3)}
    assert set(scheduler.running) == {"A", "C", "W"}
    assert [scheduler.jobs[j].preemptions for j in "ABCD"] == [0, 1, 0, 1]
    assert scheduler.jobs["C"].starts == 1


def test_a_whole_node_job_takes_the_cells_of_jobs_ranked_after_it():
    # HiveD cells: vcA holds rack r0 (n0, n1, 8 GPUs each). Running in vcA: L0 (4 GPUs, 3000 s)
    # and S0 (2 GPUs, 1000 s) on n0, L1 and S1 alike on n1: 4 GPUs free, 2 on each node. W
    # (8 GPUs, 100 s) needs a whole node. By count it fits in place of L1 and the free GPUs, and
    # the allocator refuses it; stopping jobs ranked after it, worst first (L1, L0, S1), frees n1.
    # L0, stopped on the way, resumes where it was, and S1 restarts on n0's 2 free GPUs.
    allocator = CellAllocator(load_config(RACKS))
    cluster = Cluster(tuple(Node(name, gpus) for name, gpus in allocator.config.nodes()))
    scheduler = Scheduler(cluster, make_policy("srtf"), allocator=allocator)
    for name, gpus, duration, where in (
        ("L0", 4, 3000, {"n0": [0, 1, 2, 3]}),
        ("S0", 2, 1000, {"n0": [4, 5]}),
        ("L1", 4, 3000, {"n1": [0, 1, 2, 3]}),
        ("S1", 2, 1000, {"n1": [4, 5]}),
    ):
        restored = replace(job(name, gpus=gpus, duration=duration), tenant="vcA")
        scheduler.restore(restored, 0.0, placement=where)
    scheduler.submit(replace(job("W", gpus=8, submit=100, duration=100), tenant="vcA"))
    moves = advance(scheduler, 100.0)
    assert [s.id for s in moves.started] == ["W", "S1"]
    assert sorted(s.id for s in moves.preempted) == ["L1", "S1"]
    assert scheduler.jobs["W"].placement == {"n1": tuple(range(8))}
    assert scheduler.jobs["S1"].placement == {"n0": (6, 7)}
    assert scheduler.jobs["L1"].status == "pending"
    assert scheduler.jobs["L0"].preemptions == 0 and scheduler.jobs["L0"].placement == {
        "n0": (0, 1, 2, 3)
    }


def test_a_walk_whose_start_is_refused_does_not_restart_the_jobs_it_preempted():
    # A and B (150 s) rank before W. W fits by count in place of C and D, but their GPUs are
    # 2 + 2 on two nodes and only they rank after it: W waits, and C and D, stopped for it by
    # count and again for room, resume without a restart.
    scheduler = srtf_on_two_nodes(150)
    moves = advance(scheduler, 100.0)
    assert scheduler.jobs["W"].status == "pending"
    assert set(scheduler.running) == {"A", "B", "C", "D"}
    assert moves.preempted == () and moves.started == ()
    assert [scheduler.jobs[j].preemptions for j in "ABCD"] == [0, 0, 0, 0]


def walk_job_by_job(running, gpus, pending, sizes, budget, smallest, backfill):
    """The walk as first written, one job at a time: what ``merge_walk`` must answer."""
    held = dict(zip((job_id for _, job_id in running), gpus))
    keep, chosen = set(), []
    for key, job_id in heapq.merge(running, pending):
        if budget < smallest:
            break
        g = held.get(job_id, sizes.get(job_id))
        if g <= budget:
            budget -= g
            (keep.add(job_id) if job_id in held else chosen.append((key, job_id)))
        elif not backfill:
            break
    return set(held) - keep, chosen


@given(
    st.lists(
        st.tuples(st.integers(0, 30), st.sampled_from([1, 2, 3, 4, 8, 16]), st.booleans()),
        min_size=2,
        max_size=60,
    ),
    st.integers(0, 24),
    st.booleans(),
)
def test_the_walk_takes_a_run_of_running_jobs_at_once_as_it_would_one_by_one(jobs, free, backfill):
    # keys (value, seq): equal values (ties broken by seq), running and pending interleaved
    running = sorted(((v, n), f"j{n}") for n, (v, _, runs) in enumerate(jobs) if runs)
    pending = sorted(((v, n), f"j{n}") for n, (v, _, runs) in enumerate(jobs) if not runs)
    sizes = {f"j{n}": g for n, (_, g, _) in enumerate(jobs)}
    gpus = [sizes[job_id] for _, job_id in running]
    smallest = min(sizes.values())
    budget = free + sum(gpus)
    args = (running, gpus, pending, sizes, budget, smallest, backfill)
    dropped, chosen = merge_walk(*args[:3], sizes.__getitem__, *args[4:])
    assert (dropped, chosen) == walk_job_by_job(*args)


def test_chronus_before_its_first_decision_and_the_selectors_guarantee_lookup():
    policy = chronus(lease=600.0, headroom=0.0)
    assert policy.take_guarantee_changes() == {} and policy.lease_report() is None
    assert policy.next_wakeup(0.0) is None and policy.standing("A") == (
        "runs on spare capacity by remaining GPU-time"
    )
    scheduler = Scheduler(Cluster.uniform(1, 1), policy)
    state = scheduler.submit(job("A", deadlines=[(1800, 1)]))
    assert policy.key(state, 0.0) == (Tier.SPOT, 1030.0, 0)  # no selector yet: the pool
    advance(scheduler, 0.0)
    assert policy.selector.guarantee("A") == DeadlineOption(1800.0, 1.0)
    assert policy.selector.guarantee("B") is None
