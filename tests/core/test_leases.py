"""Lease boundaries, laxity triggers, demotion and the hopeless tier, hand-computed.

Same arithmetic as test_admission: restarts cost 30 s x (1 + log2 GPUs); a plan needs
``ceil((remaining + one restart) / lease)`` leases, before the first lease that does not end by its
deadline, or before the one after it when the last lease's piece fits before the deadline; a
guaranteed job whose leases are one block ending at its deadline lease turns MUST_RUN at
``deadline - remaining - restart - guard``.
"""

from __future__ import annotations

from core_helpers import chronus, job

from chronus_py.estimates import Fixed
from chronus_py.jobs.model import Cluster, DeadlineOption
from chronus_py.round import advance, run_round
from chronus_py.scheduler import Scheduler
from chronus_py.selector import Tier
from chronus_py.selector.leases import block_end, deadline_window, room


def test_plan_is_revised_at_the_lease_end_only():
    # 1 GPU, lease 600 s, no headroom. G (1000 s by 3000) needs ceil(1060 / 600) = 2 leases
    # before lease 5: leases 3 and 4. It starts at once on the idle GPU, ahead of its plan.
    policy = chronus(lease=600.0, headroom=0.0)
    scheduler = Scheduler(Cluster.uniform(1, 1), policy)
    scheduler.submit(job("G", deadlines=[(3000, 10)]))
    advance(scheduler, 0.0)
    selector = policy.selector
    assert selector.booked == {"G": (3, 4)} and selector.stats.rounds == 1
    assert scheduler.next_wakeup(0.0) == 600.0  # no trigger: the lease end
    advance(scheduler, 300.0)  # mid-lease: no re-plan
    assert selector.booked == {"G": (3, 4)} and selector.stats.rounds == 1
    # At 600 G has 1030 - 600 = 430 s left: ceil(460 / 600) = 1 lease, the latest: lease 4.
    plan = run_round(scheduler, 600.0)
    assert selector.booked == {"G": (4,)} and selector.stats.rounds == 2
    assert plan.lease_end == 1200.0 and plan.next_decision == 1200.0
    assert plan.lease_plan == {"G": (2400.0,)} and plan.solver["rounds"] == 2
    assert plan.solver["backend"] == "greedy"


def test_laxity_trigger_turns_a_guaranteed_job_must_run_at_deadline_minus_cover():
    # 1 GPU, lease 600 s, no headroom, guard 100 s.
    # G (1000 s by 1800): leases 1, 2 (one block ending at its deadline lease 3).
    # B (best effort, 5000 s) runs meanwhile: G is ahead of its plan in lease 0.
    # At 600 G's block has started; it turns must-run at 1800 - 1030 - 30 - 100 = 640, the next
    # wake-up (before the lease end 1200), and takes the GPU from B; it ends at 640 + 1030.
    policy = chronus(lease=600.0, headroom=0.0, guard=100.0)
    scheduler = Scheduler(Cluster.uniform(1, 1), policy)
    scheduler.submit(job("G", deadlines=[(1800, 10)]))
    scheduler.submit(job("B", duration=5000))
    moves = advance(scheduler, 0.0)
    assert [s.id for s in moves.started] == ["B"] and policy.selector.tier("G") is Tier.AHEAD
    assert scheduler.next_wakeup(0.0) == 600.0
    moves = advance(scheduler, 600.0)
    assert moves.started == () and policy.selector.tier("G") is Tier.AHEAD
    assert policy.selector.next_trigger() == 640.0 and scheduler.next_wakeup(600.0) == 640.0
    moves = advance(scheduler, 639.0)  # an event just before: nothing changes
    assert moves.started == () and policy.selector.tier("G") is Tier.AHEAD
    moves = advance(scheduler, 640.0)
    assert policy.selector.tier("G") is Tier.MUST_RUN
    assert [s.id for s in moves.started] == ["G"] and [s.id for s in moves.preempted] == ["B"]
    assert scheduler.jobs["G"].remaining(640.0) == 1030.0  # done at 1670 <= 1800
    assert scheduler.next_wakeup(640.0) == 1200.0


