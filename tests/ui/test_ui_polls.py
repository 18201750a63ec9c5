"""What a page's poll costs and when it is redrawn: the real app, service and sim backend
in-process (the view attached as ``chronus serve`` attaches it), rounds run by hand and the
loop's lock taken by the test, as a round holds it."""

from __future__ import annotations

import asyncio
import re

import httpx
from in_process import in_process
from ui_helpers import bearer

from chronus_py.ui.snapshot import FRESH

PARTS = ("/ui/jobs?part=live", "/ui/jobs/a1?part=live", "/ui/cluster?part=live", "/ui/?part=live")


def test_polls_are_304s_until_the_tenants_page_changes(tmp_path):
    """The jobs page's 304 cost a read of every job, a sort and a drawing, only to hash the
    page (15 ms at 5,000 jobs), and waited for the round holding the lock. An unchanged poll is
    now answered from the service's version, during a round too; a submission, a round that
    starts a job and a cancellation each redraw the page, and another tenant's submission
    leaves the tenant's ETag as it was."""
    served = in_process(tmp_path)
    app, svc, lock = served.app, served.service, served.lock
    a, b = bearer("team-a"), bearer("team-b")

    async def scenario(http: httpx.AsyncClient) -> None:
        async def fresh(path: str, etag: str, who: dict) -> httpx.Response:
            """The poll after a change: pages share a read of the service for ``FRESH``
            seconds, so within one the page may still be the one before it."""
            for _ in range(6):
                r = await http.get(path, headers={**who, "If-None-Match": etag})
                if r.status_code == 200:
                    return r
                await asyncio.sleep(FRESH / 2)
            raise AssertionError(f"{path}: still {r.status_code} after the change")

        async def submit(who: dict, job: str) -> None:
            body = {"id": job, "gpus": 8, "estimate_seconds": 90000}
            assert (await http.post("/v1/jobs", headers=who, json=body)).status_code == 201

        await submit(a, "a1")
        tags = {}
        for path in PARTS:
            r = await http.get(path, headers=a)
            assert r.status_code == 200, r.text
            tags[path] = r.headers["etag"]

        await lock.acquire()  # a round in progress
        try:
            for path in PARTS:
                r = await asyncio.wait_for(
                    http.get(path, headers={**a, "If-None-Match": tags[path]}), timeout=5
                )
                assert r.status_code == 304 and r.headers["etag"] == tags[path], path
        finally:
            lock.release()

        jobs = "/ui/jobs?part=live"
        await submit(b, "b1")  # another tenant's change: team-a's page is what it was
        await asyncio.sleep(FRESH)
        r = await http.get(jobs, headers={**a, "If-None-Match": tags[jobs]})
        assert r.status_code == 304 and r.headers["etag"] == tags[jobs]

        await submit(a, "a2")
        r = await fresh(jobs, tags[jobs], a)
        assert re.findall(r'data-job="(a\d)" data-state="(\w+)"', r.text) == [
            ("a1", "pending"),
            ("a2", "pending"),
        ]

        await asyncio.to_thread(svc.tick)  # the round starts a1 and b1 on the two nodes
        r = await fresh(jobs, r.headers["etag"], a)
        assert sorted(re.findall(r'data-job="(a\d)" data-state="(\w+)"', r.text)) == [
            ("a1", "running"),
            ("a2", "pending"),
        ]
        job = "/ui/jobs/a1?part=live"
        r = await fresh(job, tags[job], a)
        assert 'id="job-state">running<' in r.text

        assert (await http.delete("/v1/jobs/a1", headers=a)).status_code == 200
        r = await fresh(job, r.headers["etag"], a)
        assert 'id="job-state">cancelled<' in r.text
        r = await http.get(jobs, headers={**a, "If-None-Match": tags[jobs]})
        assert ("a1", "cancelled") in re.findall(r'data-job="(a\d)" data-state="(\w+)"', r.text)

    async def run() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://chronus") as http:
            await scenario(http)

    try:
        asyncio.run(run())
    finally:
        svc.db.close()
