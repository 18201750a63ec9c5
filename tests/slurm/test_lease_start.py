"""A lease's due jobs start at its first round while its re-plan computes in a child process,
not once that plan is committed (issue 26, session 12: at 120x on a loaded machine the commit
and the round after it took most of a lease, and a guarantee that needed it broke). No Slurm."""

from __future__ import annotations

from chronus_py.jobs.model import Cluster, DeadlineOption, Job, JobKind
from chronus_py.service import rounds


def test_a_job_booked_in_the_new_lease_starts_before_its_replan_is_committed():
    # headroom 0: the 4-GPU job is not wider than the share, so the pool's long job does not
    # stand in its way (selector/admission._place); what is tested here is the lease's start
    s = rounds.scheduler_for(
        rounds.SchedulerSettings(options={"headroom": 0.0}),
        Cluster.uniform(1, 4),
        estimates={"a": 600.0, "c": 1e5},
    )
    pool = Job("c", "t", 4, 0.0, JobKind.BEST_EFFORT, duration=1e5)
    rounds.admit(s, pool, 0.0)
    assert [j.id for j in rounds.advance(s, 0.0).started] == ["c"]
    slo = Job("a", "t", 4, 0.0, JobKind.SOFT_SLO, (DeadlineOption(3 * 3600.0, 1.0),), 600.0)
    assert rounds.admit(s, slo, 0.0)[1].decision == rounds.GUARANTEED
    lease = rounds.lease_report(s)
    (first, *_) = lease.lease_plan["a"]
    assert first > lease.lease_end  # planned in a later lease: the pool job runs meanwhile
    assert not rounds.advance(s, 1.0).started
    replan = rounds.start_replan(s, first)
    moves = rounds.advance(s, first + 1.0)  # the lease's first round, the child still computing
    assert [j.id for j in moves.started] == ["a"] and [j.id for j in moves.preempted] == ["c"]
    rounds.commit_replan(s, replan, rounds.replan_result(replan, s), first + 2.0)
    assert rounds.is_running(rounds.active_job(s, "a"))
