"""GPU choice inside a node (lowest common cell, best fit) and the best-fit slot index."""

from __future__ import annotations

from pathlib import Path

import pytest

from placement import CellAllocator
from placement.packing import SlotIndex, bit_positions, lca_size, pick

NODE = (1, 2, 4, 8)  # 2 sockets x 2 switches x 2 GPUs


def bits(*positions: int) -> int:
    return sum(1 << p for p in positions)


@pytest.mark.parametrize(
    "free, n, expected",
    [
        (bits(*range(8)), 1, bits(0)),
        (bits(*range(8)), 2, bits(0, 1)),
        (bits(*range(8)), 4, bits(0, 1, 2, 3)),
        (bits(*range(8)), 3, bits(0, 1, 2)),
        (bits(*range(8)), 5, bits(0, 1, 2, 3, 4)),
        # a lone free GPU next to a busy one is taken before breaking a free pair
        (bits(1, 2, 3), 1, bits(1)),
        # a free switch pair beats two GPUs of different switches
        (bits(0, 2, 3), 2, bits(2, 3)),
        # no free pair: stay inside one socket if possible
        (bits(0, 2, 4), 2, bits(0, 2)),
        # the socket with exactly four free GPUs, not the emptier node half
        (bits(0, 1, 4, 5, 6, 7), 4, bits(4, 5, 6, 7)),
        # best fit among sockets that hold the pod: the busier one
        (bits(0, 1, 2, 4, 5, 6, 7), 3, bits(0, 1, 2)),
        (bits(0, 4), 3, 0),
    ],
)
def test_pick_lowest_common_cell_then_best_fit(free, n, expected):
    assert pick(NODE, free, n) == expected


def test_pick_result_is_a_subset_and_sized():
    for free in range(256):
        for n in range(1, 9):
            got = pick(NODE, free, n)
            if free.bit_count() >= n:
                assert got & ~free == 0 and got.bit_count() == n
            else:
                assert got == 0


def test_lca_size_and_bit_positions():
    assert lca_size(NODE, bits(0)) == 1
    assert lca_size(NODE, bits(2, 3)) == 2
    assert lca_size(NODE, bits(1, 2)) == 4
    assert lca_size(NODE, bits(3, 4)) == 8
    assert bit_positions(bits(0, 5, 7)) == (0, 5, 7)


def test_slot_index_best_fit_and_stale_entries():
    allocator = CellAllocator(Path(__file__).parent / "configs" / "rack-2x2.yaml")
    n0, n1, n2, _ = allocator.topology.all_nodes()
    index = SlotIndex()
    for node in (n0, n1, n2):
        index.put(("t", "c"), node)
    assert index.best_fit(("t", "c"), 8) is n0  # all empty: lowest id
    n1.nfree = 3
    index.refresh(n1)
    assert index.best_fit(("t", "c"), 2) is n1  # busiest that fits
    assert index.best_fit(("t", "c"), 4) is n0
    index.drop(n0)
    assert index.best_fit(("t", "c"), 4) is n2
    index.drop(n1)
    index.drop(n2)
    assert index.best_fit(("t", "c"), 1) is None
    assert index.best_fit(("other", "c"), 1) is None
