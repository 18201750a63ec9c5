"""A front process of ``chronus serve --http-workers N`` (``fronts.py`` starts them): it reads
HTTP on the listening socket it shares with the other fronts, under the same bounds on clients
as the single process (``connections.py``: read timeouts, the connection bound with a JSON 503,
a JSON 400 for bad framing), and forwards each request, its body read, to the scheduler process
over its link (``link.py``); the scheduler's app answers it there, after its commit, and the
front writes that answer. A front holds no state: the scheduler is the one that decides,
counts and commits.

Why: under churn the one process spent about a fifth of its time in HTTP (uvicorn's parser,
its request cycle, the writes), all of it holding the GIL the scheduler needs (issue 27).

    python -m chronus_py.service.front LISTEN_FD LINK_FD READ_TIMEOUT MAX_CONNECTIONS LOG_LEVEL
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import socket
import sys
from typing import Any, Callable

from chronus_py.service.api import MAX_BODY
from chronus_py.service.json_codec import encode
from chronus_py.service.link import Link

log = logging.getLogger("chronus.serve")
WATCH = 0.5
"""Seconds between checks that the scheduler process is still this front's parent: a re-plan
child forked from it holds the link's other end open for seconds after the scheduler dies."""

_GONE = (
    503,
    [(b"content-type", b"application/json")],
    encode({"error": "the scheduler process has stopped; retry later", "field": None}),
)


class Forward:
    """The front's ASGI app: each HTTP request, with its body, to the scheduler over the link,
    and the scheduler's answer back. ``stop`` ends the front's server (the link is gone)."""

    def __init__(self, link_socket: socket.socket, stop: Callable[[], None]):
        self._socket = link_socket
        self._stop = stop
        self._link: Link | None = None
        self._waiting: dict[int, asyncio.Future] = {}
        self._ids = itertools.count()
        self._watch: asyncio.Task | None = None

    async def __call__(self, scope: dict, receive, send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        body = await _body(scope, receive)
        if body is None:  # the client went away before its body arrived: nothing to do
            return
        if self._link is None:
            status, headers, out = _GONE
        else:
            rid = next(self._ids)
            answer = asyncio.get_running_loop().create_future()
            self._waiting[rid] = answer
            self._link.send(
                (
                    rid,
                    scope["method"],
                    scope["path"],
                    scope["raw_path"],
                    scope["query_string"],
                    scope["headers"],
                    body,
                )
            )
            try:
                status, headers, out = await answer
            finally:
                self._waiting.pop(rid, None)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": out})

    async def _lifespan(self, receive, send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                loop = asyncio.get_running_loop()
                _, self._link = await loop.create_unix_connection(
                    lambda: Link(self._answered, self._lost), sock=self._socket
                )
                self._watch = asyncio.create_task(_watch_parent(os.getppid(), self._lost))
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._watch is not None:
                    self._watch.cancel()
                link, self._link = self._link, None  # closed by this front: not "lost"
                if link is not None:
                    link.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    def _answered(self, answers: list[tuple[int, int, list, bytes]]) -> None:
        for rid, status, headers, body in answers:
            answer = self._waiting.get(rid)
            if answer is not None and not answer.done():
                answer.set_result((status, headers, body))

    def _lost(self) -> None:
        """The scheduler is gone: every waiting request gets a JSON 503 and the front stops."""
        if self._link is None:
            return
        self._link = None
        for answer in self._waiting.values():
            if not answer.done():
                answer.set_result(_GONE)
        log.warning('{"event": "front_stops", "why": "the scheduler is gone"}')
        self._stop()


async def _body(scope: dict, receive) -> bytes | None:
    """The request's body, at most ``MAX_BODY + 1`` bytes of it (the scheduler's app refuses a
    larger one as it would read it: by its ``Content-Length``, or once past ``MAX_BODY``); None
    if the client went away first."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            if value.isdigit() and int(value) > MAX_BODY:
                return b""  # refused by its header, unread, as the single process does
            break
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if not message.get("more_body", False) or size > MAX_BODY:
            return b"".join(chunks)


async def _watch_parent(parent: int, lost: Callable[[], None]) -> None:
    while os.getppid() == parent:
        await asyncio.sleep(WATCH)
    lost()


def main(argv: list[str]) -> int:
    import uvicorn

    from chronus_py.service.connections import guarded_protocol
    from chronus_py.service.server import line_handler, loop_factory

    listen_fd, link_fd, read_timeout, max_connections, log_level = argv
    logging.basicConfig(level=log_level.upper(), handlers=[line_handler()])
    server: list[Any] = []
    app = Forward(
        socket.socket(fileno=int(link_fd)), stop=lambda: setattr(server[0], "should_exit", True)
    )
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="on",
        log_config=None,  # uvicorn's lines through the service's handler (``line_handler``)
        http=guarded_protocol(float(read_timeout), int(max_connections)),
        ws="none",
        proxy_headers=False,
    )
    server.append(uvicorn.Server(config))
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        runner.run(server[0].serve(sockets=[socket.socket(fileno=int(listen_fd))]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
