"""The start latency the Slurm backend measures reaches the plan (the daemons' part is in
test_backend.py: a start yields a sample)."""

from __future__ import annotations

import pytest

from chronus_py.backends.slurm.backend import SlurmBackend
from chronus_py.jobs.model import Cluster
from chronus_py.jobs.overhead import restart_overhead
from chronus_py.service import rounds


def test_every_start_the_plan_charges_includes_the_backends_latency():
    latency = [0.0]
    scheduler = rounds.scheduler_for(
        rounds.SchedulerSettings(),
        Cluster.uniform(1, 4),
        estimates={},
        start_latency=lambda: latency[0],
    )
    assert scheduler.overhead(2) == restart_overhead(2)
    latency[0] = 240.0
    assert scheduler.overhead(2) == restart_overhead(2) + 240.0
    plain = rounds.scheduler_for(rounds.SchedulerSettings(), Cluster.uniform(1, 4), estimates={})
    assert plain.overhead(2) == restart_overhead(2)


def test_before_any_start_one_grace_and_one_poll_in_chronus_time():
    b = SlurmBackend(None, grace=2.0, poll=0.5, time_scale=60.0, time_origin=1.0)
    assert b.start_latency() == pytest.approx(150.0)
    b._latencies.extend([1.0, 3.0, 2.0])
    assert b.start_latency() == pytest.approx(300.0)  # the longest recent start, and a grace


def test_a_run_that_began_owes_no_start_latency():
    """The plan charged 240 s of latency on this start; Slurm began the run 100 s after the
    round, so progress counts from then and the whole charge is paid (it was time before the
    run): the remaining work is the estimate and the restart overhead, less the 50 s run so
    far. A second start is charged the latency again."""
    from chronus_py.jobs.model import Job, JobKind

    scheduler = rounds.scheduler_for(
        rounds.SchedulerSettings(),
        Cluster.uniform(1, 4),
        estimates={"j": 1000.0},
        start_latency=lambda: 240.0,
    )
    scheduler.submit(Job("j", "t", 2, 0.0, JobKind.BEST_EFFORT, duration=1000.0))
    rounds.advance(scheduler, 0.0)
    state = scheduler.active["j"]
    assert rounds.is_running(state) and state.run_since == 0.0
    rounds.run_began(scheduler, "j", 100.0, 150.0)
    assert state.run_since == 100.0
    assert state.remaining(150.0) == pytest.approx(1000.0 + restart_overhead(2) - 50.0)
    rounds.run_began(scheduler, "j", 100.0, 200.0)  # the same run, seen again: paid once
    assert state.remaining(200.0) == pytest.approx(1000.0 + restart_overhead(2) - 100.0)
    scheduler._preempt(state, 200.0)
    assert state.remaining(200.0) == pytest.approx(1000.0 + 2 * restart_overhead(2) + 240.0 - 100.0)
