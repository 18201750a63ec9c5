"""While a round holds the scheduler, ``/healthz`` still answers at once (and says a round is
running), and every request that reads or changes the service waits for the round to end, a
wait its handler's time in ``chronus_request_seconds`` counts: the real app, service and sim
backend in-process, the round held by taking the loop's lock."""

from __future__ import annotations

import asyncio
import time

import httpx
from prometheus_client.parser import text_string_to_metric_families

from chronus_py.backends.sim import SimBackend
from chronus_py.service.api import build_app
from chronus_py.service.core import Service
from chronus_py.service.db import Database
from chronus_py.service.metrics import ServiceMetrics
from chronus_py.service.rounds import SchedulerSettings


def service(tmp_path) -> tuple[Service, ServiceMetrics]:
    backend = SimBackend(tmp_path / "world.sim", [("n0", 8), ("n1", 8)], speed=10.0)
    db = Database(tmp_path / "chronus.db")
    metrics = ServiceMetrics()
    built = Service(backend, db, SchedulerSettings(options={"headroom": 0.5}))
    metrics.attach(built)
    return built, metrics


def test_health_answers_during_a_round_and_requests_wait_for_it(tmp_path):
    svc, metrics = service(tmp_path)

    async def scenario():
        lock = asyncio.Lock()
        app = build_app(svc, metrics=metrics, lock=lock)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://chronus") as http:
            await lock.acquire()  # a round in progress, as the loop holds it
            svc.counters.round_began = time.monotonic() - 2.0
            health = await asyncio.wait_for(http.get("/healthz"), timeout=5)
            assert health.status_code == 200
            assert health.json()["round_running_seconds"] >= 2.0
            waiting = [
                asyncio.create_task(http.get(path))
                for path in ("/v1/cluster", "/v1/jobs", "/v1/plan", "/metrics")
            ]
            submit = asyncio.create_task(
                http.post("/v1/jobs", json={"id": "j1", "gpus": 8, "estimate_seconds": 600})
            )
            await asyncio.sleep(0.3)
            assert not any(t.done() for t in [*waiting, submit])
            svc.counters.round_began = None
            lock.release()  # the round ends
            answers = await asyncio.wait_for(asyncio.gather(*waiting, submit), timeout=10)
            assert [r.status_code for r in answers] == [200, 200, 200, 200, 201]
            assert (await http.get("/healthz")).json()["round_running_seconds"] is None

    asyncio.run(scenario())
    svc.db.close()


def test_a_round_marks_itself_running_only_while_it_runs(tmp_path):
    svc, _ = service(tmp_path)
    seen = []
    observe = svc._observe

    def observing():
        seen.append(svc.counters.round_began)
        observe()

    svc._observe = observing
    svc.tick()
    assert seen and seen[0] is not None and svc.counters.round_began is None
    svc.db.close()


def test_a_request_counts_its_wait_for_the_round_in_its_handlers_time(tmp_path):
    svc, metrics = service(tmp_path)
    held = 0.3

    async def scenario():
        lock = asyncio.Lock()
        app = build_app(svc, metrics=metrics, lock=lock)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://chronus") as http:
            await http.get("/v1/cluster")  # alone: not held
            await lock.acquire()
            waiting = [
                asyncio.create_task(http.get("/v1/cluster")),
                asyncio.create_task(
                    http.post("/v1/jobs", json={"id": "j1", "gpus": 8, "estimate_seconds": 600})
                ),
            ]
            # The requests' time counts from their handlers' start, a moment after the tasks
            # are made: held for that moment more, so each has waited ``held`` at least.
            await asyncio.sleep(held + 0.2)
            lock.release()
            await asyncio.wait_for(asyncio.gather(*waiting), timeout=10)
            return (await http.get("/metrics")).text

    text = asyncio.run(scenario())
    svc.db.close()
    seen = {
        (sample.name.removeprefix("chronus_request_seconds_"), sample.labels["handler"]): sample
        for family in text_string_to_metric_families(text)
        if family.name == "chronus_request_seconds"
        for sample in family.samples
        if sample.labels.get("le", "0.2") == "0.2"
    }
    assert seen["count", "cluster"].value == 2 and seen["count", "submit"].value == 1
    assert seen["sum", "submit"].value >= held and seen["sum", "cluster"].value >= held
    # one read of the cluster answered at once, one after the round: the held one in no bucket
    # below the time it was held
    assert seen["bucket", "cluster"].value == 1 and seen["bucket", "submit"].value == 0
