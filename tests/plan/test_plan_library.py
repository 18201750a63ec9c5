"""The library API a cluster manager keeps between rounds (submit, restore, report_progress,
finish, plan, decisions), and that ``chronus plan`` goes through the same Scheduler."""

from __future__ import annotations

import json

import pytest
from plan_helpers import base, write_state

from chronus_py.cli import main
from chronus_py.estimates import Fixed
from chronus_py.jobs.model import Cluster, DeadlineOption, Job, JobKind
from chronus_py.jobs.state import Status
from chronus_py.plan import Action
from chronus_py.policies import SRTF, Chronus
from chronus_py.round import advance, decide, run_round
from chronus_py.scheduler import Scheduler
from chronus_py.selector import ChronusSettings


class Const:
    """Every job's estimate is the same figure."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def estimate(self, job) -> float:
        return self.seconds

    def uncertainty(self, job) -> float:
        return 0.0


def be(job_id: str, gpus: int, submit: float = 0.0) -> Job:
    return Job(job_id, "t", gpus, submit, JobKind.BEST_EFFORT)


def test_submit_plan_progress_finish_plan():
    estimates = {"a": 100.0, "b": 1000.0, "c": 50.0}
    sched = Scheduler(Cluster.uniform(1, 4), SRTF(), estimator=Fixed(estimates))
    sched.submit(be("a", 2))
    sched.submit(be("b", 4))
    first = advance(sched, 0.0)
    assert [s.id for s in first.started] == ["a"]
    decisions = decide(sched, first)
    assert [(d.job_id, d.action) for d in decisions] == [("a", Action.START), ("b", Action.WAIT)]
    assert decisions[0].placement == {"node0": (0, 1)} and decisions[0].deadline is None
    assert decisions[1].reason == "needs 4 GPUs, 2 free after this round"
    # The manager reports observed progress: 80 s of a's 100 s done at t=40.
    state = sched.report_progress("a", 80.0, 40.0)
    assert state.remaining(40.0) == pytest.approx(20.0)
    sched.submit(be("c", 2, 40.0))
    second = advance(sched, 40.0)
    assert [d.action for d in decide(sched, second)] == [Action.CONTINUE, Action.WAIT, Action.START]
    sched.finish("a", 60.0)
    sched.finish("c", 60.0)
    third = advance(sched, 60.0)
    assert [(d.job_id, d.action) for d in decide(sched, third)] == [("b", Action.START)]
    assert sched.jobs["a"].status is Status.FINISHED


def test_progress_of_a_pending_job_reorders_the_queue():
    estimates = {"a": 500.0, "b": 400.0}
    sched = Scheduler(Cluster.uniform(1, 2), SRTF(), estimator=Fixed(estimates))
    sched.submit(be("a", 2))
    sched.submit(be("b", 2))
    assert [s.id for s in sched.pending()] == ["b", "a"]
    sched.report_progress("a", 300.0, 0.0)  # a was preempted elsewhere after 300 s of work
    assert [s.id for s in sched.pending()] == ["a", "b"]


def test_restore_running_job_holds_its_gpus():
    sched = Scheduler(Cluster.uniform(2, 4), SRTF(), estimator=Const(1000.0))
    state = sched.restore(be("r", 3), 500.0, work_done=400.0, placement={"node1": [0, 2, 3]})
    assert state.status is Status.RUNNING and state.placement == {"node1": (0, 2, 3)}
    assert state.remaining(500.0) == pytest.approx(600.0)
    assert sched.allocator.free_gpus() == 5
    with pytest.raises(ValueError, match="GPU 2 of node node1 is not free"):
        sched.restore(be("s", 1), 500.0, placement={"node1": [2]})
    assert set(sched.jobs) == {"r"} and not sched.pending()
    decided = advance(sched, 500.0)
    assert [(d.job_id, d.action) for d in decide(sched, decided)] == [("r", Action.CONTINUE)]


def test_restore_keeps_a_guarantee_that_is_one_of_the_options():
    sched = Scheduler(
        Cluster.uniform(1, 8), Chronus(ChronusSettings(lease=600.0)), estimator=Const(1200.0)
    )
    option = DeadlineOption(6000.0, 1.0)
    job = Job("g", "t", 8, 0.0, JobKind.STRICT_SLO, (option,))
    with pytest.raises(ValueError, match="not one of its options"):
        sched.restore(job, 100.0, guaranteed=DeadlineOption(5000.0, 1.0))
    state = sched.restore(job, 100.0, guaranteed=option)
    plan = run_round(sched, 100.0)
    assert state.guaranteed == option
    assert plan.decisions[0].guaranteed and plan.decisions[0].deadline == 6000.0
    assert "g" in plan.lease_plan and plan.lease_end == 600.0
    assert plan.solver is not None and plan.solver["rounds"] == 1


def test_cli_and_library_take_the_same_path(tmp_path, capsys):
    """The base state through ``chronus plan`` and through the Scheduler API by hand."""
    state = base()
    assert main(["plan", str(write_state(tmp_path, state))]) == 0
    cli = json.loads(capsys.readouterr().out)
    estimates = {"a": 3000.0, "b": 1200.0, "c": 900.0}
    sched = Scheduler(
        Cluster.uniform(2, 4),
        Chronus(ChronusSettings(lease=600.0, time_limit_s=0.2)),
        estimator=Fixed(estimates),
    )
    a = DeadlineOption(6000.0, 1.0)
    sched.restore(
        Job("a", "default", 2, 0.0, JobKind.STRICT_SLO, (a,)),
        1000.0,
        work_done=500.0,
        guaranteed=a,
        placement={"node0": [0, 1]},
    )
    sched.submit(Job("b", "default", 4, 100.0, JobKind.STRICT_SLO, (DeadlineOption(4000.0, 1.0),)))
    sched.submit(be("c", 1, 200.0))
    library = json.loads(run_round(sched, 1000.0).to_json())
    assert library == cli
