"""A re-plan's catch-up re-plans the jobs a round started or stopped since its fork, handed
over by the rounds (``rounds.advance(..., replan=)``), instead of noting every job's starts
and stops at the fork and comparing them at every step of its commit (3-5 ms of CPU a step
at 8,500 jobs, issue 27 session 15): the same jobs, so the same plan is committed."""

from __future__ import annotations

import gc

import pytest

from chronus_py.jobs.model import Cluster, DeadlineOption, Job, JobKind
from chronus_py.service import rounds


@pytest.fixture
def thawed():
    """``start_replan`` freezes the collector's objects, as the server does; thawed after."""
    yield
    gc.unfreeze()


class Counted(dict):
    """The scheduler's active jobs, counting which of them are looked up by ``get``."""

    def __init__(self, jobs):
        super().__init__(jobs)
        self.got: set[str] = set()

    def get(self, key, default=None):
        self.got.add(key)
        return super().get(key, default)


def marks(s) -> dict[str, tuple[int, int]]:
    return {i: (state.starts, state.preemptions) for i, state in s.active.items()}


def forked(*, steps: bool):
    """One node runs best-effort "b", the other four 1-GPU best-effort jobs; "a" (4 GPUs,
    guaranteed, due at 1000) waits for leases 6-9 of 100 s. The re-plan is forked at 600,
    and the lease's first round starts "a" and stops "b" meanwhile (the child, which saw "a"
    waiting with its start latency charged, drops it: see ``test_rounds``). Committed at 630
    in one go or a job per step. Returns the scheduler and the jobs looked up by ``get``
    during the catch-up and commit."""
    estimates = {"a": 300.0, "b": 5000.0, **{f"x{i}": 10000.0 for i in range(4)}}
    s = rounds.scheduler_for(
        rounds.SchedulerSettings(options={"headroom": 0.0, "lease": 100.0, "guard": 0.0}),
        Cluster.uniform(2, 4),
        estimates=estimates,
        start_latency=lambda: 250.0,
    )
    rounds.admit(s, Job("b", "t", 4, 0.0, JobKind.BEST_EFFORT, duration=5000.0), 0.0)
    for i in range(4):
        rounds.admit(s, Job(f"x{i}", "t", 1, 0.0, JobKind.BEST_EFFORT, duration=1e4), 0.0)
    deadline = (DeadlineOption(1000.0, 1.0),)
    a = Job("a", "t", 4, 0.0, JobKind.STRICT_SLO, deadline, 300.0)
    assert rounds.admit(s, a, 0.0)[1].decision == rounds.GUARANTEED
    assert len(rounds.advance(s, 0.0).started) == 5
    at_fork = marks(s)
    replan = rounds.start_replan(s, 600.0)
    moves = rounds.advance(s, 600.0, replan=replan)
    assert [j.id for j in moves.started] == ["a"] and [j.id for j in moves.preempted] == ["b"]
    assert rounds.advance(s, 601.0, replan=replan).started == ()  # nothing moves again
    # what comparing every job's starts and stops with the fork's finds
    assert replan.moved == {i for i, mark in marks(s).items() if at_fork[i] != mark}
    rounds.run_began(s, "a", 605.0, 610.0)
    result = rounds.replan_result(replan, s)
    s.active = counted = Counted(s.active)
    if steps:  # a step per job: "a" started and "b" stopped since the fork
        assert not rounds.catch_up(s, replan, result, 630.0, 0.0)
        assert rounds.catch_up(s, replan, result, 630.0, 0.0)
        assert not replan.moved  # re-planned as they are: not again at the commit
    rounds.commit_replan(s, replan, result, 630.0, caught_up=steps)
    s.active = dict(counted)
    return s, counted.got


@pytest.mark.parametrize("steps", [False, True])
def test_a_catch_up_looks_only_at_the_jobs_the_rounds_moved(thawed, steps):
    s, looked_at = forked(steps=steps)
    assert looked_at <= {"a", "b"}
    # "a" was re-planned as it runs, keeping its promise (the child had dropped it)
    assert rounds.lease_report(s).lease_plan.get("a") == (600.0, 700.0, 800.0, 900.0)
    assert "a" in rounds.guarantees(s)
