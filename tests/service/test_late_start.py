"""A start takes effect when the backend runs the job, which is after the round that decided it
(the grace of jobs preempted for it, the cluster manager's own pass): the service counts a run
from when the backend says it began, so a job is never credited with work it has not done.

The real service and sim backend in-process; the sim's clock runs 100,000x wall time, so the
wall microseconds between a round's instant and its start command are seconds of sim time."""

from __future__ import annotations

import pytest

from chronus_py.backends.sim import SimBackend
from chronus_py.service.core import Caller, Service
from chronus_py.service.db import Database
from chronus_py.service.rounds import SchedulerSettings


@pytest.fixture
def svc(tmp_path):
    backend = SimBackend(tmp_path / "world.sim", [("n0", 8)], speed=100_000.0)
    db = Database(tmp_path / "chronus.db")
    built = Service(backend, db, SchedulerSettings())
    yield built
    db.close()


def test_a_run_counts_from_when_the_backend_began_it(svc, caplog):
    caplog.set_level("INFO", logger="chronus.serve")
    status, _ = svc.submit(
        {"id": "j1", "gpus": 8, "estimate_seconds": 1e7}, Caller("t", admin=True)
    )
    assert status == 201
    svc.tick()  # starts j1 at the round's instant
    state = svc.scheduler.running["j1"]
    decided = state.run_since
    svc.tick()  # observes that the sim ran it later
    (observed,) = [o for o in svc.backend.jobs() if o.id == "j1"]
    assert observed.run_since > decided
    assert state.run_since == observed.run_since
    assert '"late_start"' in caplog.text
    svc.tick()  # the backend's record agrees now: nothing more to correct
    assert state.run_since == observed.run_since
    assert caplog.text.count('"late_start"') == 1