def test_a_job_planned_in_the_current_lease_outside_its_final_block_must_run_now():
    # 1 GPU, lease 600 s, no headroom, jobs admitted in submission order:
    # H (1000 s by 1800): 2 leases before lease 3: 1, 2.
    # L (2000 s by 6000): ceil(2060 / 600) = 4 leases before lease 10: 6..9.
    # K (1500 s by 3600): ceil(1560 / 600) = 3 leases before lease 6: 3, 4, 5.
    # M (500 s by 1800): 1 lease before lease 3; only lease 0 is free. Its plan needs it in the
    # current lease, which is not a block ending at its deadline lease: it must run now (no
    # laxity to wait for); the others are planned later: ahead.
    policy = chronus(lease=600.0, headroom=0.0)
    scheduler = Scheduler(Cluster.uniform(1, 1), policy)
    for j in (
        job("H", deadlines=[(1800, 1)]),
        job("L", duration=2000, deadlines=[(6000, 1)]),
        job("K", duration=1500, deadlines=[(3600, 1)]),
        job("M", duration=500, deadlines=[(1800, 1)]),
    ):
        scheduler.submit(j)
    moves = advance(scheduler, 0.0)
    assert policy.selector.booked == {"H": (1, 2), "L": (6, 7, 8, 9), "K": (3, 4, 5), "M": (0,)}
    assert [policy.selector.tier(j) for j in "HLKM"] == [Tier.AHEAD] * 3 + [Tier.MUST_RUN]
    assert [s.id for s in moves.started] == ["M"]


def test_guaranteed_job_that_overruns_its_estimate_is_demoted_at_the_next_lease_boundary():
    # 1 GPU, lease 600 s, no headroom. G is estimated at 1000 s by 1800: leases 1, 2; B (best
    # effort) holds the GPU. At 300 G is re-estimated at 3000 s: still guaranteed until the
    # lease ends. At 600 its remaining 3030 s need ceil(3060 / 600) = 6 leases and only
    # floor(1800/600) - 1 = 2 are left: demoted, reported in the solver stats, and (600 + 3030 >
    # 1800) hopeless.
    policy = chronus(lease=600.0, headroom=0.0)
    scheduler = Scheduler(Cluster.uniform(1, 1), policy)
    scheduler.submit(job("B", duration=9000))
    scheduler.submit(job("G", deadlines=[(1800, 10)]))
    advance(scheduler, 0.0)
    assert scheduler.jobs["G"].guaranteed == DeadlineOption(1800.0, 10.0)
    scheduler.reestimate("G", 3000.0, 300.0)
    advance(scheduler, 300.0)
    assert "G" in policy.selector.guarantees and policy.selector.stats.demoted == []
    plan = run_round(scheduler, 600.0)
    assert policy.selector.stats.demoted == ["G"] and plan.solver["demoted"] == ["G"]
    state = scheduler.jobs["G"]
    assert state.guaranteed is None and state.was_guaranteed == DeadlineOption(1800.0, 10.0)
    assert "G" not in policy.selector.booked and policy.selector.tier("G") is Tier.HOPELESS
    decision = {d.job_id: d for d in plan.decisions}["G"]
    assert not decision.guaranteed and decision.deadline == 1800.0
    assert decision.reason == (
        "cannot meet its last deadline even alone; leftover GPUs only; "
        "needs 1 GPUs, 0 free after this round"
    )


