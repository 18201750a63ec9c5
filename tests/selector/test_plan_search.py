"""The search of the lease plan made cheaper with the same answers (issue 27, session 15):
``latest_leases`` compares the plan's window of booked GPUs in place, and must answer as the
solvers' packer, ``latest_slots``, on the free GPUs; the selector keeps its last search's
answer only until a booking changes the plan."""

from __future__ import annotations

import random

import numpy as np

from chronus_py.selector import ChronusSettings, LeaseSelector
from chronus_py.selector.admission import Ask
from chronus_py.selector.fit import latest_leases
from chronus_py.selector.plan import LeasePlan
from solvers import latest_slots


def _by_free_gpus(plan, first, end, gpus, need, keep):
    free = plan.free(first, end) - keep
    slots = latest_slots(free, gpus, 0, end - first, need)
    return None if slots is None else slots + first


def test_latest_leases_answers_as_latest_slots_on_the_free_gpus():
    rng = random.Random(7)
    answered = 0
    for _ in range(400):
        capacity = rng.choice([8, 32, 96, 8192])
        plan = LeasePlan(1200.0, capacity, first=rng.randint(0, 5))
        for j in range(rng.randint(0, 30)):
            leases = sorted(rng.sample(range(plan.base, plan.base + 150), rng.randint(1, 10)))
            plan.book(f"j{j}", rng.randint(1, capacity), np.array(leases, dtype=np.int64))
            if rng.random() < 0.2:
                plan.release(f"j{rng.randint(0, j)}")
        first = plan.base + rng.randint(0, 20)
        end = first + rng.randint(-2, 200)
        ask = (first, end, rng.randint(1, capacity), rng.randint(0, 20), rng.randint(0, capacity))
        expected, got = _by_free_gpus(plan, *ask), latest_leases(plan, *ask)
        assert (expected is None) == (got is None), ask
        if expected is not None:
            assert got.tolist() == expected.tolist() and got.dtype == expected.dtype, ask
            answered += 1
    assert 100 < answered < 300  # both answers were tested


def test_a_search_asked_again_after_a_booking_sees_the_booking():
    selector = LeaseSelector(ChronusSettings(headroom=0.0), capacity=8)
    selector.plan.book("far", 8, np.array([100], dtype=np.int64))
    ask = Ask(10 * 1200.0, 8, 1200.0, 0, 0.0)  # all 8 GPUs for a lease, by the end of lease 9
    assert selector._search(ask).tolist() == [9]
    assert selector._search(ask).tolist() == [9]  # kept: nothing changed
    # as many bookings as before, but another plan
    selector.plan.release("far")
    selector.plan.book("near", 8, np.arange(0, 10, dtype=np.int64))
    assert selector._search(ask) is None
    selector.plan.release("near")
    assert selector._search(ask).tolist() == [9]
