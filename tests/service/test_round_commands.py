"""A round decides under the request lock and issues its backend commands outside it
(``commands.py``): the races that opens, each played out on the real service, database and sim
backend in-process. The sim's ``start`` can be held at a gate, which is how a command "in
flight" is made to last as long as a test needs; the sim's own command log (the cluster's
truth, written by the sim) is what the assertions read."""

from __future__ import annotations

import asyncio
import sqlite3
import threading

import httpx
import pytest

from chronus_py.backends.sim import SimBackend
from chronus_py.jobs.model import DeadlineOption, Job, JobKind
from chronus_py.service.api import build_app
from chronus_py.service.core import ApiError, Caller, Service
from chronus_py.service.db import Database
from chronus_py.service.rounds import SchedulerSettings
from chronus_py.service.server import _loop

ADMIN = Caller("ops", admin=True)


class GatedSim(SimBackend):
    """The sim backend whose ``start`` waits at ``gate`` (open unless a test closes it) after
    saying it ``entered``: a start that takes as long as the test wants, like a slow API."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()

    def start(self, job_id, placement):
        self.entered.set()
        assert self.gate.wait(20), "the test never opened the gate"
        super().start(job_id, placement)


def build(tmp_path, trace=()) -> Service:
    backend = GatedSim(tmp_path / "world.sim", [("n0", 8), ("n1", 8)], speed=10.0, trace_jobs=trace)
    return Service(backend, Database(tmp_path / "chronus.db"), SchedulerSettings())


@pytest.fixture
def svc(tmp_path):
    built = build(tmp_path)
    yield built
    built.db.close()


def submit(svc: Service, *ids: str) -> None:
    for job_id in ids:
        status, _ = svc.submit({"id": job_id, "gpus": 8, "estimate_seconds": 3600}, ADMIN)
        assert status == 201


def commands(svc: Service, job_id: str) -> list[str]:
    """What the sim was told about ``job_id``, in order (its own log)."""
    with sqlite3.connect(svc.backend.inner.path) as conn:
        rows = conn.execute("SELECT kind FROM command WHERE job=? ORDER BY seq", (job_id,))
        return [kind for (kind,) in rows]


def actions(svc: Service, job_id: str) -> list[str]:
    rows = svc.db.conn.execute("SELECT action FROM decision WHERE job=? ORDER BY rowid", (job_id,))
    return [action for (action,) in rows]


def test_a_cancel_waits_for_the_start_in_flight_and_has_the_last_word(svc):
    submit(svc, "j1", "j2")
    svc.decide()
    assert [(c.action, c.job_id) for c in svc._queue] == [("start", "j1"), ("start", "j2")]
    svc.backend.inner.gate.clear()
    act = threading.Thread(target=svc.act)
    act.start()
    assert svc.backend.inner.entered.wait(10)  # j1's start is in flight
    cancelled = []
    cancel = threading.Thread(target=lambda: cancelled.append(svc.cancel("j1", ADMIN)))
    cancel.start()
    cancel.join(0.3)
    assert cancel.is_alive(), "the cancellation went to the backend while j1's start was in it"
    # Reads take neither lock the command holds: they answer with the start still in flight.
    assert svc.cluster_view()["running"] == 2
    assert svc.get_job("j1", ADMIN)["state"] == "pending"  # recorded once it took effect
    svc.backend.inner.gate.set()
    act.join(10)
    cancel.join(10)
    svc.record()
    assert commands(svc, "j1") == ["submit", "start", "cancel"]
    assert commands(svc, "j2") == ["submit", "start"]
    assert svc.db.job("j1")["state"] == "cancelled"  # the start's record did not overwrite it
    assert actions(svc, "j1")[-2:] == ["start", "cancel"]
    assert svc.db.job("j2")["state"] == "running"
    assert svc.counters.backend_errors == 0 and not svc.needs_resync


def test_a_cancel_drops_the_jobs_queued_start(svc):
    submit(svc, "j1", "j2")
    svc.decide()
    svc.cancel("j2", ADMIN)  # a request between the round's decisions and its commands
    svc.act()
    svc.record()
    assert commands(svc, "j2") == ["submit", "cancel"]  # never started
    assert commands(svc, "j1") == ["submit", "start"]
    assert svc.db.job("j2")["state"] == "cancelled" and "start" not in actions(svc, "j2")
    svc.tick()  # the next round sees the backend agree with it: no resync
    assert svc.counters.resyncs == 1 and svc.counters.backend_errors == 0


def test_a_failed_start_stops_the_batch_and_the_service_resyncs_from_the_backend(svc):
    submit(svc, "j1", "j2")
    svc.decide()
    svc.backend.inner.cancel("j1")  # ended outside chronus (scancel) before its start went out
    svc.act()
    assert svc.needs_resync  # at once: no submission is promised on the failed round
    with pytest.raises(ApiError) as refused:
        svc.submit({"id": "j3", "gpus": 8, "estimate_seconds": 60}, ADMIN)
    assert refused.value.status == 503
    svc.record()
    assert svc.counters.backend_errors == 1
    assert commands(svc, "j2") == ["submit"]  # nothing more issued after the failure
    assert svc.db.job("j1")["state"] == svc.db.job("j2")["state"] == "pending"
    svc.tick()  # rebuilt from the backend: j1 ended, j2 decided again and started once
    assert svc.db.job("j1")["state"] == "cancelled"
    assert commands(svc, "j2") == ["submit", "start"]
    assert svc.db.job("j2")["state"] == "running" and not svc.needs_resync


def test_a_kill_between_decisions_and_commands_loses_nothing_and_starts_once(tmp_path):
    first = build(tmp_path)
    submit(first, "j1")
    promised = first.db.job("j1")["guaranteed_at"]
    first.decide()  # the start is decided, the promise and lease plan recorded; then: kill
    assert [c.job_id for c in first._queue] == ["j1"]
    first.db.close()
    again = build(tmp_path)  # the restart: rebuilt from the database and the sim
    assert again.db.job("j1")["state"] == "pending"
    assert again.db.job("j1")["guaranteed_at"] == promised
    again.tick()
    again.tick()
    assert commands(again, "j1") == ["submit", "start"]
    assert again.db.job("j1")["state"] == "running"
    again.db.close()


def test_an_arrival_is_made_known_to_the_backend_by_the_rounds_commands_first(tmp_path):
    """A round's arrivals are committed in ``take_arrivals`` and submitted to the backend by
    ``act`` before the round decides their starts; a kill in between is repaired on restart,
    and each runs once."""
    trace = tuple(
        Job(f"t{i}", "t", 8, 0.0, JobKind.STRICT_SLO, (DeadlineOption(90_000.0, 1.0),), 600.0)
        for i in range(3)
    )
    first = build(tmp_path, trace)
    first.take_arrivals()
    assert [(c.action, c.job_id) for c in first._queue][:3] == [
        ("submit", "t0"),
        ("submit", "t1"),
        ("submit", "t2"),
    ]
    assert all(commands(first, f"t{i}") == [] for i in range(3))  # not issued yet
    first.db.close()  # the kill
    again = build(tmp_path, trace)  # rebuild submits what the database has and the sim lacks
    assert all(commands(again, f"t{i}") == ["submit"] for i in range(3))
    again.tick()
    again.tick()
    logs = [commands(again, f"t{i}") for i in range(3)]
    assert sorted(logs) == [["submit"], ["submit", "start"], ["submit", "start"]]
    again.db.close()


def test_a_round_never_begins_before_the_last_ones_commands_are_recorded(svc):
    submit(svc, "j1")
    svc.decide()
    with pytest.raises(RuntimeError, match="before its queued commands were issued"):
        svc.decide()
    with pytest.raises(RuntimeError, match="before the last one's commands"):
        svc.take_arrivals()
    svc.act()
    svc.record()
    svc.tick()
    assert commands(svc, "j1") == ["submit", "start"]


def test_the_loop_answers_requests_while_a_rounds_start_is_in_flight(svc):
    """The server's loop and app: with j1's start held in the backend, ``GET /v1/cluster`` and
    ``GET /v1/jobs/j1`` answer (before the gate opens), and the start is recorded after it."""
    svc.backend.inner.gate.clear()

    async def scenario():
        lock, wake, stop = asyncio.Lock(), asyncio.Event(), asyncio.Event()
        app = build_app(svc, lock=lock, wake=wake.set)
        loop = asyncio.create_task(_loop(svc, wake, stop, lock, 0.01))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://chronus") as http:
            body = {"id": "j1", "gpus": 8, "estimate_seconds": 3600}
            assert (await http.post("/v1/jobs", json=body)).status_code == 201
            assert await asyncio.to_thread(svc.backend.inner.entered.wait, 10)
            cluster = await asyncio.wait_for(http.get("/v1/cluster"), timeout=10)
            job = await asyncio.wait_for(http.get("/v1/jobs/j1"), timeout=10)
            assert not svc.backend.inner.gate.is_set()  # answered with the start in flight
            assert cluster.status_code == 200 and cluster.json()["running"] == 1
            assert job.json()["state"] == "pending"
            svc.backend.inner.gate.set()
            for _ in range(200):
                if (await http.get("/v1/jobs/j1")).json()["state"] == "running":
                    break
                await asyncio.sleep(0.05)
            assert (await http.get("/v1/jobs/j1")).json()["state"] == "running"
        stop.set()
        wake.set()
        await asyncio.wait_for(loop, timeout=10)

    asyncio.run(scenario())
    assert commands(svc, "j1") == ["submit", "start"]


def test_commands_a_failed_step_left_unissued_are_dropped_and_decided_again(tmp_path):
    """The loop records a round whatever happened in it: commands a step that raised left in
    the queue are never issued late; the service resyncs and the next round decides anew."""
    trace = (Job("t0", "t", 8, 0.0, JobKind.STRICT_SLO, (DeadlineOption(90_000.0, 1.0),), 600.0),)
    svc = build(tmp_path, trace)
    svc.take_arrivals()
    assert [c.action for c in svc._queue] == ["submit"]
    svc.record()  # as after a step raised before act
    assert not svc._queue and svc.needs_resync
    svc.tick()  # rebuilt: the job the database has and the sim lacks is submitted
    svc.tick()
    assert commands(svc, "t0") == ["submit", "start"]
    svc.db.close()


def test_a_rounds_step_logs_its_lines_as_one_record_and_keeps_them_if_it_fails(svc, caplog):
    """Each locked step of a round logs its decision lines together (one write, not one each),
    and a step that fails half-way still logs what it did before the failure."""
    caplog.set_level("INFO", logger="chronus.serve")
    submit(svc, "a", "b")
    caplog.clear()
    svc.tick()
    starts = [r.getMessage() for r in caplog.records if '"event":"start"' in r.getMessage()]
    assert len(starts) == 1 and starts[0].count('"event":"start"') == 2
    caplog.clear()

    def broken() -> None:
        raise RuntimeError("a bug in the round")

    svc._round = broken
    with pytest.raises(RuntimeError, match="a bug in the round"):
        svc.decide()  # its observation logged both late starts before the round failed
    assert caplog.text.count('"event":"late_start"') == 2
