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
  uvicorn's plain text, and a URL too long for it (``MAX_URL``) a JSON 414;
- a request line and headers over ``MAX_HEAD`` bytes get a JSON 431, and the connection is
  closed: the parser keeps a head's header (and uvicorn its URL) whole until it ends, so
  without a bound one connection buffered 73 MB of a never-ending header within the read
  timeout, and a thousand of them the machine's memory.

And a response's head and body go out in one write (:class:`_OneWrite`); the requests a
client sends by the hundred a second (a submission, a job's read, its cancellation) are
answered from here without the ASGI app's request and response objects (``_direct``, with
``api._Api.direct``), and an idle keep-alive connection's timeout is kept as the read
timeout is (:class:`_Deadline`). Each request's scope carries when it was read (``READ_AT``),
from which the API times its answer (``chronus_request_seconds``).
"""

from __future__ import annotations

import asyncio
import json
import time
from http import HTTPStatus
from typing import Callable

from uvicorn.protocols.http.httptools_impl import (
    STATUS_LINE,
    HttpToolsProtocol,
    RequestResponseCycle,
)

MAX_HEAD = 64 * 1024
"""Bytes a request's line and headers may take (nginx's default is 32 KB, Node's 16 KB): room
for any token, cookie and URL this API reads."""
MAX_URL = 65535
"""The longest URL httptools parses (its offsets are 16 bits): a longer one is refused as it
ends, and gets a 414, not the 400 of a malformed request."""
READ_AT = "chronus.read_at"
"""The scope's key for ``time.perf_counter()`` when the request's head was read (a pipelined
request's: when the answer before it was written), so that the time before its handler runs
(the event loop's queue) counts in its answer's."""


def guarded_protocol(
    read_timeout: float, max_connections: int, direct: Callable | None = None
) -> type[HttpToolsProtocol]:
    """The protocol class for ``uvicorn.Config(http=...)``, with these bounds, answering from
    the connection what ``direct`` takes (``api._Api.direct``; None: every request goes to the
    app). Given here, not looked up on the app uvicorn hands the protocol, which is the app
    itself only while uvicorn wraps it in no middleware (``proxy_headers``, trace logging).
    A ``staticmethod``: a plain function kept on the class would be bound to the protocol
    and called with it as its first argument."""
    return type(
        "GuardedHttpToolsProtocol",
        (_Guarded,),
        {
            "read_timeout": read_timeout,
            "max_connections": max_connections,
            "direct": None if direct is None else staticmethod(direct),
        },
    )


class _Guarded(HttpToolsProtocol):
    read_timeout: float
    max_connections: int
    direct: Callable | None  # which requests are answered from here (``guarded_protocol``)
    _reading: _Deadline  # the request being read, from its first byte (the read timeout)
    _idle: _Deadline  # an idle keep-alive connection, from its last answer
    _head: int | None = None
    """Bytes of the head being read, counted from the read after the one it began in (-1 in
    that read; None: no head being read); see ``_more_head``."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._reading = _Deadline(self.loop, self.read_timeout, self._read_too_long)
        self._idle = _Deadline(self.loop, self.timeout_keep_alive, self.timeout_keep_alive_handler)
        super().connection_made(_OneWrite(transport, self.loop))  # type: ignore[arg-type]
        if len(self.connections) > self.max_connections:
            self._answer(503, "too many open connections; retry later")
            return
        self._reading.start()

    def connection_lost(self, exc: Exception | None) -> None:
        self._reading.cancel()
        self._idle.cancel()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self._reading.start()  # the first byte of a request starts its clock
        super().data_received(data)
        if self._head is not None:  # this read ended inside a head
            self._more_head(len(data))

    def on_message_begin(self) -> None:
        # a pipelined request whose first bytes came with the previous one's last
        self._reading.start()
        self._head = -1
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        self._head = None
        super().on_headers_complete()

    def _more_head(self, read: int) -> None:
        """Count a read that ended inside a request's head; over ``MAX_HEAD``, a 431. The read
        the head began in is not counted (it may hold earlier pipelined requests whole), so
        a head is refused at most one read (uvloop's 256 KB) late, and never one within the
        bound: a head of one read costs this one test, not a count per read."""
        head = self._head
        self._head = head = 0 if head < 0 else head + read  # type: ignore[operator]
        if head > MAX_HEAD:
            self._too_long(431, f"the request line and headers are over {MAX_HEAD} bytes")

    def on_message_complete(self) -> None:
        self._reading.stop()
        super().on_message_complete()

    def _start_asgi_task(self, cycle: RequestResponseCycle, app) -> None:
        """A request the API answers from here (``_Api.direct``) runs as ``_direct``; any other
        through the ASGI app, as uvicorn runs it."""
        cycle.scope[READ_AT] = time.perf_counter()  # type: ignore[literal-required]
        answer = None
        if self.direct is not None and cycle.keep_alive and not cycle.waiting_for_100_continue:
            answer = self.direct(cycle.scope)
        if answer is None:
            super()._start_asgi_task(cycle, app)
            return
        task = self.loop.create_task(self._direct(cycle, answer))
        task.add_done_callback(self.tasks.discard)
        self.tasks.add(task)

    async def _direct(self, cycle: RequestResponseCycle, answer) -> None:
        """Read the request's whole body, have ``answer`` answer it, and write the answer as
        uvicorn would write the app's ``JSONResponse`` (its default headers, then
        ``content-length`` and ``content-type``), head and body in one write. The cycle's
        state moves as its ``send`` moves it, so pipelining, keep-alive, a shutdown's close
        and the read timeout treat it as any other request."""
        while cycle.more_body and not cycle.disconnected:
            self.flow.resume_reading()
            await cycle.message_event.wait()
            cycle.message_event.clear()
        if cycle.disconnected:
            return  # as the app's ``receive`` would have said: nothing to answer
        body, status = await answer(cycle.scope, bytes(cycle.body))
        if cycle.disconnected:
            return
        head = [STATUS_LINE[status]]
        for name, value in cycle.default_headers:
            head += (name, b": ", value, b"\r\n")
        head.append(b"content-length: %d\r\ncontent-type: application/json\r\n" % len(body))
        if not cycle.keep_alive:  # the server shuts down meanwhile (``shutdown``)
            head.append(b"connection: close\r\n")
        head += (b"\r\n", body)
        cycle.response_started = True
        self.transport.write_now(b"".join(head))
        cycle.response_complete = True
        cycle.message_event.set()
        if not cycle.keep_alive:
            self.transport.close()
        cycle.on_response()

    def on_response_complete(self) -> None:
        """uvicorn's, but an idle connection's keep-alive timeout is a :class:`_Deadline`, as
        the read timeout is: uvicorn sets a timer after every answer and cancels it at the
        next request's first bytes, a ``call_later`` and a cancel per request (uvicorn's
        ``on_response_complete`` was 1.9% of the server's GIL samples under churn, issue 27
        session 18)."""
        self.server_state.total_requests += 1
        if self.transport.is_closing():
            return
        self._idle.stop()
        self.flow.resume_reading()
        if self.pipeline:
            cycle, app = self.pipeline.pop()
            self._start_asgi_task(cycle, app)
            return
        self._idle.start(anew=True)

    def _unset_keepalive_if_required(self) -> None:
        self._idle.stop()  # new bytes: not idle

    def _unsupported_upgrade_warning(self) -> None:
        """An ``Upgrade`` request (WebSocket, h2c) is served as the plain request it also is,
        in one line of log: not uvicorn's second, advising to install a WebSocket library
        (the service has no WebSocket route, ``ws="none"``)."""
        self.logger.warning("Unsupported upgrade request.")

    def send_400_response(self, msg: str) -> None:
        self._too_long(400, "not a valid HTTP request (request line, a header, or its framing)")

    def _too_long(self, status: int, message: str) -> None:
        """Refuse the request being read: with a 414 if its URL is longer than ``MAX_URL`` (the
        URL read so far is uvicorn's ``url``, emptied when a request begins), else as given."""
        if len(getattr(self, "url", b"")) > MAX_URL:
            status, message = 414, f"the request's URL is over {MAX_URL} bytes"
        self._answer(status, message)

    def _read_too_long(self) -> None:
        """The request being read took longer than the read timeout: a 408, and closed."""
        cycle = self.cycle  # the last request's (done) until the late one's headers end
        if cycle is not None and cycle.response_started and not cycle.response_complete:
            self.transport.close()  # an answer is being written: no 408 can follow it
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


class _Deadline:
    """A timeout kept by one timer of the loop, set when counting starts and moved only when
    it fires: starting and stopping cost an attribute write, not a ``call_later`` and its
    cancel. A connection's read timeout (issue 27, session 16) and its keep-alive timeout
    (session 18) start and stop with every request under churn. ``expired`` is called once
    ``seconds`` have passed since :meth:`start` with no :meth:`stop` between."""

    __slots__ = ("loop", "seconds", "expired", "since", "_timer")

    def __init__(
        self, loop: asyncio.AbstractEventLoop, seconds: float, expired: Callable[[], None]
    ):
        self.loop, self.seconds, self.expired = loop, seconds, expired
        self.since: float | None = None  # when counting started (None: not counting)
        self._timer: asyncio.TimerHandle | None = None  # set whenever ``since`` is

    def start(self, *, anew: bool = False) -> None:
        """Count from now, unless counting already (and not ``anew``)."""
        if self.since is None or anew:
            self.since = self.loop.time()
        if self._timer is None:
            self._timer = self.loop.call_later(self.seconds, self._fire)

    def stop(self) -> None:
        """Stop counting; the timer, if set, finds that when it fires."""
        self.since = None

    def cancel(self) -> None:
        """Stop counting and drop the timer (the connection is gone)."""
        self.since = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _fire(self) -> None:
        self._timer = None
        if self.since is None:
            return
        left = self.since + self.seconds - self.loop.time()
        if left > 0:
            self._timer = self.loop.call_later(left, self._fire)
            return
        self.since = None
        self.expired()


class _OneWrite:
    """A connection's transport that sends a response's head with its body, in one write.

    uvicorn writes a response's status line and headers when the app starts it, then its body:
    two writes, each a system call made at once (uvloop) with the GIL held, and two packets
    for the client to read; under churn the two were 5-8% of the server's GIL time (py-spy,
    issue 27 session 15). Here a write is held until the next one, which takes it along, or
    until the loop's next turn (a body streamed in parts, a ``100 Continue``), so no write
    waits beyond the step that made it; closing sends what is held first."""

    __slots__ = ("_transport", "_loop", "_held", "_flush")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop):
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None
        self._flush: asyncio.Handle | None = None

    def write(self, data: bytes) -> None:
        held = self._held
        if held is None:
            self._held = data
            self._flush = self._loop.call_soon(self._send)
            return
        self._held = None
        self._flush.cancel()  # type: ignore[union-attr]  # its turn would find nothing held
        self._transport.write(held + data)

    def write_now(self, data: bytes) -> None:
        """Send ``data`` (after anything held) at once: a whole answer, nothing to wait for."""
        held, self._held = self._held, None
        if held is not None:
            self._flush.cancel()  # type: ignore[union-attr]
            data = held + data
        self._transport.write(data)

    def writelines(self, lines) -> None:
        self.write(b"".join(lines))

    def _send(self) -> None:
        """Send what is held, if anything: from the loop's turn after the write, or before a
        close. A turn that finds nothing held (a close took it) does nothing, so the handle
        that called it needs no cancelling."""
        held, self._held = self._held, None
        if held is not None:
            self._transport.write(held)

    def close(self) -> None:
        self._send()
        self._transport.close()

    def write_eof(self) -> None:
        self._send()
        self._transport.write_eof()

    def abort(self) -> None:
        self._held = None
        self._transport.abort()

    def __getattr__(self, name: str):
        return getattr(self._transport, name)
