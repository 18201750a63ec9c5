"""One event loop for rigid and elastic replays: the clock's arrival groups and completions, and
the elastic scheduler behind the loop's stage interface (hand-computed cases)."""

from __future__ import annotations

import math

import pytest

from chronus_py.engine import replay
from chronus_py.engine.clock import Clock
from chronus_py.engine.elastic import ElasticScheduler
from chronus_py.jobs.model import Cluster, DeadlineOption, Job, JobKind
from chronus_py.jobs.overhead import make_overhead
from chronus_py.policies.elastic import ElasticEDF
from chronus_py.round import advance

FREE = make_overhead("pause", 0.0)  # moves cost nothing: finish times are plain arithmetic


def elastic(id, submit, iterations, deadline, sizes=(1, 2, 4), rates=(1.0, 2.0, 4.0)) -> Job:
    return Job(
        id,
        "t",
        sizes[-1],
        submit,
        JobKind.STRICT_SLO,
        (DeadlineOption(deadline, 1.0),),
        iterations / rates[-1],
        iterations,
        "m",
        64,
        tuple(sizes),
        tuple(rates),
    )


def test_arrivals_come_in_groups_at_the_last_submission_of_their_window():
    jobs = [elastic(f"j{t}", t, 10, 1000) for t in (0, 10, 50, 70, 130, 130)]
    clock = Clock(jobs, window=60.0)
    assert [(at, [j.id for j in group]) for at, group in clock.groups] == [
        (50, ["j0", "j10", "j50"]),
        (70, ["j70"]),
        (130, ["j130", "j130"]),
    ]
    assert clock.next_time(None) == 50 and clock.pop_arrivals(49.9) == []
    assert [j.id for j in clock.pop_arrivals(70)] == ["j0", "j10", "j50", "j70"]
    assert [len(group) for _, group in Clock(jobs).groups] == [1, 1, 1, 1, 2]


def test_completions_within_a_tolerance_are_taken_only_when_due():
    clock = Clock([])
    clock.add_completion(10.5, "a", 1)
    clock.add_completion(12.0, "b", 1)
    assert clock.pop_completions(10.0) == []
    assert clock.pop_completions(10.0, 1.0, lambda job, run, now: False) == []
    assert clock.next_time(None) == 10.5  # held back, still where it was
    assert clock.pop_completions(10.0, 1.0, lambda job, run, now: job == "a") == [("a", 1)]
    # a stale completion never makes an instant of its own when the stage says it is not live
    assert clock.next_time(None, live=lambda job, run: False) == math.inf
    assert clock.completions == []


def test_a_resized_job_s_completion_moves_and_the_stale_one_makes_no_instant():
    # a runs alone on 4 GPUs (400 iterations: done at 100); b (earlier deadline, at most 2 GPUs)
    # arrives at 50 and EDF shrinks a to 2: a has 200 left at rate 2, b is done at 100; then a
    # grows back to 4 with 100 left: done at 125. Its first completion (100) and its completion
    # at size 2 (150) are stale: the loop wakes at 0, 50, 100 and 125 only.
    jobs = [elastic("a", 0, 400, 1000), elastic("b", 50, 100, 200, (1, 2), (1.0, 2.0))]
    result = replay(jobs, Cluster.uniform(1, 4), ElasticEDF(), overhead=FREE)
    a, b = result.jobs
    assert (a.finish, b.finish) == (125.0, 100.0)
    assert (a.resizes, a.starts, a.preemptions) == (2, 1, 0)
    assert result.events == 4


def test_an_elastic_job_is_done_within_a_millionth_of_its_work():
    # c (1e6 iterations at 1 per second) would complete at 1e6; the arrival at 999,998.5 finds
    # 1.5 iterations left (more than a millionth: not done), the one at 999,999.5 finds 0.5 left
    # (done then, not at 1e6); d ran on 2 GPUs (2 of 10 done), takes all 4 with 8 left, then e
    jobs = [
        elastic("c", 0, 1e6, 2e6, (1,), (1.0,)),
        elastic("d", 999_998.5, 10, 2e6),
        elastic("e", 999_999.5, 10, 2e6),
    ]
    result = replay(jobs, Cluster.uniform(1, 4), ElasticEDF(), overhead=FREE)
    c, d, e = result.jobs
    assert c.finish == 999_999.5
    assert (d.finish, e.finish) == (1_000_001.5, 1_000_004.0)


