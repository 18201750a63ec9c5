"""One thread that runs what the event loop hands it, in order, and answers with an asyncio
future: the server's hand-offs to a worker thread (requests' batches, the scheduling loop's
steps), where the scheduler and the database are used off the event loop.

Why not ``asyncio.to_thread``: the default executor wraps each call in a context copy, a
``concurrent.futures`` future chained to an asyncio one and a check that the callable is no
coroutine; under churn (issue 27) those were 4-6% of the server's GIL time in session 14's
py-spy profile, for nothing these calls need.

Why a socket pair each way, not a queue and ``call_soon_threadsafe``: each hand-off wakes the
other thread, and those two wake-ups (a lock's release in the queue's put, the event loop's
eventfd write in ``call_soon_threadsafe``) are made with the GIL held: a thread the kernel
deschedules in them (the woken one preempting it, or anything else on a busy machine) holds
up every other thread of the server. Under churn at 330 requests a second they were 16-19% of
the server's GIL samples (py-spy, issue 27 session 16). A socket's ``send`` releases the GIL
for its system call, so the woken thread can run the moment it is woken.
"""

from __future__ import annotations

import asyncio
import collections
import select
import socket
import threading
from typing import Any, Callable

IDLE = 5.0
"""Seconds the thread waits for work before it ends (the next ``run`` starts a new one)."""


class Worker:
    """One thread that runs what it is given in order and settles an asyncio future with the
    outcome. It ends after ``IDLE`` seconds without work and is started again by the next
    ``run``. Each direction is a deque and one byte sent on a socket pair per item: the
    receiving side reads what bytes are there and then empties the deque, so a byte read
    early only means a later wake-up finds nothing to do; none is lost."""

    def __init__(self, name: str):
        self.name = name
        self._jobs: collections.deque = collections.deque()
        self._jobs_ready, self._jobs_wake = socket.socketpair()
        self._done: collections.deque = collections.deque()
        self._done_ready, self._done_wake = socket.socketpair()
        for sock in (self._jobs_ready, self._done_ready, self._done_wake):
            sock.setblocking(False)
        self._loop: asyncio.AbstractEventLoop | None = None  # the one reading the answers
        self._guard = threading.Lock()  # a job put while the thread decides to end is not lost
        self._alive = False

    def run(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future:
        """``fn(*args)`` in the thread, after what was handed it before; await the answer."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            loop.add_reader(self._done_ready.fileno(), self._settle_done)
            self._loop = loop
        future = loop.create_future()
        with self._guard:
            self._jobs.append((future, fn, args))
            self._jobs_wake.send(b"\0")
            if not self._alive:
                self._alive = True
                threading.Thread(target=self._serve, name=self.name, daemon=True).start()
        return future

    def _serve(self) -> None:
        while True:
            if not self._jobs:
                if not select.select([self._jobs_ready], [], [], IDLE)[0]:
                    with self._guard:
                        if not self._jobs:
                            self._alive = False
                            return
                _read_all(self._jobs_ready)
                continue
            future, fn, args = self._jobs.popleft()
            try:
                outcome = (True, fn(*args))
            except BaseException as exc:  # noqa: BLE001 - raised again in the awaiting task
                outcome = (False, exc)
            self._done.append((future, outcome))
            try:
                self._done_wake.send(b"\0")
            except BlockingIOError:  # the pair is full of wake-ups not read yet: one is enough
                pass

    def _settle_done(self) -> None:
        """In the event loop: settle every answer the thread has left."""
        _read_all(self._done_ready)
        done = self._done
        while done:
            future, (ok, value) = done.popleft()
            if future.done():  # the awaiting task was cancelled
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)


def _read_all(sock: socket.socket) -> None:
    """Read the wake-up bytes waiting on a non-blocking socket."""
    try:
        while sock.recv(4096):
            pass
    except BlockingIOError:
        pass
