"""One int object per lease index, shared by every booking of the process.

Why: a plan books each guaranteed job's leases as a tuple of lease indices, and at 30 s leases
5,000 guarantees of hours of work hold millions of them. Built with ``tolist`` or unpickled,
each index above 256 was an int object of its own (28 bytes beside the tuple's 8-byte
reference: about 130 MB at 6,024 guarantees), which the service forked at every lease (a page
table to copy) and freed with every replaced plan (a decrement that frees each int, 117-157 ms
of CPU taken from the requests' share of the GIL: issue 27, sessions 14-15). Built as slices
of one table, every booking refers to the same int per lease: the plan built in-process
(``LeasePlan.book``, ``LeasePlan.rebook``), the one read from a re-plan's child
(``policies/replanned.py``) and the one it replaces alike, and freeing a plan frees no int.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


class LeaseNumbers:
    """The ints for a range of lease indices (one table for the process: :data:`NUMBERS`)."""

    def __init__(self) -> None:
        self.first = 0
        self.ints: tuple[int, ...] = ()

    def table(self, first: int, end: int) -> tuple[int, ...]:
        """The ints for lease indices ``first .. end - 1`` and more (``table[k - first]`` is
        ``k``): the ones already held where the ranges overlap, so plans booked one after the
        other share them. Grown with room to spare (a booking reaching one lease further does
        not rebuild it), and only from ``first`` on (the leases of the past go with the plans
        that booked them)."""
        held_end = self.first + len(self.ints)
        if not (self.first <= first and end <= held_end):
            end = max(end + (end - first) // 2, held_end)
            lo, hi = max(first, self.first), min(end, held_end)
            if lo < hi:
                kept = self.ints[lo - self.first : hi - self.first]
                fresh = tuple(range(first, lo)) + kept + tuple(range(hi, end))
            else:
                fresh = tuple(range(first, end))
            self.first, self.ints = first, fresh
        return self.ints[first - self.first :] if first > self.first else self.ints

    def tuples(
        self, leases: np.ndarray, counts: Sequence[int], floor: int
    ) -> list[tuple[int, ...]]:
        """``leases`` (absolute indices, none below ``floor``) cut into tuples of the next
        ``counts[i]`` each, of the shared ints: equal to ``tuple(part.tolist())`` per part.
        A part of consecutive leases (most bookings) is one slice of the table."""
        if not leases.size:
            return [() for _ in counts]
        floor = min(floor, int(leases.min()))
        table = self.table(floor, int(leases.max()) + 1)
        at = leases - floor
        # breaks[i]: how many steps other than +1 among the first i + 1 leases' successors
        breaks = np.concatenate(([0], np.cumsum(np.diff(at) != 1)))
        ends = np.cumsum(np.asarray(counts, dtype=np.int64))
        starts = ends - np.asarray(counts, dtype=np.int64)
        out: list[tuple[int, ...]] = []
        heads = at[np.minimum(starts, at.size - 1)].tolist()
        whole = (breaks[np.maximum(ends - 1, 0)] == breaks[starts.clip(max=at.size - 1)]).tolist()
        get = table.__getitem__
        for head, n, one, lo in zip(heads, counts, whole, starts.tolist()):
            if not n:
                out.append(())
            elif one:
                out.append(table[head : head + n])
            else:
                out.append(tuple(map(get, at[lo : lo + n].tolist())))
        return out


NUMBERS = LeaseNumbers()
