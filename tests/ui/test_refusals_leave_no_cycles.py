"""Refused requests, through the API and the web view, leave nothing for the cyclic collector.

Why: an exception that keeps a frame which keeps the exception is a reference cycle, freed only
by a pass of the collector, and a pass stops every thread. Under churn the refused calls' cycles
made passes of 87-105 ms every 5 s (issue 27, session 31). The app runs in-process, as
``chronus serve`` builds it, so the collector can be asked what each kind of request left."""

from __future__ import annotations

import asyncio
import gc

import httpx
from in_process import in_process
from ui_helpers import bearer

A, ADMIN = bearer("team-a"), bearer("admin")
JOB = {"id": "a1", "gpus": 1, "estimate_seconds": 3600}
REFUSED = {
    "a read of a missing job": ("GET", "/v1/jobs/nope", A, None, 404),
    "a cancellation of a missing job": ("DELETE", "/v1/jobs/nope", A, None, 404),
    "a submission that exists already": ("POST", "/v1/jobs", A, JOB, 409),
    "a submission of no GPUs": ("POST", "/v1/jobs", A, {"id": "x", "gpus": 0}, 422),
    "an unknown state": ("GET", "/v1/jobs?state=zzz", A, None, 422),
    "a wrong token": ("GET", "/v1/jobs/a1", {"Authorization": "Bearer wrong"}, None, 401),
    "a method the path has not": ("PUT", "/v1/jobs", A, None, 405),
    "a tenant's page of a missing job": ("GET", "/ui/jobs/nope", A, None, 404),
    "an admin's page of a missing job": ("GET", "/ui/jobs/nope", ADMIN, None, 404),
}


def ours(exc: BaseException) -> bool:
    return type(exc).__module__.startswith("chronus_py.")


def test_refused_requests_leave_no_exception_in_a_reference_cycle(tmp_path):
    served = in_process(tmp_path)
    left: dict[str, int] = {}

    async def run() -> None:
        transport = httpx.ASGITransport(app=served.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://chronus") as http:
            assert (await http.post("/v1/jobs", headers=A, json=JOB)).status_code == 201
            for what, (method, path, headers, body, status) in REFUSED.items():
                await http.request(method, path, headers=headers, json=body)  # warmed up
                gc.collect()  # what came before is freed
                for _ in range(5):
                    answer = await http.request(method, path, headers=headers, json=body)
                    assert answer.status_code == status, what
                gc.set_debug(gc.DEBUG_SAVEALL)  # what these left is kept to be looked at
                gc.collect()
                gc.set_debug(0)
                # the client's own objects make cycles too, and a library may keep an exception
                # of its own; the service's exceptions are what must never be in one
                left[what] = sum(isinstance(o, BaseException) and ours(o) for o in gc.garbage)
                gc.garbage.clear()

    gc.collect()
    gc.disable()
    try:
        asyncio.run(run())
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
        served.service.db.close()
    assert left == dict.fromkeys(REFUSED, 0)
