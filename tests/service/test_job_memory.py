"""What the service keeps in memory per job (issue 27: 100,000 jobs in at most 330 MB): ended
jobs' ids and records are read from the database, tenants from the scheduler's records, and
records of jobs alike share their per-size parts. The answers are those of a service that held
everything in memory. The real service and sim backend in-process."""

from __future__ import annotations

import copy
import gc
import pickle
import time

import pytest

from chronus_py.backends.sim import SimBackend
from chronus_py.jobs.model import Job, JobKind
from chronus_py.jobs.state import NOWHERE, JobState
from chronus_py.service.core import ApiError, Caller, Service
from chronus_py.service.db import Database
from chronus_py.service.rounds import SchedulerSettings, active_job

ADMIN = Caller("ops", admin=True)
TEAM = Caller("team-a")


def open_service(tmp_path) -> Service:
    backend = SimBackend(tmp_path / "world.sim", [("n0", 8)], speed=100_000.0)
    return Service(backend, Database(tmp_path / "chronus.db"), SchedulerSettings())


@pytest.fixture
def svc(tmp_path):
    built = open_service(tmp_path)
    yield built
    built.db.close()


def test_an_ended_jobs_id_stays_taken_and_its_record_is_served_after_a_restart(svc, tmp_path):
    """No set of every id ever accepted: the database says an id is taken, before and after a
    restart, and serves the ended job's record with the same answer."""
    body = {"id": "done", "gpus": 2, "estimate_seconds": 60.0, "duration_seconds": 60.0}
    assert svc.submit(body, TEAM)[0] == 201
    for _ in range(200):
        svc.tick()
        if svc.get_job("done", TEAM)["state"] == "finished":
            break
    finished = svc.get_job("done", TEAM)
    assert finished["state"] == "finished"
    with pytest.raises(ApiError) as again:
        svc.submit(body, TEAM)
    assert again.value.status == 409
    svc.db.close()
    restarted = open_service(tmp_path)
    try:
        assert restarted.get_job("done", TEAM) == finished
        with pytest.raises(ApiError) as after:
            restarted.submit(body, TEAM)
        assert after.value.status == 409
        assert restarted.submit({**body, "id": "fresh"}, TEAM)[0] == 201
    finally:
        restarted.db.close()


def test_tenants_are_the_scheduler_records_and_plans_show_only_ones_own(svc):
    assert svc.submit({"id": "a1", "gpus": 8, "estimate_seconds": 900.0}, TEAM)[0] == 201
    body = {"id": "b1", "tenant": "team-b", "gpus": 8, "estimate_seconds": 900.0}
    assert svc.submit(body, ADMIN)[0] == 201
    ids = {svc.scoped("a1", TEAM): "team-a", "b1": "team-b"}
    assert dict(svc.tenants) == ids
    svc.cancel("b1", ADMIN)
    assert dict(svc.tenants) == {svc.scoped("a1", TEAM): "team-a"}  # as after a rebuild
    svc.rebuild()
    assert dict(svc.tenants) == {svc.scoped("a1", TEAM): "team-a"}


def test_records_of_jobs_alike_share_their_per_size_parts(svc):
    for i in range(3):
        assert svc.submit({"id": f"s{i}", "gpus": 8, "estimate_seconds": 900.0}, ADMIN)[0] == 201
    states = [active_job(svc.scheduler, f"s{i}") for i in range(3)]
    waiting = [s for s in states if s.placement == {}]
    assert waiting and all(s.placement is NOWHERE for s in waiting)
    assert len({id(s.job.sizes) for s in states}) == 1
    assert len({id(s.overhead) for s in states}) == 1
    with pytest.raises(TypeError):
        waiting[0].placement["n0"] = (0,)  # shared: replaced, never changed in place
    assert pickle.loads(pickle.dumps(waiting[0])).placement is NOWHERE
    assert copy.deepcopy(waiting[0]).placement is NOWHERE
    first = Job("x", "t", 4, 0.0, JobKind.BEST_EFFORT, duration=1.0)
    assert first.sizes == (4,) and first.sizes is Job("y", "u", 4, 1.0, JobKind.BEST_EFFORT).sizes