def test_when_the_plan_cannot_hold_every_guarantee_the_solver_drops_one_and_it_is_demoted():
    # 1 GPU, lease 600 s, no headroom; B (best effort) holds the GPU throughout.
    # G1 and G2 (500 s by 1800) need 1 lease each: G1 lease 2, G2 lease 1. At 300 G2 is
    # re-estimated at 1000 s: at 600 it needs 2 leases, G1 one, and only leases 1, 2 are left.
    # The greedy plans: keep G1 in lease 2 (nothing in the current lease) or G2 in leases 1, 2
    # (one job in the current lease); the plan keeps the current lease free (objective
    # minimize): G2 is demoted. It can still make 1800 (600 + 1030): back in the pool.
    policy = chronus(lease=600.0, headroom=0.0)
    scheduler = Scheduler(Cluster.uniform(1, 1), policy)
    scheduler.submit(job("B", duration=9000))
    scheduler.submit(job("G1", duration=500, deadlines=[(1800, 10)]))
    scheduler.submit(job("G2", duration=500, deadlines=[(1800, 10)]))
    advance(scheduler, 0.0)
    assert policy.selector.booked == {"G1": (2,), "G2": (1,)}
    scheduler.reestimate("G2", 1000.0, 300.0)
    advance(scheduler, 600.0)
    assert policy.selector.stats.demoted == ["G2"] and policy.selector.booked == {"G1": (2,)}
    assert scheduler.jobs["G2"].guaranteed is None and policy.selector.tier("G2") is Tier.SPOT


def test_hopeless_jobs_get_leftover_gpus_only():
    # 1 GPU. H (strict, 1000 s by 500) cannot finish even alone (0 + 1030 > 500): hopeless, not
    # guaranteed. B (best effort) has more GPU-time left (2030 against 1030) but goes first.
    # On 2 GPUs H runs on the one B leaves.
    for gpus, started in ((1, ["B"]), (2, ["B", "H"])):
        policy = chronus(lease=600.0, headroom=0.0)
        scheduler = Scheduler(Cluster.uniform(1, gpus), policy)
        scheduler.submit(job("H", deadlines=[(500, 10)]))
        scheduler.submit(job("B", duration=2000))
        plan = run_round(scheduler, 0.0)
        assert policy.selector.tier("H") is Tier.HOPELESS and policy.selector.guarantees == {}
        assert sorted(d.job_id for d in plan.decisions if str(d.action) == "start") == started


def test_an_unguaranteed_job_turns_hopeless_when_its_last_deadline_passes_out_of_reach():
    # 1 GPU, headroom 1 (no guarantees). S (best effort, 900 s) goes before T (1000 s by 1500):
    # 930 < 1030 GPU-seconds. At 600 T still needs 1030 s: 1630 > 1500, hopeless from then on.
    policy = chronus(lease=600.0, headroom=1.0)
    scheduler = Scheduler(Cluster.uniform(1, 1), policy)
    scheduler.submit(job("T", deadlines=[(1500, 10)]))
    scheduler.submit(job("S", duration=900))
    moves = advance(scheduler, 0.0)
    assert [s.id for s in moves.started] == ["S"] and policy.selector.tier("T") is Tier.SPOT
    assert "T" in scheduler.select(600.0) and policy.selector.tier("T") is Tier.HOPELESS


def test_restore_keeps_a_running_guaranteed_job_and_replans_it():
    # 2 nodes x 4 GPUs, lease 600 s. A (2 GPUs, estimated 3000 s, 500 s done, guaranteed 6000)
    # runs on node0 GPUs 0, 1 at 1000. Restored, it has paid one start: service 500 + 60, so
    # remaining 3000 + 60 - 560 = 2500 s: ceil(2560 / 600) = 5 leases before floor(6000/600) =
    # 10, from the current lease 1 on: the latest five, 5..9. Not in lease 1: ahead of its
    # plan, running on as spare capacity; P (4 GPUs, best effort) takes 4 of the 6 free GPUs.
    a = job("A", gpus=2, duration=3000, deadlines=[(6000, 1)])
    p = job("P", gpus=4, submit=100, duration=1200)
    policy = chronus(lease=600.0)
    estimator = Fixed({"A": 3000.0, "P": 1200.0})
    scheduler = Scheduler(Cluster.uniform(2, 4), policy, estimator=estimator)
    state = scheduler.restore(
        a,
        1000.0,
        work_done=500.0,
        guaranteed=DeadlineOption(6000.0, 1.0),
        placement={"node0": [0, 1]},
    )
    scheduler.restore(p, 1000.0)
    assert state.remaining(1000.0) == 2500.0 and scheduler.allocator.free_gpus() == 6
    plan = run_round(scheduler, 1000.0)
    assert policy.selector.guarantees == {"A": DeadlineOption(6000.0, 1.0)}
    assert policy.selector.booked == {"A": (5, 6, 7, 8, 9)} and plan.solver["demoted"] == []
    assert policy.selector.tier("A") is Tier.AHEAD
    decisions = {d.job_id: d for d in plan.decisions}
    assert str(decisions["A"].action) == "continue"
    assert decisions["A"].placement == {"node0": (0, 1)}
    assert decisions["A"].guaranteed and decisions["A"].deadline == 6000.0
    assert str(decisions["P"].action) == "start" and not decisions["P"].guaranteed
    assert sum(len(g) for g in decisions["P"].placement.values()) == 4
    assert plan.lease_plan == {"A": (3000.0, 3600.0, 4200.0, 4800.0, 5400.0)}


