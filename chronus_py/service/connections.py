"""Bounds on what one HTTP client may hold: how long a request may take to arrive, and how many
connections may be open at once.

uvicorn closes a keep-alive connection left idle after a response (``timeout_keep_alive``), but
nothing bounds a connection that never sends a request, headers that never end, or a body
shorter than its ``Content-Length``: each holds its connection for good (issue 27: 200 of them
stayed open for 90 s). Its ``limit_concurrency`` answers 503 to requests past a limit, but only
once their headers are complete, so slow clients are never counted out. This is uvicorn's
httptools protocol with those bounds added:

- a request, headers and body, must arrive within ``read_timeout`` seconds of its first byte,
  and a new connection must send its first byte within as long: else a JSON 408, and the
  connection is closed;
- a connection past ``max_connections`` open ones gets a JSON 503 at once and is closed;
- a request the HTTP parser refuses (e.g. ``Content-Length: -1``) gets the API's JSON 400, not
  uvicorn's plain text.
"""

from __future__ import annotations

import asyncio
import json
from http import HTTPStatus

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


def guarded_protocol(read_timeout: float, max_connections: int) -> type[HttpToolsProtocol]:
    """The protocol class for ``uvicorn.Config(http=...)``, with these bounds."""
    return type(
        "GuardedHttpToolsProtocol",
        (_Guarded,),
        {"read_timeout": read_timeout, "max_connections": max_connections},
    )


class _Guarded(HttpToolsProtocol):
    read_timeout: float
    max_connections: int
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            self._answer(503, "too many open connections; retry later")
            return
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self._arm()  # the first byte of a request starts its clock
        super().data_received(data)

    def on_message_begin(self) -> None:
        self._arm()  # a pipelined request whose first bytes came with the previous one's last
        super().on_message_begin()

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    def send_400_response(self, msg: str) -> None:
        self._answer(400, "not a valid HTTP request (request line, a header, or its framing)")

    def _arm(self) -> None:
        if self._deadline is None:
            self._deadline = self.loop.call_later(self.read_timeout, self._timed_out)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _timed_out(self) -> None:
        self._deadline = None
        if self.cycle is not None and self.cycle.response_started:
            self.transport.close()
            return
        self._answer(408, f"the request did not arrive within {self.read_timeout:g} s")

    def _answer(self, status: int, message: str) -> None:
        """A JSON error written straight to the socket, then the connection closed."""
        if self.transport.is_closing():
            return
        body = json.dumps({"error": message, "field": None}).encode()
        head = (
            f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
            "content-type: application/json\r\n"
            f"content-length: {len(body)}\r\n"
            "connection: close\r\n\r\n"
        )
        self.transport.write(head.encode() + body)
        self.transport.close()