def test_the_elastic_scheduler_takes_the_rigid_schedulers_calls():
    stage = ElasticScheduler(Cluster.uniform(1, 4), ElasticEDF(), overhead=FREE)
    a = stage.submit(elastic("a", 0, 400, 1000))
    assert stage.next_wakeup(0.0) is None and not stage.active  # seen at the next decision
    moves = advance(stage, 0.0)
    assert moves.started == (a,) and a.size == 4 and stage.running == {"a": a}
    b = stage.submit(elastic("b", 50, 100, 200, (1, 2), (1.0, 2.0)))
    moves = advance(stage, 50.0)
    assert (moves.started, moves.resized) == ((b,), (a,)) and (a.size, b.size) == (2, 2)
    stage.finish("b", 100.0)
    assert b.finish == 100.0 and list(stage.active) == ["a"]
    assert advance(stage, 100.0).resized == (a,) and a.size == 4


def test_a_job_with_no_work_left_when_it_starts_is_done_at_the_next_instant():
    # z (0 iterations) starts at 0 and is paused by its start until 29 s; y's arrival at 10 is
    # the next instant, and z is done there, as the elastic engine before the one loop had it
    jobs = [elastic("z", 0, 0.0, 1000), elastic("y", 10, 40, 1000)]
    result = replay(jobs, Cluster.uniform(1, 4), ElasticEDF())
    assert [(r.id, r.finish) for r in result.jobs] == [("z", 10), ("y", 49.0)]
    assert result.events == 3


def test_a_policy_asking_to_wake_now_is_refused():
    class Stuck(ElasticEDF):
        def assign(self, now, active, cluster):
            return {}, now

    with pytest.raises(RuntimeError, match="policy elastic-edf asked to wake at 0 <= now 0"):
        replay([elastic("a", 0, 10, 100)], Cluster.uniform(1, 4), Stuck())


def test_the_loop_reads_the_arrival_window_from_any_policy_not_its_kind():
    """A sort-key policy that declares an arrival window gets its arrivals grouped like the
    ElasticFlow-style one (the loop has no policy-kind test): j0 and j50 wait for the slot's
    last arrival and start together at 50; j70 is the next slot's."""
    from chronus_py.policies.priority import FIFO

    class Slotted(FIFO):
        name = "slotted-fifo"
        arrival_window = 60.0

    jobs = [Job(f"j{t}", "t", 1, t, JobKind.BEST_EFFORT, duration=100.0) for t in (0, 50, 70)]
    starts = {s.id: s.first_start for s in replay(jobs, Cluster.uniform(1, 4), Slotted()).jobs}
    assert starts == {"j0": 50.0, "j50": 50.0, "j70": 70.0}
    plain = {s.id: s.first_start for s in replay(jobs, Cluster.uniform(1, 4), FIFO()).jobs}
    assert plain == {"j0": 0.0, "j50": 50.0, "j70": 70.0}


def test_a_job_counts_as_done_within_its_policy_s_tolerance_and_only_then():
    """``Tolerance``: a rigid policy's 0 takes no completion early; an elastic one's share of a
    job's work does, and ``within`` covers how early that can be."""
    from chronus_py.engine.clock import Tolerance
    from chronus_py.jobs.state import JobState, Status

    job = elastic("a", 0.0, 1000.0, 5000.0)
    state = JobState(job=job, seq=0, estimate=1000.0, overhead=0.0)
    state.status, state.run_since, state.speed = Status.RUNNING, 0.0, 4.0  # 250 s to go
    exact = Tolerance(0.0)
    exact.widen(state, 0.0)
    assert exact.within == 0.0 and not exact.done(state, 249.9)
    loose = Tolerance(1e-3)  # one iteration of 1000
    loose.widen(state, 0.0)
    assert loose.within == pytest.approx(2 * 1e-3 * 1000 / 4 + 1e-6)
    assert not loose.done(state, 249.7)  # 1.2 iterations left
    assert loose.done(state, 249.8)  # 0.8 left: within the share
