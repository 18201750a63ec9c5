"""What the round asks a policy beyond its order (``policies/base.py``), hand-computed: a policy
that is only a sort key gets every hook's default (no guarantees, sizes by the deadline alone),
and Chronus answers each from its lease plan. The round and the service ask only through these.

Arithmetic as in test_admission.py: a restart costs 30 s x (1 + log2 GPUs); a pending job's
remaining work counts the start it still needs, and the plan one more restart; a deadline D may
use the leases before floor(D / lease); at headroom 0.5 a new guarantee may use half a lease's
GPUs, or any free GPUs if it is wider and what is free before its deadline also holds the
pool's waiting work."""

from __future__ import annotations

import copy
from dataclasses import replace

from core_helpers import chronus, job

from chronus_py.jobs.model import Cluster
from chronus_py.jobs.overhead import restart_overhead
from chronus_py.jobs.state import JobState
from chronus_py.policies.base import OrderPolicy, Sizes
from chronus_py.policies.chronus import POOL
from chronus_py.round import run_round
from chronus_py.scheduler import Scheduler


class Shortest(OrderPolicy):
    """The whole of a sort-key policy: a name and a key."""

    name = "shortest"

    def key(self, job: JobState, now: float) -> tuple:
        return (job.remaining(now), job.seq)


def sizes(j, seconds: dict[int, float]) -> Sizes:
    return Sizes(
        j,
        {
            n: JobState(job=replace(j, gpus=n), seq=-1, estimate=w, overhead=restart_overhead(n))
            for n, w in seconds.items()
        },
    )


ELASTIC = {1: 4000.0, 2: 2000.0, 4: 1000.0, 8: 900.0}


def test_a_sort_key_policy_runs_the_round_with_every_default():
    # S (2 GPUs, 1060 s left) ranks before B (4 GPUs, 1120 s); B does not fit beside it.
    policy = Shortest()
    scheduler = Scheduler(Cluster.uniform(1, 4), policy)
    scheduler.submit(job("S", gpus=2, deadlines=[(3000, 1)]))
    scheduler.submit(job("B", gpus=4))
    plan = run_round(scheduler, 0.0)
    assert {d.job_id: str(d.action) for d in plan.decisions} == {"S": "start", "B": "wait"}
    assert plan.lease_plan == {} and plan.solver is None and plan.lease_end is None
    s, b = scheduler.jobs["S"], scheduler.jobs["B"]
    assert policy.probe(s, 0.0) is None and s.guaranteed is None
    assert policy.refusal(s, 0.0) == "policy shortest gives no guarantees"
    assert policy.refusal(b, 0.0) == "best-effort job: no deadline to guarantee"
    assert policy.solver_stats() is None and not policy.replan_due(1e9)


def test_the_default_size_is_the_smallest_that_meets_the_deadline_alone():
    view = Scheduler(Cluster.uniform(1, 8), Shortest()).view(0.0)
    policy = Shortest()
    # By 1000: 1 GPU needs 30 + 4000, 2 GPUs 60 + 2000, 4 GPUs 90 + 1000 = 1090, 8 GPUs
    # 120 + 900 = 1020: none; the fastest is 8. By 1100: 4 GPUs is the smallest that makes it.
    assert policy.size(sizes(job("E", deadlines=[(1000, 1)]), ELASTIC), view) == 8
    assert policy.size(sizes(job("E", deadlines=[(1100, 1)]), ELASTIC), view) == 4
    # Two sizes as fast: the smaller. Best-effort: the largest. A rigid job: its one size.
    tie = {2: 3000.0, 4: 2000.0, 8: 2000.0}
    assert policy.size(sizes(job("E", deadlines=[(1000, 1)]), tie), view) == 4
    assert policy.size(sizes(job("E"), ELASTIC), view) == 8
    assert policy.size(sizes(job("R", gpus=2, deadlines=[(10, 1)]), {2: 600.0}), view) == 2


