"""The restarts a plan makes a job pay, counted without sorting a block already in order, equal
the count on its sorted slots (``solvers.restarts.restarts``)."""

import random
from operator import sub

from solvers.restarts import restarts


def _sorted_count(slots: tuple[int, ...], running: bool) -> int:
    ordered = sorted(slots)
    if not ordered:
        return 0
    stopped = int(running and ordered[0] != 0)
    steps = list(map(sub, ordered[1:], ordered))
    return len(steps) - steps.count(1) + stopped


def test_restarts_of_blocks_in_order_equal_those_of_the_sorted_slots():
    rng = random.Random(16)
    for _ in range(20_000):
        n = rng.randint(0, 6)
        if rng.random() < 0.4:
            first = rng.randint(0, 5)
            slots = tuple(range(first, first + n))
        else:
            slots = tuple(rng.sample(range(12), n))
        for running in (True, False):
            assert restarts(slots, running=running) == _sorted_count(slots, running), slots
