"""The lease plan: GPUs booked per lease on one absolute grid, and each promised job's booking.

One state serves rigid and elastic plans. Leases are numbered from time 0 (lease ``k`` is
``[k*L, (k+1)*L)``, ``L`` being ``ChronusSettings.lease``: ``leases.py``), so a plan made at one
decision stays meaningful at the next. A booking is what a promise holds:
- rigid (``booked``): constant GPUs (``widths``) on a set of leases, sorted; the lease selector
  books them (``selector/admission.py``), and replaces them all at every re-plan (``rebook``);
  each lease of a booking is the process's one int for it (``lease_numbers.py``);
- elastic (``sized``): a size per lease from a first lease on (:class:`Sizes`); the elastic
  policies (``policies/elastic.py``) book them one by one.

How a job is fitted into the free capacity is not the plan's business: ``selector/fit.py`` has
the two rules (the latest leases with room at a fixed width; minimum satisfactory share). The
share of each lease new promises leave unbooked, the ``headroom``, is worked out here, once
(:meth:`LeasePlan.kept`).

Memory follows the leases that matter, never the value of a time: the plan keeps only leases
from ``base`` on, and forgets the past when asked about a later lease (no plan looks back past
the lease it starts in).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from chronus_py.selector.lease_numbers import NUMBERS

GRID = 64
"""Leases the grid starts with; it doubles when a booking or a question reaches past it."""


@dataclass(frozen=True, slots=True)
class Sizes:
    """An elastic booking: ``sizes[i]`` GPUs in lease ``start + i``."""

    start: int
    sizes: np.ndarray

    @property
    def end(self) -> int:
        return self.start + len(self.sizes)

    def at(self, lease: int) -> int:
        i = lease - self.start
        return int(self.sizes[i]) if 0 <= i < len(self.sizes) else 0


class LeasePlan:
    """GPUs booked per lease from lease ``base`` on (``used``; ``first`` to start with), and the
    bookings that hold them.

    ``capacity`` is the GPUs a lease has; what is free is ``capacity - used``. ``booked_leases``
    counts the leases of the rigid bookings (kept as they change: the selector sizes its
    windows by it at every admission). ``version`` counts the changes of bookings, so a
    caller may keep an answer about the plan until the next (``LeaseSelector._search``)."""

    def __init__(self, lease: float, capacity: int, first: int = 0) -> None:
        self.lease = lease
        self.capacity = capacity
        self.base = first
        self.used = np.zeros(GRID, dtype=np.int64)
        self.booked: dict[str, tuple[int, ...]] = {}
        self.widths: dict[str, int] = {}
        self.sized: dict[str, Sizes] = {}
        self.booked_leases = 0
        self.version = 0

    # -- the headroom -------------------------------------------------------------------------
    def kept(self, headroom: float) -> int:
        """GPUs of each lease new promises leave unbooked: the ``headroom`` share of the
        capacity, rounded down. (How a rigid job wider than what is left is admitted is the
        selector's rule: ``LeaseSelector._place``.)"""
        return max(0, int(headroom * self.capacity))

    # -- questions ----------------------------------------------------------------------------
    def window(self, first: int, last: int) -> np.ndarray:
        """GPUs booked in leases ``first .. last - 1`` (a view: read it, do not write it);
        leases before ``first`` are forgotten."""
        self.forget_before(first)
        self._grow(last)
        return self.used[first - self.base : last - self.base]

    def free(self, first: int, last: int) -> np.ndarray:
        """GPUs not booked in leases ``first .. last - 1`` (a new array)."""
        return self.capacity - self.window(first, last)

    # -- bookings -----------------------------------------------------------------------------
    def book(self, job_id: str, gpus: int, leases: np.ndarray) -> None:
        """A rigid booking: ``gpus`` GPUs in each of ``leases`` (sorted, from ``base`` on)."""
        self.version += 1
        self.booked_leases += leases.size - len(self.booked.get(job_id, ()))
        self.booked[job_id] = NUMBERS.one(leases, self.base)
        self.widths[job_id] = gpus
        self._grow(int(leases[-1]) + 1)
        self.used[leases - self.base] += gpus

    def book_sizes(self, job_id: str, sizes: Sizes) -> None:
        """An elastic booking; the part of it before ``base`` is past and not counted."""
        self.version += 1
        self.sized[job_id] = sizes
        self._add(sizes, 1)

    def release(self, job_id: str) -> None:
        """Give a job's booking back (what of it is still ahead of ``base``)."""
        self.version += 1
        sizes = self.sized.pop(job_id, None)
        if sizes is not None:
            self._add(sizes, -1)
        leases = self.booked.pop(job_id, None)
        if leases is None:
            return
        self.booked_leases -= len(leases)
        gpus = self.widths.pop(job_id)
        ahead = np.asarray(leases, dtype=np.int64)
        ahead = ahead[ahead >= self.base]
        self.used[ahead - self.base] -= gpus

    def rebook(
        self,
        first: int,
        horizon: int,
        jobs: list[str],
        gpus: list[int],
        slots: np.ndarray,
        counts: list[int],
    ) -> None:
        """Replace every rigid booking at once (a re-plan): ``jobs[i]`` holds ``gpus[i]`` GPUs on
        the next ``counts[i]`` of ``slots``, lease indices relative to ``first`` (the plan's new
        ``base``) within ``horizon``. ``booked`` becomes a new mapping, so one taken before
        still shows the plan replaced."""
        self.version += 1
        self.used = np.zeros(max(GRID, horizon + 1), dtype=np.int64)
        self.base = first
        np.add.at(self.used, slots, np.repeat(np.array(gpus, dtype=np.int64), counts))
        self.booked = dict(zip(jobs, NUMBERS.tuples(slots + first, counts, first)))
        self.widths = dict(zip(jobs, gpus))
        self.booked_leases = int(slots.size)

    def without_bookings(self) -> LeasePlan:
        """A copy holding the same GPUs per lease but no rigid bookings (a re-planned selector
        sends its bookings separately, in pieces: ``policies/replanned.py``)."""
        bare = copy.copy(self)
        bare.booked = {}
        return bare

    # -- the grid -----------------------------------------------------------------------------
    def forget_before(self, first: int) -> None:
        """Drop leases before ``first``: no plan looks back past the lease it starts in."""
        shift = first - self.base
        if shift <= 0:
            return
        self.used = self.used[shift:] if shift < self.used.size else np.zeros(GRID, np.int64)
        self.base = first

    def _grow(self, last: int) -> None:
        size = last - self.base
        if size > self.used.size:
            extra = max(size, 2 * self.used.size) - self.used.size
            self.used = np.concatenate([self.used, np.zeros(extra, dtype=np.int64)])

    def _add(self, sizes: Sizes, sign: int) -> None:
        lo, hi = sizes.start - self.base, sizes.end - self.base
        self._grow(sizes.end)
        if hi <= 0:
            return
        cut = max(0, -lo)
        self.used[max(lo, 0) : hi] += sign * sizes.sizes[cut:]
