"""The scheduler process's side of ``chronus serve --http-workers N``: it starts N front
processes (``front.py``) on its listening socket, each with its own link (``link.py``), runs
the API's app on the requests they forward, and sends each answer back; it restarts a front
that dies, and stops the service (exit 1) if fronts keep dying at start.

Every request still runs in this process's app, in the same batches, under the same lock, and
is answered after its commit (``api.py``, ``batches.py``): the fronts only take the HTTP
reading and writing off this process, so what a client sees and every guarantee (a 201 only
after the commit, a read after a 201 sees the job, tenants kept apart, ``/metrics`` counted
here) are the single process's. A front killed with requests in flight cuts those connections,
as a killed single process does; a request it forwarded is committed or not as a whole.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import subprocess
import sys
import time
from typing import Any, Callable

from chronus_py.service.json_codec import encode
from chronus_py.service.link import Link

log = logging.getLogger("chronus.serve")
QUICK = 5.0
"""A front that dies within this many seconds of its start died quickly."""
QUICK_DEATHS = 3
"""Quick deaths in a row after which the service stops (exit 1) instead of restarting."""
STOP_WAIT = 30.0
"""Seconds a front may take to finish its requests after SIGTERM before it is killed."""

_FAILED = (
    503,
    [(b"content-type", b"application/json")],
    encode(
        {
            "error": "internal error (logged by the server); nothing was changed that "
            "the next round will not reconcile, retry later",
            "field": None,
        }
    ),
)


class Fronts:
    """``count`` front processes on ``listen``, forwarding to ``app``; ``stop`` ends the
    service (called when fronts keep dying)."""

    def __init__(
        self,
        app,
        listen: socket.socket,
        count: int,
        *,
        read_timeout: float,
        max_connections: int,
        log_level: str,
        stop: Callable[[], None],
    ):
        self.app = app
        self.listen = listen
        self.count = count
        self.args = [str(read_timeout), str(max_connections), log_level]
        self.stop_service = stop
        self.address = listen.getsockname()[:2]
        self.exit_code = 0
        self._procs: list[subprocess.Popen | None] = [None] * count
        self._links: list[Link | None] = [None] * count
        self._started = [0.0] * count
        self._quick = [0] * count
        self._stopping = False
        self._tasks: set[asyncio.Task] = set()

    async def start(self) -> None:
        for i in range(self.count):
            await self._spawn(i)

    async def stop(self) -> None:
        """SIGTERM to every front (each stops accepting and finishes what it forwarded, which
        this process still answers), then reap them."""
        self._stopping = True
        procs = [p for p in self._procs if p is not None]
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        await asyncio.to_thread(_reap, procs, STOP_WAIT)

    async def _spawn(self, i: int) -> None:
        here, there = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        with there:
            self._procs[i] = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "chronus_py.service.front",
                    str(self.listen.fileno()),
                    str(there.fileno()),
                    *self.args,
                ],
                pass_fds=(self.listen.fileno(), there.fileno()),
                # a terminal's Ctrl-C reaches this process alone, which stops the fronts itself
                start_new_session=True,
            )
        self._started[i] = time.monotonic()
        loop = asyncio.get_running_loop()
        link: list[Link] = []
        _, protocol = await loop.create_unix_connection(
            lambda: Link(lambda batch: self._forwarded(link[0], batch), lambda: self._lost(i)),
            sock=here,
        )
        link.append(protocol)
        self._links[i] = protocol

    def _forwarded(self, link: Link, batch: list[tuple]) -> None:
        for message in batch:
            task = asyncio.get_running_loop().create_task(self._answer(link, message))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _answer(self, link: Link, message: tuple) -> None:
        rid, method, path, raw_path, query, headers, body = message
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": raw_path,
            "query_string": query,
            "root_path": "",
            "headers": headers,
            "client": None,
            "server": self.address,
        }
        sent = [False]
        answer: dict[str, Any] = {"body": []}

        async def receive() -> dict:
            if not sent[0]:
                sent[0] = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.get_running_loop().create_future()  # no disconnect: the front waits
            raise AssertionError("unreachable")

        async def send(event: dict) -> None:
            if event["type"] == "http.response.start":
                answer["status"] = event["status"]
                answer["headers"] = list(event.get("headers", ()))
            elif event["type"] == "http.response.body":
                answer["body"].append(event.get("body", b""))

        try:
            await self.app(scope, receive, send)
        except Exception:  # noqa: BLE001 - the app's own errors are answered in the app
            log.exception("unexpected error on %s %s", method, path)
            link.send((rid, *_FAILED))
            return
        if "status" not in answer:
            link.send((rid, *_FAILED))
            return
        link.send((rid, answer["status"], answer["headers"], b"".join(answer["body"])))

    def _lost(self, i: int) -> None:
        """Front ``i``'s link closed: it died (or was stopped). Reap it and start another,
        unless the service stops or fronts keep dying at start."""
        if self._stopping:
            return
        task = asyncio.get_running_loop().create_task(self._restart(i))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _restart(self, i: int) -> None:
        proc = self._procs[i]
        code = None if proc is None else await asyncio.to_thread(proc.wait)
        if self._stopping:
            return
        quick = time.monotonic() - self._started[i] < QUICK
        self._quick[i] = self._quick[i] + 1 if quick else 0
        if self._quick[i] >= QUICK_DEATHS:
            log.error(
                '{"event": "fronts_failing", "front": %d, "exit_code": %s, "message": '
                '"a front process died %d times within %g s of its start; stopping"}',
                i,
                code,
                QUICK_DEATHS,
                QUICK,
            )
            self.exit_code = 1
            self.stop_service()
            return
        log.warning('{"event": "front_restarted", "front": %d, "exit_code": %s}', i, code)
        await self._spawn(i)


def _reap(procs: list[subprocess.Popen], wait: float) -> None:
    deadline = time.monotonic() + wait
    for proc in procs:
        try:
            proc.wait(max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
