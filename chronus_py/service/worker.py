"""One thread that runs what the event loop hands it, in order, and answers with an asyncio
future: the server's hand-offs to a worker thread (requests' batches, the scheduling loop's
steps), where the scheduler and the database are used off the event loop.

Why not ``asyncio.to_thread``: the default executor wraps each call in a context copy, a
``concurrent.futures`` future chained to an asyncio one and a check that the callable is no
coroutine; under churn (issue 27) those were 4-6% of the server's GIL time in session 14's
py-spy profile, for nothing these calls need. Here a call costs a queue put and one
``call_soon_threadsafe`` back.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from typing import Any, Callable

IDLE = 5.0
"""Seconds the thread waits for work before it ends (the next ``run`` starts a new one)."""


class Worker:
    """One thread that runs what it is given in order and settles an asyncio future with the
    outcome: one ``call_soon_threadsafe`` per call. It ends after ``IDLE`` seconds without
    work and is started again by the next ``run``."""

    def __init__(self, name: str):
        self.name = name
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._guard = threading.Lock()  # a job put while the thread decides to end is not lost
        self._alive = False

    def run(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future:
        """``fn(*args)`` in the thread, after what was handed it before; await the answer."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self._guard:
            self._jobs.put((loop, future, fn, args))
            if not self._alive:
                self._alive = True
                threading.Thread(target=self._serve, name=self.name, daemon=True).start()
        return future

    def _serve(self) -> None:
        while True:
            try:
                loop, future, fn, args = self._jobs.get(timeout=IDLE)
            except queue.Empty:
                with self._guard:
                    if self._jobs.empty():
                        self._alive = False
                        return
                continue
            try:
                outcome = (True, fn(*args))
            except BaseException as exc:  # noqa: BLE001 - raised again in the awaiting task
                outcome = (False, exc)
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
                loop.call_soon_threadsafe(_settle, future, outcome)


def _settle(future: asyncio.Future, outcome: tuple[bool, Any]) -> None:
    if future.done():  # the awaiting task was cancelled
        return
    ok, value = outcome
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)
