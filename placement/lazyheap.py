"""Bucketed heaps with lazy deletion, shared by :class:`placement.packing.SlotIndex` (slots by free
GPUs) and :class:`placement.idle.IdleNodes` (nodes by holder, guaranteed and free GPUs).

Both keep cells in one heap of ``(id, version, cell)`` per bucket, plus a live count per bucket.
A cell that moves gets a new version and a new entry; its old entries go stale and are dropped when
they reach the top of their heap, or all at once when a heap holds more stale entries than live
ones. An entry is current exactly when its version is the cell's version now, so the two indexes
differ only in which version attribute they read (a node can be in both at once).
"""

from __future__ import annotations

import heapq
from typing import Callable, Iterable

from placement.cells import Cell

Version = Callable[[Cell], int]  # e.g. operator.attrgetter("bver")


def first_current(
    heaps: list[list], live: list[int], order: Iterable[int], version: Version
) -> Cell | None:
    """The lowest-id current cell of the first bucket in ``order`` that holds one; stale entries
    met on the way are popped."""
    for b in order:
        if not live[b]:
            continue
        heap = heaps[b]
        while heap:
            _, ver, cell = heap[0]
            if version(cell) == ver:
                return cell
            heapq.heappop(heap)
    return None


def push(heap: list, live: int, cell: Cell, ver: int, version: Version) -> None:
    """Add ``cell`` at version ``ver`` to a bucket's heap whose live count (with it) is ``live``,
    compacting the heap when stale entries outnumber live ones (plus some slack)."""
    heapq.heappush(heap, (cell.id, ver, cell))
    if len(heap) > 2 * live + 32:
        heap[:] = [e for e in heap if version(e[2]) == e[1]]
        heapq.heapify(heap)