def test_deadline_window_takes_in_the_lease_a_deadline_falls_in_when_the_last_piece_fits():
    # Lease 600 s, deadline 1000: lease 0 ends by it, 400 s of lease 1 are before it.
    assert deadline_window(1000.0, 600.0, 760.0) == (2, 2)  # last piece 160 s fits in 400
    assert deadline_window(1000.0, 600.0, 1100.0) == (1, 2)  # 500 s does not: refused
    assert deadline_window(1000.0, 600.0, 400.0) == (2, 1)  # exactly fits
    assert deadline_window(1200.0, 600.0, 700.0) == (2, 2)  # on a lease end: whole leases only
    assert deadline_window(1000.0, 600.0, 760.0, 30.0) == (2, 2)  # 160 + 30 s to spare
    assert deadline_window(1000.0, 600.0, 980.0, 30.0) == (1, 2)  # 380 + 30 > 400
    assert block_end((0, 1), 1000.0, 600.0) == (2, 1000.0)  # planned in lease 1: ends at 1000
    assert block_end((0,), 1000.0, 600.0) == (1, 600.0)
    assert room((0, 1, 2), 1000.0, 600.0) == 1000.0


def test_a_guarantee_uses_the_part_of_a_lease_before_its_deadline():
    # 1 GPU, lease 600 s, no headroom, guard 100 s. G (700 s by 1000): 730 s with its start, 760
    # with a restart allowance: two leases, the second 160 s, which fits with a restart and the
    # guard to spare (160 + 30 + 100 <= 400) in the 400 s of lease 1 before 1000: guaranteed
    # leases 0 and 1 (counting whole leases only, it had one: refused). Its trigger is
    # 1000 - 730 - 30 - 100 = 140; B (best effort) runs until then, and G from then on. At 600
    # it has 270 s left: lease 1 (counting whole leases, it had none left: demoted, although
    # done at 870).
    policy = chronus(lease=600.0, headroom=0.0, guard=100.0)
    scheduler = Scheduler(Cluster.uniform(1, 1), policy)
    scheduler.submit(job("G", duration=700, deadlines=[(1000, 10)]))
    scheduler.submit(job("B", duration=5000))
    moves = advance(scheduler, 0.0)
    assert policy.selector.booked == {"G": (0, 1)} and [s.id for s in moves.started] == ["B"]
    assert policy.selector.next_trigger() == 140.0
    moves = advance(scheduler, 140.0)
    assert [s.id for s in moves.started] == ["G"] and [s.id for s in moves.preempted] == ["B"]
    plan = run_round(scheduler, 600.0)
    assert policy.selector.booked == {"G": (1,)} and plan.solver["demoted"] == []
    assert plan.lease_plan == {"G": (600.0,)} and policy.selector.tier("G") is Tier.MUST_RUN
    assert scheduler.jobs["G"].remaining(600.0) == 270.0  # done at 870 <= 1000
