"""The one lease plan (``selector/plan.py``) and its two fitting rules (``selector/fit.py``), by
hand: rigid bookings (constant GPUs on a set of leases), elastic ones (a size per lease), the
headroom, and forgetting the past."""

from __future__ import annotations

import numpy as np

from chronus_py.selector.fit import backward_fill, latest_leases, min_share, size_tables
from chronus_py.selector.plan import LeasePlan, Sizes
from tests.elastic.helpers import job


def test_rigid_and_elastic_bookings_share_one_grid_and_release_what_they_booked():
    plan = LeasePlan(60.0, 8)
    plan.book("r", 3, np.array([2, 3, 5]))
    plan.book_sizes("e", Sizes(1, np.array([1, 2, 4])))
    assert plan.free(0, 7).tolist() == [8, 7, 3, 1, 8, 5, 8]
    assert plan.booked == {"r": (2, 3, 5)} and plan.booked_leases == 3
    plan.release("r")
    assert plan.free(0, 7).tolist() == [8, 7, 6, 4, 8, 8, 8] and plan.booked_leases == 0
    plan.release("e")
    assert plan.free(0, 7).tolist() == [8] * 7 and not plan.sized and not plan.widths


def test_asking_from_a_later_lease_forgets_the_past_and_a_far_lease_grows_the_grid():
    plan = LeasePlan(60.0, 4)
    plan.book_sizes("e", Sizes(0, np.array([4, 3, 2, 1])))
    assert plan.free(2, 5).tolist() == [2, 3, 4] and plan.base == 2
    plan.release("e")  # only what is still ahead of the plan's first lease goes back
    assert plan.free(2, 5).tolist() == [4, 4, 4]
    assert plan.free(1_000, 1_003).tolist() == [4, 4, 4] and plan.used.size <= 128


def test_a_rebook_replaces_every_rigid_booking_from_its_first_lease():
    plan = LeasePlan(600.0, 4)
    plan.book("old", 4, np.array([0, 1]))
    taken = plan.booked
    plan.rebook(10, 3, ["a", "b"], [1, 2], np.array([0, 2, 2]), [2, 1])
    assert plan.booked == {"a": (10, 12), "b": (12,)} and taken == {"old": (0, 1)}
    assert plan.free(10, 13).tolist() == [3, 4, 1] and plan.booked_leases == 3


def test_the_headroom_keeps_a_share_of_each_lease_rounded_down():
    plan = LeasePlan(600.0, 8)
    assert plan.kept(0.5) == 4 and plan.kept(0.3) == 2 and plan.kept(0.0) == 0


def test_latest_leases_with_room_take_the_latest_before_the_end():
    plan = LeasePlan(600.0, 4)
    plan.book("x", 3, np.array([3, 4]))
    # 2 GPUs for 2 leases before lease 5: 3 and 4 have 1 GPU free, so 1 and 2
    assert latest_leases(plan, 0, 5, 2, 2).tolist() == [1, 2]
    # keeping 2 GPUs of every lease back from a 2-GPU job: leases 3 and 4 have none left
    assert latest_leases(plan, 0, 5, 2, 4, keep=2) is None
    assert latest_leases(plan, 0, 5, 2, 3, keep=2).tolist() == [0, 1, 2]


def test_minimum_satisfactory_share_is_the_smallest_size_that_meets_the_deadline():
    j = job("a", 0, 300, 600, sizes=(1, 2, 4, 8), rates=(1.0, 1.8, 3.0, 4.0))
    plan = LeasePlan(60.0, 8)
    # 300 s: 1 GPU does 300 it, 2 GPUs 540, 4 GPUs 900 >= 600: the share is 4, filled backwards
    # from the deadline: leases 4, 3, 2 give 540 it, lease 1 completes it
    sizes = min_share(plan, j, 600.0, 0.0, 300.0, size_tables(j))
    assert sizes.start == 1 and sizes.sizes.tolist() == [4, 4, 4, 4]
    plan.book_sizes("a", sizes)
    assert plan.free(0, 5).tolist() == [8, 4, 4, 4, 4]


def test_fill_takes_smaller_sizes_where_fewer_gpus_are_free_and_none_when_it_cannot_fit():
    j = job("a", 0, 240, 400, sizes=(1, 2, 4), rates=(1.0, 2.0, 4.0))
    plan = LeasePlan(60.0, 4)
    plan.book_sizes("x", Sizes(2, np.array([2, 3])))
    # cap 1 does 240 it; cap 2 backwards: lease 3 has 1 GPU (60 it), leases 2, 1, 0 two (120
    # each) = 420 >= 400, so the share is 2 and the fill reaches lease 0
    sizes = min_share(plan, j, 400.0, 0.0, 240.0, size_tables(j))
    assert sizes.start == 0 and sizes.sizes.tolist() == [2, 2, 2, 1]
    # under cap 4 the same work needs only leases 1..3: 240 + 120 + 60
    assert backward_fill(plan, 400.0, 0.0, 240.0, 4, size_tables(j)).sizes.tolist() == [4, 2, 1]
    assert min_share(plan, j, 1000.0, 0.0, 240.0, size_tables(j)) is None
    # from 30 s in, lease 0 holds only its last 30 s: at cap 4, 120 it there
    assert backward_fill(plan, 400.0, 30.0, 240.0, 4, size_tables(j)).sizes.tolist() == [4, 2, 1]
    assert backward_fill(plan, 460.0, 30.0, 240.0, 4, size_tables(j)).sizes.tolist() == [
        4,
        4,
        2,
        1,
    ]


def test_the_elastic_headroom_leaves_its_share_out_of_the_fill():
    j = job("a", 0, 240, 400, sizes=(1, 2, 4), rates=(1.0, 2.0, 4.0))
    plan = LeasePlan(60.0, 4)
    # headroom 0.5 keeps 2 of 4 GPUs: at most 2 per lease, 480 it in 240 s
    sizes = min_share(plan, j, 400.0, 0.0, 240.0, size_tables(j), headroom=0.5)
    assert sizes.sizes.max() == 2
    assert min_share(plan, j, 500.0, 0.0, 240.0, size_tables(j), headroom=0.5) is None