def test_chronus_sizes_by_what_its_plan_can_guarantee():
    # 1 node x 8 GPUs, lease 600 s, headroom 0.5; E's deadline 1800 gives it leases 0-2.
    # Empty plan: 1 GPU needs 4000 + 60 s (7 leases), 2 GPUs 2120 s (4 leases), 4 GPUs 1180 s
    # (2 leases of 4 GPUs, within the headroom): 4.
    policy = chronus(lease=600.0, headroom=0.5)
    scheduler = Scheduler(Cluster.uniform(1, 8), policy)
    scheduler.select(0.0)
    e = job("E", deadlines=[(1800, 1)])
    assert policy.size(sizes(e, ELASTIC), scheduler.view(0.0)) == 4
    # C (4 GPUs, 1500 + 180 s: leases 0-2) takes the 4 GPUs new guarantees may use in each, and
    # 8 GPUs would need a lease no guarantee uses: no size can be guaranteed, so the largest,
    # where the deadline alone would give 4 (90 + 1000 <= 1800).
    scheduler.submit(job("C", gpus=4, duration=1500, deadlines=[(1800, 1)]))
    scheduler.select(0.0)
    assert scheduler.jobs["C"].guaranteed is not None
    assert policy.size(sizes(e, ELASTIC), scheduler.view(0.0)) == 8
    assert Shortest().size(sizes(e, ELASTIC), scheduler.view(0.0)) == 4


def test_chronus_says_which_test_refused_a_guarantee():
    # As test_admission's first case: A and B hold leases 1-4, C lease 0, and D (2 GPUs,
    # 1120 s by 3000) would fit leases 3 and 4 but for the headroom.
    policy = chronus(lease=600.0, headroom=0.5)
    scheduler = Scheduler(Cluster.uniform(1, 4), policy)
    for j in [
        job("A", gpus=2, deadlines=[(3000, 10)]),
        job("B", gpus=2, deadlines=[(3000, 10)]),
        job("C", duration=500, deadlines=[(1800, 10)]),
        job("D", gpus=2, deadlines=[(3000, 10)]),
        job("H", duration=1000, deadlines=[(500, 1)]),
    ]:
        scheduler.submit(j)
    scheduler.select(0.0)
    d = scheduler.jobs["D"]
    assert policy.probe(d, 0.0) is None
    assert policy.refusal(d, 0.0) == (
        f"{POOL}; held back by the headroom (each lease keeps 50% of its GPUs from new "
        "guarantees for the pool)"
    )
    assert policy.refusal(d, 0.0, detail=False) == POOL
    assert policy.refusal(scheduler.jobs["H"], 0.0) == (
        "cannot meet its last deadline even alone; runs on leftover GPUs"
    )
    stats = policy.solver_stats()
    assert stats.rounds == 1 and stats.admitted_at_arrival + stats.admitted_on_retry == 3


def test_chronus_replans_elsewhere_and_commits_later():
    # One lease of 600 s: the re-plan is due at 600. Computed on a copy (the service's forked
    # child), it is committed with the job that arrived meanwhile.
    policy = chronus(lease=600.0, headroom=0.0)
    scheduler = Scheduler(Cluster.uniform(1, 4), policy)
    scheduler.submit(job("A", gpus=2, duration=1000, deadlines=[(3000, 1)]))
    scheduler.select(0.0)
    assert not policy.replan_due(599.0) and policy.replan_due(600.0)
    result = copy.deepcopy(policy).replan(scheduler.active, 600.0)
    policy.replan_started(600.0)
    assert not policy.replan_due(600.0)  # admissions meanwhile go on against the old plan
    late = scheduler.submit(job("L", gpus=2, submit=600.0, duration=500, deadlines=[(3000, 1)]))
    scheduler.select(600.0)
    assert late.guaranteed is not None
    policy.commit_replan(result, [late], 600.0)
    assert set(policy.lease_report().lease_plan) == {"A", "L"}
    assert not policy.replan_due(600.0)
    policy.replan_started(1200.0)
    policy.commit_replan(None, [], 1200.0)  # a failed re-plan is due again
    assert policy.replan_due(1200.0)
