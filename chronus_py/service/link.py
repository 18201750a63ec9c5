"""The link between a front process and the scheduler process (``fronts.py``, ``front.py``):
one Unix socket pair carrying batches of messages, each batch one frame (a 4-byte length, then
a pickle of the list of messages).

Why pickle: both ends are this program's own processes, joined by a socket pair that has no
name on disk and that no other process holds, so nothing but what the other end pickled is
ever unpickled; the messages are tuples of bytes, strings and integers, which the standard
library encodes faster than any JSON codec can (JSON has no bytes). Why batches: every message
queued in one turn of the event loop goes in one write, so a burst of requests costs one system
call on each side per turn, not one per request.
"""

from __future__ import annotations

import asyncio
import pickle
import struct
from typing import Any, Callable

_HEAD = struct.Struct("!I")


class Link(asyncio.Protocol):
    """One end of the link: ``send(message)`` queues a message for the next batch;
    ``on_messages`` gets each batch that arrives, ``on_lost`` is called once when the other end
    has gone (its process ended or closed the link)."""

    def __init__(
        self,
        on_messages: Callable[[list[Any]], None],
        on_lost: Callable[[], None],
    ):
        self._on_messages = on_messages
        self._on_lost = on_lost
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._out: list[Any] = []
        self._flush: asyncio.Handle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        messages: list[Any] = []
        start = 0
        while len(buffer) - start >= _HEAD.size:
            (size,) = _HEAD.unpack_from(buffer, start)
            end = start + _HEAD.size + size
            if len(buffer) < end:
                break
            messages.extend(pickle.loads(buffer[start + _HEAD.size : end]))
            start = end
        del buffer[:start]
        if messages:
            self._on_messages(messages)

    def send(self, message: Any) -> None:
        self._out.append(message)
        if self._flush is None:
            self._flush = asyncio.get_running_loop().call_soon(self._send)

    def _send(self) -> None:
        self._flush = None
        out, self._out = self._out, []
        if self._transport is None or self._transport.is_closing():
            return
        data = pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL)
        self._transport.write(_HEAD.pack(len(data)) + data)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        self._on_lost()
