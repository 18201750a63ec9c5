"""The service's calls into the core scheduler: a dry run answers what admission then does,
and a withdrawn job leaves no trace in the queues or on the GPUs."""

from __future__ import annotations

import pytest

from chronus_py.jobs.model import Cluster, DeadlineOption, Job, JobKind
from chronus_py.jobs.state import Status
from chronus_py.policies.chronus import POOL
from chronus_py.service import rounds


def scheduler(estimates):
    return rounds.scheduler_for(
        rounds.SchedulerSettings(options={"headroom": 0.5, "backend": "greedy"}),
        Cluster.uniform(2, 8),
        estimates=estimates,
    )


def slo(job_id: str, gpus: int, work: float, *deadlines: float) -> Job:
    return Job(
        job_id,
        "t",
        gpus,
        0.0,
        JobKind.STRICT_SLO if len(deadlines) == 1 else JobKind.SOFT_SLO,
        tuple(DeadlineOption(d, 1.0) for d in deadlines),
        work,
    )


def test_probe_answers_what_admit_does_without_booking():
    estimates = {"a": 3600.0, "b": 6000.0}
    s = scheduler(estimates)
    a = slo("a", 8, 3600.0, 9000.0)
    probed = rounds.probe(s, a, 3600.0, 0.0)
    assert probed.decision == rounds.GUARANTEED and probed.deadline.at == 9000.0
    assert s.policy.lease_report().lease_plan == {} and not s.jobs
    _, admitted = rounds.admit(s, a, 0.0)
    assert admitted.deadline == probed.deadline
    # The plan now holds a's capacity, 8 GPUs (all that new guarantees may use, at headroom 0.5)
    # in 4 of the 8 leases that start before 9000; b needs 6 of them.
    # Without the headroom all 8 leases have 8 GPUs free: the answer says the headroom binds,
    # as the plan's standing does (issue 28); what a backend publishes after a round does not
    # search for it.
    b = slo("b", 8, 6000.0, 9000.0)
    held = f"{POOL}; held back by the headroom (each lease keeps 50% of its GPUs from new "
    probed = rounds.probe(s, b, 6000.0, 0.0)
    assert probed.decision == rounds.NOT_GUARANTEED and probed.reason.startswith(held)
    _, admitted = rounds.admit(s, b, 0.0)
    assert admitted == probed
    assert rounds.reports(s, 0.0)["b"].reason == POOL


def test_a_promise_at_a_unix_time_names_it_exactly():
    # Before: "guaranteed to finish by 1.79602e+09", 200.5 s from the promise it named.
    now = 1_796_011_200.0
    s = scheduler({"a": 3600.0})
    a = Job("a", "t", 8, now, JobKind.STRICT_SLO, (DeadlineOption(now + 9000.5, 1.0),), 3600.0)
    assert rounds.probe(s, a, 3600.0, now).reason == "would be guaranteed to finish by 1796020200.5"
    assert rounds.admit(s, a, now)[1].reason == "guaranteed to finish by 1796020200.5"


def test_withdraw_frees_gpus_and_the_queue():
    estimates = {f"j{i}": 600.0 for i in range(3)}
    s = scheduler(estimates)
    for i in range(3):
        rounds.admit(s, Job(f"j{i}", "t", 8, 0.0, JobKind.BEST_EFFORT, duration=600.0), 0.0)
    decided = rounds.advance(s, 0.0)
    assert len(decided.started) == 2 and len(s.pending()) == 1
    waiting = s.pending()[0].id
    rounds.withdraw(s, waiting, 10.0)
    assert s.pending() == [] and waiting not in s.active
    running = next(iter(s.running))
    rounds.withdraw(s, running, 10.0)
    assert rounds.free_gpus(s) == 8 and running not in s.active


