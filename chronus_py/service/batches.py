"""Requests' service calls, run a batch per hand-off to a worker thread under the request lock.

Why: each request used to take the lock and hand its call to a worker thread on its own. Under
churn (500 submissions + 500 cancellations + 100 reads a second, issue 27) py-spy on the server
found a third of the time the GIL was held spent in that hand-off (``ThreadPoolExecutor.submit``,
the future's callbacks back to the loop), more than in the service's own calls. Calls that
queue up while a batch runs go together in the next one: one lock acquisition and one hand-off
for up to ``MOST`` calls. Each call keeps its own outcome (a result, or the exception it raised,
re-raised to its request alone) and its own transaction, so nothing a request sees changes
but when its answer comes: at the end of its batch, at most ``MOST`` calls after it began.
At low rates a batch is one call, as before.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Callable

MOST = 16
"""Calls per batch: a submission costs ~0.7 ms, so a batch holds the lock ~10 ms at most (the
rounds and a re-plan's commit steps take the same lock)."""


@dataclass(slots=True)
class _Call:
    fn: Callable[..., Any]
    args: tuple
    kwargs: dict
    answer: asyncio.Future


class Batches:
    """``await batches.call(fn, *args)``: ``fn(*args)`` in a worker thread, under ``lock``, in
    the next batch."""

    def __init__(self, lock: asyncio.Lock):
        self.lock = lock
        self._waiting: list[_Call] = []
        self._draining: asyncio.Task | None = None  # kept: the loop holds tasks only weakly

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        answer = asyncio.get_running_loop().create_future()
        self._waiting.append(_Call(fn, args, kwargs, answer))
        if self._draining is None:
            self._draining = asyncio.get_running_loop().create_task(self._drain())
        return await answer

    async def _drain(self) -> None:
        try:
            while self._waiting:
                batch, self._waiting = self._waiting[:MOST], self._waiting[MOST:]
                # A request cancelled while it waited (its client went away) is not run, as
                # one cancelled while it waited for the lock was not.
                batch = [call for call in batch if not call.answer.done()]
                try:
                    async with self.lock:
                        outcomes = await asyncio.to_thread(_run, batch)
                except BaseException as exc:  # the hand-off itself failed (the loop shuts down)
                    for call in batch:
                        if not call.answer.done():
                            call.answer.set_exception(exc)
                    raise
                for call, (ok, value) in zip(batch, outcomes):
                    if call.answer.done():  # its request was cancelled (the client went away)
                        continue
                    if ok:
                        call.answer.set_result(value)
                    else:
                        call.answer.set_exception(value)
        finally:
            self._draining = None


def _run(batch: list[_Call]) -> list[tuple[bool, Any]]:
    """Each call of ``batch`` in turn, in the worker thread: (True, its result) or (False, the
    exception it raised)."""
    outcomes: list[tuple[bool, Any]] = []
    for call in batch:
        try:
            outcomes.append((True, call.fn(*call.args, **call.kwargs)))
        except Exception as exc:  # noqa: BLE001 - re-raised in its own request's handler
            outcomes.append((False, exc))
    return outcomes
