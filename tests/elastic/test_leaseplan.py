"""Minimum satisfactory share on a free timeline, by hand."""

from __future__ import annotations

import numpy as np

from chronus_py.selector.timeline import Timeline, size_tables
from tests.elastic.helpers import job


def test_minimum_satisfactory_share_is_the_smallest_size_that_meets_the_deadline():
    j = job("a", 0, 300, 600, sizes=(1, 2, 4, 8), rates=(1.0, 1.8, 3.0, 4.0))
    tl = Timeline(0.0, 8, 60.0)
    # 300 s: 1 GPU does 300 it, 2 GPUs 540, 4 GPUs 900 >= 600: the share is 4, filled backwards
    # from the deadline: slots 4, 3, 2 give 540 it, slot 1 completes it
    lease = tl.fit(j, 600.0, 300.0, size_tables(j))
    assert lease.start == 1 and lease.sizes.tolist() == [4, 4, 4, 4]
    tl.reserve(lease)
    assert tl.free[:5].tolist() == [8, 4, 4, 4, 4]


def test_fill_takes_smaller_sizes_where_fewer_gpus_are_free_and_none_when_it_cannot_fit():
    j = job("a", 0, 240, 400, sizes=(1, 2, 4), rates=(1.0, 2.0, 4.0))
    tl = Timeline(0.0, 4, 60.0)
    tl.free[:4] = np.array([4, 4, 2, 1])
    # cap 1 does 240 it; cap 2 backwards: slot 3 has 1 GPU (60 it), slots 2, 1, 0 two (120 each)
    # = 420 >= 400, so the share is 2 and the fill reaches slot 0
    lease = tl.fit(j, 400.0, 240.0, size_tables(j))
    assert lease.start == 0 and lease.sizes.tolist() == [2, 2, 2, 1]
    # under cap 4 the same work needs only slots 1..3: 240 + 120 + 60
    assert tl.fill(j, 400.0, 240.0, 4, size_tables(j)).sizes.tolist() == [4, 2, 1]
    assert tl.fit(j, 1000.0, 240.0, size_tables(j)) is None