def test_a_replan_catches_up_in_steps_and_commits_what_one_step_would():
    # Two schedulers alike, each re-planned in a forked child at the lease end (600 s) while
    # four jobs arrive: one commits in one go, the other catches up a job per step first.
    plans = []
    for steps in (False, True):
        estimates = {"a": 3000.0, **{f"n{i}": 1200.0 for i in range(4)}}
        s = rounds.scheduler_for(
            rounds.SchedulerSettings(options={"headroom": 0.0, "lease": 600.0}),
            Cluster.uniform(2, 8),
            estimates=estimates,
        )
        rounds.admit(s, slo("a", 8, 3000.0, 20000.0), 0.0)
        assert rounds.replan_due(s, 600.0)
        replan = rounds.start_replan(s, 600.0)
        late = [slo(f"n{i}", 4, 1200.0, 9000.0 + 600.0 * i) for i in range(4)]
        answers = [rounds.admit(s, job, 600.0)[1] for job in late]
        assert all(a.decision == rounds.GUARANTEED for a in answers)
        result = rounds.replan_result(replan, s)
        committed = dict(s.policy.lease_report().lease_plan)
        if steps:
            for taken in range(1, 4):  # a budget of 0 s: one job per step, the plan unchanged
                assert not rounds.catch_up(s, replan, result, 600.0, 0.0)
                assert len(replan.taken) == taken
                assert s.policy.lease_report().lease_plan == committed
            assert rounds.catch_up(s, replan, result, 600.0, 0.0)
        rounds.commit_replan(s, replan, result, 600.0)
        plan = s.policy.lease_report().lease_plan
        assert set(plan) == {"a", "n0", "n1", "n2", "n3"}
        assert not rounds.replan_due(s, 600.0)
        plans.append((plan, rounds.guarantees(s), [st.id for st in s.pending()]))
    assert plans[0] == plans[1]


@pytest.mark.parametrize("steps", [False, True])
@pytest.mark.parametrize(("work", "kept"), [(300.0, True), (310.0, False)])
def test_a_replan_keeps_the_promise_of_a_job_that_started_before_its_commit(steps, work, kept):
    # Issue 27 (Slurm 24.11, slurm-54): the child re-planned a guaranteed job it saw pending,
    # with the cluster manager's start latency charged, and dropped it as hopeless; the
    # committed plan started it meanwhile, and the commit withdrew the promise of the running
    # job. One node of 4 GPUs, 100 s leases; each start is charged 90 s of restart and 250 s
    # of latency. "a" (4 GPUs, due at 1000) is promised at 0 while a best-effort job runs; its
    # laxity trigger comes at 20, but no round runs until 600 (rounds lag under load, as
    # there). Seen pending at the fork at 600, its work plus the 340 s start outgrow leases
    # 6-9; the committed plan starts it at 600, and its run begins at 605, which pays the
    # latency. At the commit (630): 300 s of work then ends by 995 and leases 6-9 hold it, so
    # the promise stays and it runs on; 310 s would end at 1005: withdrawn, and the pool job
    # takes its GPUs back.
    s = rounds.scheduler_for(
        rounds.SchedulerSettings(options={"headroom": 0.0, "lease": 100.0, "guard": 0.0}),
        Cluster.uniform(1, 4),
        estimates={"a": work, "b": 5000.0},
        start_latency=lambda: 250.0,
    )
    rounds.admit(s, Job("b", "t", 4, 0.0, JobKind.BEST_EFFORT, duration=5000.0), 0.0)
    assert rounds.admit(s, slo("a", 4, work, 1000.0), 0.0)[1].decision == rounds.GUARANTEED
    rounds.advance(s, 0.0)
    replan = rounds.start_replan(s, 600.0)
    assert s.jobs["a"].status is Status.PENDING
    assert [j.id for j in rounds.advance(s, 600.0, replan=replan).started] == ["a"]
    rounds.run_began(s, "a", 605.0, 610.0)
    result = rounds.replan_result(replan, s)
    assert "a" not in result.selector.booked  # the child, on the fork, dropped it
    if steps:  # a step per job: "a" started and "b" stopped since the fork
        assert not rounds.catch_up(s, replan, result, 630.0, 0.0)
        assert rounds.catch_up(s, replan, result, 630.0, 0.0)
    rounds.commit_replan(s, replan, result, 630.0)
    plan = s.policy.lease_report().lease_plan
    assert plan.get("a") == ((600.0, 700.0, 800.0, 900.0) if kept else None)
    assert s.policy.solver_stats().demoted == ([] if kept else ["a"])
    moves = rounds.advance(s, 630.0)
    assert [j.id for j in moves.preempted] == ([] if kept else ["a"])
    assert ("a" in rounds.guarantees(s)) is kept
