import random
from itertools import chain

import numpy as np

from solvers.flat import joined


def test_joined_parts_equal_every_slot_read_one_by_one():
    rng = random.Random(16)
    for _ in range(2_000):
        parts = []
        for _ in range(rng.randint(0, 8)):
            kind, n = rng.random(), rng.randint(0, 6)
            start = rng.randint(-3, 20)
            if kind < 0.5:  # a block
                part = tuple(range(start, start + n))
            elif kind < 0.8:  # the ends of a block, not one
                part = tuple(rng.sample(range(start, start + n), n)) if n else ()
            else:
                part = tuple(rng.randint(-3, 30) for _ in range(n))
            if rng.random() < 0.1:
                part = tuple(np.int64(t) for t in part)
            parts.append(part)
        sizes = [len(p) for p in parts]
        expected = np.fromiter(chain.from_iterable(parts), dtype=np.int64, count=sum(sizes))
        got = joined(parts, sizes)
        assert got.dtype == np.int64 and got.tolist() == expected.tolist(), parts
