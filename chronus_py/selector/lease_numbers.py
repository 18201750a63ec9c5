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

SPAN = 1 << 18
"""The most leases the table holds (~12 MB of ints, tuple and array): years of 20-minute leases,
three months of 30 s ones. A plan reaching further from its first lease (a deadline far ahead,
which the inputs' bounds allow up to 1e15 s) gets ints of its own, as before the table, rather
than a table as long as its reach."""


class LeaseNumbers:
    """The ints for a range of lease indices (one table for the process: :data:`NUMBERS`)."""

    def __init__(self) -> None:
        self.first = 0
        self.ints: tuple[int, ...] = ()
        self.array = np.empty(0, dtype=object)  # the same ints, to pick many in one call

    def held(self, first: int, end: int) -> tuple[Sequence[int], int]:
        """The table and the lease of its first entry (``table[k - offset]`` is ``k``), holding
        at least lease indices ``first .. end - 1``: the ints already held where the ranges
        overlap, so plans booked one after the other share them. Grown with room to spare (a
        booking reaching one lease further does not rebuild it), and only from ``first`` on
        (the leases of the past go with the plans that booked them). Not sliced: a slice of
        thousands of leases per booking cost more than the booking. A range longer than
        :data:`SPAN` comes back as a ``range`` (its slices are ranges: make tuples of them)."""
        if end - first > SPAN:
            return range(first, end), first
        held_end = self.first + len(self.ints)
        if not (self.first <= first and end <= held_end):
            end = min(max(end + (end - first) // 2, held_end), first + SPAN)
            lo, hi = max(first, self.first), min(end, held_end)
            if lo < hi:
                kept = self.ints[lo - self.first : hi - self.first]
                fresh = tuple(range(first, lo)) + kept + tuple(range(hi, end))
            else:
                fresh = tuple(range(first, end))
            self.first, self.ints = first, fresh
            self.array = np.empty(len(fresh), dtype=object)
            self.array[:] = fresh
        return self.ints, self.first

    def one(self, leases: np.ndarray, floor: int) -> tuple[int, ...]:
        """``leases`` (sorted absolute indices, none below ``floor``) as a tuple of the shared
        ints: equal to ``tuple(leases.tolist())``, and about as fast (picked in one call)."""
        if not leases.size:
            return ()
        first, end = min(floor, int(leases[0])), int(leases[-1]) + 1
        if end - first > SPAN:
            return tuple(leases.tolist())
        _, offset = self.held(first, end)
        return tuple(self.array[leases - offset].tolist())

    def tuples(
        self, leases: np.ndarray, counts: Sequence[int], floor: int
    ) -> list[tuple[int, ...]]:
        """``leases`` (absolute indices, none below ``floor``) cut into tuples of the next
        ``counts[i]`` each, of the shared ints: equal to ``tuple(part.tolist())`` per part."""
        if not leases.size:
            return [() for _ in counts]
        first, end = min(floor, int(leases.min())), int(leases.max()) + 1
        if end - first > SPAN:
            picked = leases.tolist()
        else:
            _, offset = self.held(first, end)
            picked = self.array[leases - offset].tolist()
        out, end = [], 0
        for n in counts:
            out.append(tuple(picked[end : end + n]))
            end += n
        return out


NUMBERS = LeaseNumbers()
