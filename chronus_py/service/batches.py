"""Requests' service calls, run a batch per hand-off to one worker thread under the request lock,
in one group of work (``group``: the service's one database transaction per batch).

Why: each request used to take the lock and hand its call to a worker thread on its own. Under
churn (500 submissions + 500 cancellations + 100 reads a second, issue 27) py-spy on the server
found a third of the time the GIL was held spent in that hand-off (``ThreadPoolExecutor.submit``,
the future's callbacks back to the loop), more than in the service's own calls. Calls that
queue up while one batch runs go together in the next one: one lock acquisition and one hand-off
for up to ``MOST`` calls. Each call keeps its own outcome (a result, or the exception it raised,
re-raised to its request alone), its own savepoint in the batch's transaction, and its order,
so nothing a request sees changes but when its answer comes: after its batch's commit, at most
``MOST`` calls after it began. At low rates a batch is one call, as before.

The hand-off is a thread of the batches' own (``worker.Worker``), not ``asyncio.to_thread``.
"""

from __future__ import annotations

import asyncio
import contextlib
import traceback
from dataclasses import dataclass
from typing import Any, Callable, ContextManager

from chronus_py.service.worker import Worker

MOST = 32
"""Calls per batch: a submission costs ~0.7 ms, so a batch holds the lock ~20 ms at most (the
rounds and a re-plan's commit steps take the same lock). Batches only fill when requests queue,
and a larger one costs less per call (one commit, one hand-off), so a backlog drains faster:
at the issue's churn the p99 over four alternated runs was 56-131 ms at 32 against 83-628 ms
at 16 (issue 27, session 14, "the churn's tail")."""


@dataclass(slots=True)
class _Call:
    fn: Callable[..., Any]
    args: tuple
    kwargs: dict
    answer: asyncio.Future


class Batches:
    """``await batches.call(fn, *args)``: ``fn(*args)`` in the worker thread, under ``lock``,
    inside ``group()``, in the next batch."""

    def __init__(
        self, lock: asyncio.Lock, group: Callable[[], ContextManager] = contextlib.nullcontext
    ):
        self.lock = lock
        self.group = group
        self._worker = Worker("chronus-requests")
        self._waiting: list[_Call] = []
        self._draining: asyncio.Task | None = None  # kept: the loop holds tasks only weakly

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> asyncio.Future:
        """Await the future it returns for ``fn(*args, **kwargs)``'s result or exception.

        A future rather than a coroutine: a coroutine's frame would hold the future while the
        exception it carries unwinds through that frame, so every refused call (a 404, a 409)
        would leave a reference cycle (the future, its exception, the traceback, the frame)
        for the cyclic collector, and its passes stop every thread."""
        loop = asyncio.get_running_loop()
        answer = loop.create_future()
        self._waiting.append(_Call(fn, args, kwargs, answer))
        if self._draining is None:
            self._draining = loop.create_task(self._drain())
        return answer

    async def _drain(self) -> None:
        try:
            while self._waiting:
                batch, self._waiting = self._waiting[:MOST], self._waiting[MOST:]
                # A request cancelled while it waited (its client went away) is not run, as
                # one cancelled while it waited for the lock was not.
                batch = [call for call in batch if not call.answer.done()]
                if not batch:
                    continue
                try:
                    async with self.lock:
                        outcomes = await self._worker.run(_run, batch, self.group)
                except asyncio.CancelledError:  # the loop shuts down
                    for call in batch:
                        if not call.answer.done():
                            call.answer.cancel()
                    raise
                except Exception as exc:  # noqa: BLE001 - the group failed: every call with it
                    outcomes = [(False, exc)] * len(batch)
                for call, (ok, value) in zip(batch, outcomes):
                    if call.answer.done():  # its request was cancelled (the client went away)
                        continue
                    if ok:
                        call.answer.set_result(value)
                    else:
                        # The traceback keeps its lines but not its frames' variables: ``_run``'s
                        # frame holds the whole batch, and with it this exception, a cycle.
                        traceback.clear_frames(value.__traceback__)
                        call.answer.set_exception(value)
        finally:
            self._draining = None


def _run(batch: list[_Call], group: Callable[[], ContextManager]) -> list[tuple[bool, Any]]:
    """Each call of ``batch`` in turn, in the worker thread, inside one ``group()``: (True, its
    result) or (False, the exception it raised). An exception of the group itself (its commit)
    is raised: then no call's work was kept. A call alone needs no group: its own commit is the
    group's, without the savepoint, the batch's transaction and the backend's (~5% of a
    request's CPU in-process, issue 27 session 14)."""
    outcomes: list[tuple[bool, Any]] = []
    with group() if len(batch) > 1 else contextlib.nullcontext():
        for call in batch:
            try:
                outcomes.append((True, call.fn(*call.args, **call.kwargs)))
            except Exception as exc:  # noqa: BLE001 - re-raised in its own request's handler
                outcomes.append((False, exc))
    return outcomes
