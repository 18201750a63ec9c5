"""Bookings made in-process (``LeasePlan.book``, ``LeasePlan.rebook``) refer to the same int per
lease as each other and as a plan read from a re-plan's child, with the values a ``tolist``
gave (issue 27: with an int of their own per lease, freeing the service's first plan took
117-141 ms of CPU beside the requests, and between re-plans every arrival's booking added
more)."""

from __future__ import annotations

import pickle
import random

import numpy as np

from chronus_py.policies.replanned import Replanned
from chronus_py.selector.lease_numbers import SPAN, LeaseNumbers
from chronus_py.selector.plan import LeasePlan
from tests.service.test_replan_crossing import planned


def one_int_per_lease(*bookings: dict[str, tuple[int, ...]]) -> set[int]:
    ints: dict[int, int] = {}
    for booked in bookings:
        for leases in booked.values():
            for k in leases:
                assert ints.setdefault(k, id(k)) == id(k), k
    return set(ints)


def test_bookings_made_in_process_and_read_share_one_int_per_lease():
    plan = LeasePlan(30.0, 8, first=1000)
    plan.book("a", 1, np.array([1000, 1001, 1002]))
    plan.book("b", 2, np.array([1001, 1003, 1004, 1900]))  # two runs and a far lease
    taken = plan.booked
    plan.rebook(1001, 1000, ["c", "d", "e"], [1, 1, 1], np.array([0, 1, 2, 3, 5, 999]), [2, 0, 4])
    assert taken == {"a": (1000, 1001, 1002), "b": (1001, 1003, 1004, 1900)}
    assert plan.booked == {"c": (1001, 1002), "d": (), "e": (1003, 1004, 1006, 2000)}
    plan.book("f", 1, np.array([1002, 1003]))
    s = planned(3)  # a re-plan's bookings read from the child, from lease 1000 on
    selector = s.policy.selector
    selector.plan.booked = {j: tuple(k + 1000 for k in v) for j, v in selector.booked.items()}
    crossed = pickle.loads(pickle.dumps(Replanned(selector, set())))
    for _ in crossed.load():
        pass
    ints = one_int_per_lease(taken, plan.booked, crossed.selector.booked)
    assert {1000, 1001, 1002, 1003, 1900, 2000} <= ints


def test_tuples_equal_the_leases_they_are_cut_from():
    rng = random.Random(3)
    numbers = LeaseNumbers()
    for _ in range(200):
        floor = rng.randrange(0, 5000)
        counts = [rng.choice((0, 1, 2, 5, 40)) for _ in range(rng.randrange(1, 8))]
        parts = []
        for n in counts:
            first = floor + rng.randrange(0, 300)
            if rng.random() < 0.5:
                parts.append(list(range(first, first + n)))
            else:
                parts.append(sorted(rng.sample(range(first, first + 3 * n + 1), n)))
        leases = np.array([k for part in parts for k in part], dtype=np.int64)
        got = numbers.tuples(leases, counts, floor)
        assert got == [tuple(part) for part in parts]
        assert [numbers.one(np.array(part, dtype=np.int64), floor) for part in parts] == got
        assert all(type(k) is int for part in got for k in part)


def test_a_booking_far_ahead_gets_ints_of_its_own_not_a_table_as_long_as_its_reach():
    """A deadline may lie up to 1e15 s ahead (the inputs' bound): a table from the plan's first
    lease to it would hold billions of ints (CI, session 15: a worker killed by memory)."""
    numbers = LeaseNumbers()
    far = np.array([5, 10**12, 10**12 + 1], dtype=np.int64)
    assert numbers.one(far, 0) == (5, 10**12, 10**12 + 1)
    assert numbers.tuples(far, [1, 2], 0) == [(5,), (10**12, 10**12 + 1)]
    table, first = numbers.held(0, 10**12 + 2)
    assert tuple(table[10**12 - first : 10**12 + 2 - first]) == (10**12, 10**12 + 1)
    assert len(numbers.ints) <= SPAN and len(numbers.array) <= SPAN
