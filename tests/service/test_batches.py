"""Requests' calls queue up while a batch runs and go together in the next, each with its own
outcome, in order, under the request lock; a call whose request went away is not run."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import threading
import weakref

import pytest

from chronus_py.service.batches import MOST, Batches


async def request(answer: asyncio.Future):
    """A request's handler, as a task of its own: awaits its call's answer."""
    return await answer


def test_calls_that_queue_meanwhile_share_one_hand_off_and_keep_their_own_outcomes():
    ran: list[tuple[int, int]] = []  # (call, thread id)
    waiting: list[int] = []
    release = threading.Event()

    def slow(i: int) -> int:  # the first batch: holds the worker until the others queued
        release.wait(5)
        ran.append((i, threading.get_ident()))
        return i

    def work(i: int) -> int:
        ran.append((i, threading.get_ident()))
        if i == 1:  # the second batch took MOST calls at once; the last two wait for the third
            waiting.append(len(batches._waiting))
        if i == 3:
            raise ValueError("three")
        return 10 * i

    async def main():
        nonlocal batches
        lock = asyncio.Lock()
        batches = Batches(lock)
        first = asyncio.create_task(request(batches.call(slow, 0)))
        await asyncio.sleep(0.05)
        rest = [asyncio.create_task(request(batches.call(work, i))) for i in range(1, MOST + 3)]
        await asyncio.sleep(0.05)
        assert lock.locked()  # the first batch holds the request lock while it runs
        release.set()
        outcomes = await asyncio.gather(first, *rest, return_exceptions=True)
        return outcomes, lock.locked()

    batches = None
    outcomes, locked = asyncio.run(main())
    assert not locked and waiting == [2]
    assert outcomes[0] == 0 and outcomes[1:3] == [10, 20] and outcomes[4] == 40
    assert isinstance(outcomes[3], ValueError) and str(outcomes[3]) == "three"
    assert [i for i, _ in ran] == list(range(MOST + 3))  # in the order they came
    # The calls queued behind the first went in two batches (MOST, then the rest), each one
    # hand-off: the calls of a batch ran on one worker thread, one after another.
    second = {t for i, t in ran if 1 <= i <= MOST}
    assert len(second) == 1


def test_a_call_whose_request_went_away_before_its_batch_is_not_run():
    ran: list[str] = []
    release = threading.Event()

    async def main():
        batches = Batches(asyncio.Lock())
        first = asyncio.create_task(
            request(batches.call(lambda: release.wait(5) and ran.append("a")))
        )
        await asyncio.sleep(0.05)
        gone = asyncio.create_task(request(batches.call(ran.append, "gone")))
        kept = asyncio.create_task(request(batches.call(ran.append, "kept")))
        await asyncio.sleep(0.05)
        gone.cancel()  # the client went away while the first batch ran
        release.set()
        await first
        await kept
        with pytest.raises(asyncio.CancelledError):
            await gone

    asyncio.run(main())
    assert ran == ["a", "kept"]


def test_a_call_alone_runs_without_the_group_and_calls_together_within_one():
    groups: list[list[int]] = []

    @contextlib.contextmanager
    def group():
        groups.append([])
        yield

    def work(i: int) -> int:
        if groups:
            groups[-1].append(i)
        return i

    async def main():
        batches = Batches(asyncio.Lock(), group)
        assert await batches.call(work, 0) == 0  # alone: its own commit is the group's
        assert await asyncio.gather(*(batches.call(work, i) for i in (1, 2, 3))) == [1, 2, 3]

    asyncio.run(main())
    assert groups == [[1, 2, 3]]


def test_a_refused_call_leaves_no_reference_cycle_behind():
    """Under churn every refused call (a read of a cancelled job: 404) used to leave its whole
    batch in a reference cycle (the exception, its traceback, the batch's frame): 22,800-29,200
    objects a young pass had to free, passes of 87-105 ms that stopped every thread (issue 27,
    session 31). Freed by reference counting, ``arg`` is gone with the collector off."""

    class Arg:
        pass

    def refuse(arg: Arg) -> None:
        raise LookupError("no such job")

    async def main():
        batches = Batches(asyncio.Lock())
        arg = Arg()
        gone = weakref.ref(arg)
        try:
            await batches.call(refuse, arg)
        except LookupError as exc:
            assert str(exc) == "no such job"
            assert exc.__traceback__ is not None  # its lines are kept for the log
        del arg
        assert await batches.call(len, "next") == 4  # the worker thread lets go of the last
        return gone

    gc.collect()
    gc.disable()
    try:
        gone = asyncio.run(main())
        assert gone() is None
    finally:
        gc.enable()
