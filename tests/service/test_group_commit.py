"""A batch of requests shares one commit (``Service.batch``): each request's writes are a
savepoint in it, nothing is answered before it, and the batch's submissions reach the backend
only after it; a cancellation in the same batch drops its job's submission. Played on the real
service, database and sim backend in-process; the sim's own command log (the cluster's truth)
and a second connection to the database file (what a restart would read) are what the
assertions read."""

from __future__ import annotations

import json
import sqlite3

import pytest

from chronus_py.backends.sim import SimBackend
from chronus_py.service import rounds
from chronus_py.service.core import ApiError, Caller, Service
from chronus_py.service.db import Database
from chronus_py.service.rounds import SchedulerSettings

ADMIN = Caller("ops", admin=True)


class WatchedSim(SimBackend):
    """The sim backend noting, at each submit, which jobs another connection to the service's
    database file can see: what a kill at that instant would leave."""

    def __init__(self, db_path, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.db_path = db_path
        self.committed_at_submit: dict[str, set[str]] = {}

    def submit(self, job, spec=None):
        with sqlite3.connect(self.db_path) as conn:
            seen = {row[0] for row in conn.execute("SELECT id FROM job")}
        self.committed_at_submit[job.id] = seen
        super().submit(job, spec)


@pytest.fixture
def svc(tmp_path):
    backend = WatchedSim(tmp_path / "chronus.db", tmp_path / "world.sim", [("n0", 8)], speed=1.0)
    built = Service(backend, Database(tmp_path / "chronus.db"), SchedulerSettings())
    yield built
    built.db.close()


def body(job_id: str) -> dict:
    return {"id": job_id, "gpus": 1, "estimate_seconds": 3600}


def committed(svc: Service) -> set[str]:
    with sqlite3.connect(svc.db.path) as conn:
        return {row[0] for row in conn.execute("SELECT id FROM job")}


def sim_commands(svc: Service) -> list[tuple[str, str]]:
    return [(kind, job) for kind, job, _, _ in svc.backend.inner.commands()]


def test_a_batch_is_committed_once_and_its_jobs_reach_the_backend_only_after(svc):
    with svc.batch():
        for job_id in ("a", "b", "c"):
            assert svc.submit(body(job_id), ADMIN)[0] == 201
        assert committed(svc) == set()  # nothing visible outside before the batch's commit
        assert sim_commands(svc) == []  # nor told to the backend
    assert committed(svc) == {"a", "b", "c"}
    assert sim_commands(svc) == [("submit", "a"), ("submit", "b"), ("submit", "c")]
    # each submission reached the backend with the whole batch already in the file
    assert all(seen == {"a", "b", "c"} for seen in svc.backend.inner.committed_at_submit.values())


def test_a_cancellation_in_the_same_batch_drops_the_submission(svc):
    with svc.batch():
        svc.submit(body("a"), ADMIN)
        svc.submit(body("b"), ADMIN)
        assert svc.cancel("a", ADMIN)["state"] == "cancelled"
    assert sim_commands(svc) == [("submit", "b")]  # the backend never heard of a
    assert svc.get_job("a", ADMIN)["state"] == "cancelled"
    assert svc.get_job("b", ADMIN)["state"] == "pending"


def test_a_failed_request_undoes_only_its_own_writes(svc):
    with svc.batch():
        svc.submit(body("a"), ADMIN)
        with pytest.raises(ApiError) as refused:  # the same id again, inside the same batch
            svc.submit(body("a"), ADMIN)
        assert refused.value.status == 409
        svc.submit(body("b"), ADMIN)
    assert committed(svc) == {"a", "b"}


def test_a_failed_commit_keeps_nothing_tells_the_backend_nothing_and_resyncs(svc, caplog):
    caplog.set_level("INFO", logger="chronus.serve")
    # a commit that fails: a deferred foreign key, checked at COMMIT, left broken by the batch
    conn = svc.db.conn
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("CREATE TABLE parent (id TEXT PRIMARY KEY)")
    conn.execute("CREATE TABLE child (p TEXT REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)")
    with pytest.raises(sqlite3.IntegrityError):
        with svc.batch():
            svc.submit(body("a"), ADMIN)
            conn.execute("INSERT INTO child VALUES ('missing')")
    assert not conn.in_transaction  # rolled back, not left open for the next batch
    assert '"admit"' not in caplog.text  # no decision logged for what was not kept
    assert committed(svc) == set()
    assert sim_commands(svc) == []
    assert svc.needs_resync  # the scheduler admitted a in memory: rebuilt before deciding again
    conn.execute("DELETE FROM child")
    svc.tick()  # the next round rebuilds the scheduler: a, never committed, is gone from it
    assert not svc.needs_resync and not rounds.held(svc.scheduler, "a")
    with svc.batch():  # and the next batch commits as usual
        svc.submit(body("b"), ADMIN)
    assert committed(svc) == {"b"}


def test_outside_a_batch_a_submission_is_committed_then_submitted_at_once(svc):
    assert svc.submit(body("a"), ADMIN)[0] == 201
    assert sim_commands(svc) == [("submit", "a")]
    assert svc.backend.inner.committed_at_submit["a"] == {"a"}


def test_the_backend_commands_of_a_batch_share_one_commit_too(svc):
    with svc.batch():
        svc.submit(body("a"), ADMIN)
    with svc.batch():
        svc.cancel("a", ADMIN)
        svc.submit(body("b"), ADMIN)
        with sqlite3.connect(svc.backend.inner.path) as conn:  # what a kill now would leave
            assert [r[0] for r in conn.execute("SELECT kind FROM command")] == ["submit"]
    assert sim_commands(svc) == [("submit", "a"), ("cancel", "a"), ("submit", "b")]
    assert not svc.backend.inner.db.in_transaction


def test_a_batchs_decision_lines_are_logged_once_after_its_commit(svc, caplog):
    caplog.set_level("INFO", logger="chronus.serve")
    with svc.batch():
        svc.submit(body("a"), ADMIN)
        svc.cancel("a", ADMIN)
        assert caplog.records == []  # nothing said before the commit
    [record] = caplog.records
    events = [json.loads(line) for line in record.getMessage().split("\n")]
    assert [(e["event"], e["job"]) for e in events] == [("admit", "a"), ("cancel", "a")]
    svc.submit(body("b"), ADMIN)  # outside a batch: a record per line, at once
    assert json.loads(caplog.records[-1].getMessage())["job"] == "b"
