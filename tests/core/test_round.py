"""The decisions of ``run_round``: start, continue, preempt and wait, each with its reason, and the
lease plan beside them; hand-computed on 2 GPUs with a 600 s lease."""

from __future__ import annotations

import pytest
from core_helpers import chronus, job

from chronus_py.errors import InputError
from chronus_py.jobs.model import Cluster
from chronus_py.policies import make_policy
from chronus_py.round import run_round
from chronus_py.scheduler import Scheduler


def decisions(plan):
    return {d.job_id: (str(d.action), d.reason) for d in plan.decisions}


SPOT = "runs on spare capacity by remaining GPU-time"
AHEAD = "guaranteed, ahead of its lease plan (capacity is held for it later)"
DUE = "guaranteed, due in this lease"


def test_start_continue_wait_then_preempt_for_a_guarantee_that_turns_due():
    # 1 node x 2 GPUs, lease 600 s, no headroom, guard 0.
    # 0:   L (5000 s) and M (4000 s), best effort, 1 GPU each: both start.
    # 100: G (2 GPUs, 400 s by 1200) arrives mid-lease: remaining 400 + 60, plus a restart =
    #      520 s, 1 lease in [1, floor(1200/600) = 2): lease 1, guaranteed. Planned later: it
    #      waits (ahead), L and M continue.
    # 600: G's lease has come, one block ending at its deadline lease: its trigger is
    #      1200 - 460 - 60 - 0 = 680, the next decision (before the lease end 1200).
    # 680: G must run: it takes both GPUs, L and M are preempted; it ends at 1140 <= 1200.
    policy = chronus(lease=600.0, headroom=0.0, guard=0.0)
    scheduler = Scheduler(Cluster.uniform(1, 2), policy)
    scheduler.submit(job("L", duration=5000))
    scheduler.submit(job("M", duration=4000))
    plan = run_round(scheduler, 0.0)
    assert decisions(plan) == {
        "L": ("start", f"{SPOT}; fits, in chronus order"),
        "M": ("start", f"{SPOT}; fits, in chronus order"),
    }
    assert plan.lease_end == 600.0 and plan.next_decision == 600.0 and plan.lease_plan == {}

    scheduler.submit(job("G", gpus=2, submit=100, duration=400, deadlines=[(1200, 5)]))
    plan = run_round(scheduler, 100.0)
    assert decisions(plan) == {
        "L": ("continue", f"{SPOT}; fits, in chronus order"),
        "M": ("continue", f"{SPOT}; fits, in chronus order"),
        "G": ("wait", f"{AHEAD}; needs 2 GPUs, 0 free after this round"),
    }
    assert plan.lease_plan == {"G": (600.0,)} and plan.next_decision == 600.0
    g = {d.job_id: d for d in plan.decisions}["G"]
    assert g.guaranteed and g.deadline == 1200.0 and g.placement == {}

    plan = run_round(scheduler, 600.0)
    assert plan.next_decision == 680.0 and plan.lease_end == 1200.0
    assert decisions(plan)["G"][0] == "wait"

    plan = run_round(scheduler, 680.0)
    assert decisions(plan) == {
        "L": ("preempt", f"{SPOT}; its GPUs go to jobs ahead in chronus order"),
        "M": ("preempt", f"{SPOT}; its GPUs go to jobs ahead in chronus order"),
        "G": ("start", f"{DUE}; fits, in chronus order"),
    }
    assert {d.job_id: d.placement for d in plan.decisions}["G"] == {"node0": (0, 1)}
    assert [d.job_id for d in plan.decisions] == ["L", "M", "G"]  # submission order
    assert plan.next_decision == 1200.0
    assert plan.solver == {
        "backend": "greedy",
        "status": plan.solver["status"],
        "rounds": 2,
        "fallbacks": 0,
        "admitted": 1,
        "demoted": [],
    }
    assert plan.to_dict()["lease_plan"] == {"G": [600.0]}


def test_a_policy_without_leases_plans_no_leases():
    # SRTF on 1 GPU: A (300 s) runs; at 100 B (100 s, 130 with its start) has less left than
    # A (300 + 30 - 100 = 230): A is preempted; C (1000 s) waits for a GPU.
    scheduler = Scheduler(Cluster.uniform(1, 1), make_policy("srtf"))
    scheduler.submit(job("A", duration=300, deadlines=[(900, 1)]))
    run_round(scheduler, 0.0)
    scheduler.submit(job("B", submit=100, duration=100))
    scheduler.submit(job("C", submit=100, duration=1000))
    plan = run_round(scheduler, 100.0)
    assert decisions(plan) == {
        "A": ("preempt", "its GPUs go to jobs ahead in srtf order"),
        "B": ("start", "fits, in srtf order"),
        "C": ("wait", "needs 1 GPUs, 0 free after this round"),
    }
    assert plan.lease_end is None and plan.next_decision is None and plan.solver is None
    assert plan.lease_plan == {} and plan.timings.keys() == {"round_s"}
    assert {d.job_id: d.deadline for d in plan.decisions} == {"A": 900.0, "B": None, "C": None}


@pytest.mark.parametrize(
    "name, options, message",
    [
        (
            "lottery",
            {},
            "state.yaml: unknown policy 'lottery' (have: fifo, srtf, srtf-gpu, edf, las, chronus, "
            "elastic-chronus, elasticflow, elastic-edf)",
        ),
        ("fifo", {"lease": 600}, "state.yaml: fifo has no option 'lease' (have: none)"),
        ("las", {"queues": 2}, "state.yaml: las has no option 'queues' (have: thresholds)"),
        ("chronus", {"headroom": 2}, "state.yaml: headroom: must be <= 1, got 2"),
        ("chronus", {"lease": "20m"}, "state.yaml: lease: expected a number, got '20m'"),
    ],
)
def test_make_policy_refuses_bad_names_and_options_naming_them(name, options, message):
    with pytest.raises(InputError) as raised:
        make_policy(name, options, source="state.yaml")
    assert str(raised.value) == message


def test_make_policy_builds_each_policy_with_its_options():
    assert [make_policy(n).name for n in ("fifo", "srtf", "srtf-gpu", "edf", "las", "chronus")] == [
        "fifo",
        "srtf",
        "srtf-gpu",
        "edf",
        "las",
        "chronus",
    ]
    assert make_policy("las", {"thresholds": (10.0,)}).thresholds == (10.0,)
    assert make_policy("chronus", {"lease": 600, "guard": 0}).settings.lease == 600.0
