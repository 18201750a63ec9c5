"""A Chronus re-plan as it crosses from the service's forked child to the service: the
re-planned lease selector, with its mappings of one entry per job (bookings, promises, tiers)
as plain numbers, put back in steps, and the jobs whose tier changed.

Why steps: a plan books every guaranteed job's leases as a tuple of lease indices, and at
30 s leases 5,000 guarantees of hours of work hold millions of them. Unpickled in one call the
plan took 2 s (28 MB), and freeing the replaced one 0.3-0.5 s, each one C call during which no
other thread runs, so every request waited that long even though neither holds the request
lock. Read (:meth:`Replanned.load`) and freed (:func:`release`) a piece at a time, other
threads run between two pieces.

Why numbers: even in pieces, reading the result was 220-300 ms of CPU in the service's worker
thread, taken from the requests' share of the GIL (issue 27, session 14). Unpickled, every
lease of every tuple was an int object of its own (28 bytes beside the tuple's 8-byte
reference: about 130 MB at 6,024 guarantees and 4.5 million leases, which the service then
forked at the next lease and freed with the replaced plan), every promise a frozen dataclass
and every tier an enum member, each one Python call. A booking is mostly one block of
consecutive leases: it crosses as its first lease and length (:class:`Bookings`) and is built
as a slice of the process's one table of lease numbers (``selector/lease_numbers.py``), so
every booking refers to the same int per lease, the old plan's and the new one's alike, and
freeing the replaced plan frees no int either; promises and tiers cross as lists of numbers
(:class:`Promises`, :class:`Tiers`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from itertools import chain
from typing import Iterator, Mapping

import numpy as np

from chronus_py.jobs.model import DeadlineOption
from chronus_py.selector import LeaseSelector, Tier
from chronus_py.selector.by_lease import BookedByLease
from chronus_py.selector.lease_numbers import NUMBERS

PIECE = 32
"""Jobs per piece of bookings built or freed: under a millisecond at 30 s leases."""
STEP = 1024
"""Jobs per step of promises or tiers put back: under a millisecond."""


@dataclass
class Bookings:
    """Booked leases as runs of consecutive leases: ``jobs`` in the plan's order, ``runs[i]``
    the number of runs of ``jobs[i]``, and every run, one job after the other, from lease
    ``starts[j]`` for ``lengths[j]`` leases. A booking is mostly one block (all 6,024 of
    ``benchmarks/replan_commit.py``'s), so this is a few numbers per job where the leases
    themselves were 4.5 million."""

    jobs: list[str]
    runs: list[int]
    starts: list[int]
    lengths: list[int]

    @classmethod
    def of(cls, booked: Mapping[str, tuple[int, ...]]) -> Bookings:
        runs, starts, lengths = [], [], []
        for leases in booked.values():  # sorted and distinct (``LeasePlan``)
            if leases and leases[-1] - leases[0] + 1 == len(leases):
                runs.append(1)
                starts.append(leases[0])
                lengths.append(len(leases))
                continue
            at = np.asarray(leases, dtype=np.int64)
            cuts = np.flatnonzero(np.diff(at) != 1) + 1
            heads = np.concatenate(([0], cuts)) if at.size else cuts
            runs.append(int(heads.size))
            starts += at[heads].tolist()
            lengths += np.diff(np.append(heads, at.size)).tolist()
        return cls(list(booked), runs, starts, lengths)

    def into(self, booked: dict[str, tuple[int, ...]]) -> Iterator[None]:
        """Book every job into ``booked`` as a tuple of the shared lease ints (slices of one
        table), ``PIECE`` jobs a step."""
        if not self.jobs:
            return
        lo = min(self.starts, default=0)
        end = max((s + n for s, n in zip(self.starts, self.lengths)), default=lo)
        table, first = NUMBERS.held(lo, end)
        k = 0
        for i in range(0, len(self.jobs), PIECE):
            for job, runs in zip(self.jobs[i : i + PIECE], self.runs[i : i + PIECE]):
                spans = [
                    table[s - first : s - first + n]
                    for s, n in zip(self.starts[k : k + runs], self.lengths[k : k + runs])
                ]
                booked[job] = tuple(spans[0]) if runs == 1 else tuple(chain.from_iterable(spans))
                k += runs
            yield

    def by_lease(self, booked: dict[str, tuple[int, ...]]) -> BookedByLease:
        """The index of ``booked``, once :meth:`into` filled it, by lease."""
        starts = np.asarray(self.starts, dtype=np.int64)
        owners = np.repeat(np.arange(len(self.jobs)), self.runs)
        return BookedByLease(booked, self.jobs, owners, starts, starts + self.lengths)


@dataclass
class Promises:
    """Each promised job's deadline option, as ``jobs`` (in the plan's order) and the options'
    ``at`` and ``value``: numbers pickle in bulk, where a frozen dataclass each took one Python
    call per object to unpickle."""

    jobs: list[str]
    at: list[float]
    value: list[float]

    @classmethod
    def of(cls, guarantees: Mapping[str, DeadlineOption]) -> Promises:
        options = guarantees.values()
        return cls(list(guarantees), [o.at for o in options], [o.value for o in options])

    def into(self, guarantees: dict[str, DeadlineOption]) -> Iterator[None]:
        for i in range(0, len(self.jobs), STEP):
            part = slice(i, i + STEP)
            guarantees.update(
                zip(self.jobs[part], map(DeadlineOption, self.at[part], self.value[part]))
            )
            yield


TIERS = tuple(Tier)
"""Each tier by its value (``TIERS[t.value] is t``)."""


@dataclass
class Tiers:
    """Each job's tier other than SPOT, as ``jobs`` (in the selector's order) and the tiers'
    values (an enum member unpickled is a Python call of its class)."""

    jobs: list[str]
    values: list[int]

    @classmethod
    def of(cls, tiers: Mapping[str, Tier]) -> Tiers:
        return cls(list(tiers), [t.value for t in tiers.values()])

    def into(self, tiers: dict[str, Tier]) -> Iterator[None]:
        for i in range(0, len(self.jobs), STEP):
            part = slice(i, i + STEP)
            tiers.update(zip(self.jobs[part], map(TIERS.__getitem__, self.values[part])))
            yield


@dataclass
class Replanned:
    """``selector`` re-planned for the new lease; ``changed`` the jobs whose tier changed.
    Crossed (pickled), the selector comes without its mappings of one entry per job, which
    follow in ``parts`` and are put back in steps by :meth:`load`."""

    selector: LeaseSelector
    changed: set[str]
    parts: tuple[Bookings, Promises, Tiers] | None = None

    def __getstate__(self) -> dict:
        selector = copy.copy(self.selector)
        parts = (
            Bookings.of(selector.booked),
            Promises.of(selector.guarantees),
            Tiers.of(selector.tiers),
        )
        selector.plan = selector.plan.without_bookings()  # its GPUs per lease cross whole
        selector.guarantees, selector.tiers = {}, {}
        # The hint a re-plan starts from is rebuilt from the bookings by the next re-plan, so
        # the one this re-plan started from need not cross (it is as large as the bookings);
        # nor the cache of plan facts, kept per booking object, which the bookings built in
        # the parent are not (it could never be hit there).
        selector._previous = ({}, 0)
        selector._facts = {}
        selector.by_lease = None  # built anew in the parent, of the bookings it builds
        return {"selector": selector, "changed": self.changed, "parts": parts}

    def load(self) -> Iterator[None]:
        """Put the bookings (in the plan's order), promises and tiers back into the selector,
        a few milliseconds of work per step."""
        if self.parts is None:
            return
        bookings, promises, tiers = self.parts
        self.parts = None
        yield from bookings.into(self.selector.booked)
        self.selector.by_lease = bookings.by_lease(self.selector.booked)
        yield
        yield from promises.into(self.selector.guarantees)
        yield from tiers.into(self.selector.tiers)


def release(selector: LeaseSelector | None) -> Iterator[None]:
    """Free a replaced selector's mappings of one entry per job a piece per step: its
    bookings, and the cache of plan facts, which holds each booking it was asked about (so
    popping the bookings alone freed none of those, and the cache freed them all in one call
    as the selector went), then the hint of an in-process re-plan (the plan before it, as
    large as the bookings) and the promises and tiers."""
    if selector is None:
        return
    for mapping in (
        selector.booked,
        selector._facts,
        selector._previous[0],
        selector.guarantees,
        selector.tiers,
    ):
        if not isinstance(mapping, dict):
            continue
        while mapping:
            for _ in range(min(PIECE, len(mapping))):
                mapping.popitem()
            yield