def records_held(svc: Service) -> int:
    """Job records alive in the process, wherever held (the cyclic collector finds them all)."""
    gc.collect()
    return sum(type(o) is JobState for o in gc.get_objects())


def test_ended_jobs_leave_no_record_in_memory_however_they_end(svc):
    """Cancelled while waiting, cancelled while running, or finished: the database serves each
    one's record, as after a restart, and nothing of it stays in the scheduler. Held, every job
    ever submitted stayed in memory for good (issue 27's churn: ~1.2 KB a cancelled job)."""
    bodies = {
        "waits": {"gpus": 8, "estimate_seconds": 9e6, "duration_seconds": 9e6},
        "runs": {"gpus": 8, "estimate_seconds": 9e6, "duration_seconds": 9e6},
        "done": {
            "gpus": 8,
            "estimate_seconds": 60.0,
            "duration_seconds": 60.0,
            "deadlines": [{"at": 5e5}],
        },
    }
    assert svc.submit({"id": "runs", **bodies["runs"]}, TEAM)[0] == 201
    svc.tick()
    assert svc.get_job("runs", TEAM)["state"] == "running"
    assert svc.submit({"id": "waits", **bodies["waits"]}, TEAM)[0] == 201
    svc.cancel("waits", TEAM)
    svc.cancel("runs", TEAM)
    assert svc.submit({"id": "done", **bodies["done"]}, TEAM)[0] == 201
    for _ in range(200):
        svc.tick()
        if svc.get_job("done", TEAM)["state"] == "finished":
            break
    assert [svc.get_job(j, TEAM)["state"] for j in bodies] == ["cancelled", "cancelled", "finished"]
    assert svc.get_job("done", TEAM)["guaranteed"] is not None
    svc.tick()
    assert not svc.needs_resync
    assert not svc.scheduler.jobs and not svc.estimates and not svc.promised
    for job_id, body in bodies.items():
        with pytest.raises(ApiError) as again:
            svc.submit({"id": job_id, **body}, TEAM)
        assert again.value.status == 409


def test_churn_holds_the_records_of_the_waiting_jobs_only(svc):
    """Submissions and cancellations at one level of waiting jobs: the records alive stay those
    of the jobs still waiting, however many came and went."""

    def churn(first: int, count: int) -> None:
        for i in range(first, first + count):
            body = {"id": f"c{i}", "gpus": 8, "estimate_seconds": 9e6, "deadlines": [{"at": 2e7}]}
            assert svc.submit(body, TEAM)[0] == 201
            if i >= 20:
                svc.cancel(f"c{i - 20}", TEAM)
            if i % 25 == 0:
                svc.tick()

    churn(0, 50)
    level = records_held(svc)
    churn(50, 300)
    assert records_held(svc) <= level
    assert len(svc.scheduler.jobs) == 20


def test_a_promise_restored_by_a_rebuild_to_a_job_that_then_ends_is_no_error(svc):
    """A rebuild gives the running job its promise again, the planner reports that as a change,
    and the job ends before the next round takes the change: the round found no record to
    write it in (KeyError), failed, and set the service re-reading the cluster, so the next
    submission got a 503 (a CI run's crash test, session 32)."""
    body = {"id": "g", "gpus": 8, "estimate_seconds": 36_000.0, "deadlines": [{"at": 1e6}]}
    assert svc.submit(body, TEAM)[0] == 201
    svc.tick()
    assert svc.get_job("g", TEAM)["state"] == "running"  # for 0.36 s of wall time
    svc.rebuild()
    time.sleep(0.5)  # 50,000 s of the sim's clock: its ten hours of work are done
    svc.tick()
    assert svc.get_job("g", TEAM)["state"] == "finished"
    assert not svc.needs_resync
    assert svc.submit({**body, "id": "next"}, TEAM)[0] == 201
