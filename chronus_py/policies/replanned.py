"""A Chronus re-plan as it crosses from the service's forked child to the service: the
re-planned lease selector, with its booked leases in small pickled pieces, and the jobs whose
tier changed.

Why pieces: a plan books every guaranteed job's leases as a tuple of lease indices, and at
30 s leases 5,000 guarantees of hours of work hold millions of them. Unpickled in one call the
plan took 2 s (28 MB), and freeing the replaced one 0.3-0.5 s, each one C call during which no
other thread runs, so every request waited that long even though neither holds the request
lock. Read (:meth:`Replanned.load`) and freed (:func:`release`) a piece at a time, other
threads run between two pieces. The promises (a frozen dataclass each, 20 ms to unpickle for
8,500 jobs: one Python call per object) and tiers cross in pieces too, so no single call of the
read holds every thread for more than a few milliseconds.
"""

from __future__ import annotations

import copy
import pickle
from dataclasses import dataclass, field
from typing import Iterator

from chronus_py.selector import LeaseSelector

PIECE = 32
"""Jobs per piece: a few milliseconds to unpickle or free at 30 s leases."""
SPLIT = ("booked", "guarantees", "tiers")
"""The selector's mappings of one entry per job, which cross in pieces (in this order)."""


@dataclass
class Replanned:
    """``selector`` re-planned for the new lease; ``changed`` the jobs whose tier changed."""

    selector: LeaseSelector
    changed: set[str]
    pieces: list[bytes] = field(default_factory=list)

    def __getstate__(self) -> dict:
        selector = copy.copy(self.selector)
        pieces = []
        for name in SPLIT:
            items = list(getattr(selector, name).items())
            if name == "booked":  # the plan's GPUs per lease cross whole, its bookings in pieces
                selector.plan = selector.plan.without_bookings()
            else:
                setattr(selector, name, {})
            pieces += [
                pickle.dumps((name, items[i : i + PIECE]), protocol=pickle.HIGHEST_PROTOCOL)
                for i in range(0, len(items), PIECE)
            ]
        # The hint a re-plan starts from is rebuilt from the bookings by the next re-plan, so
        # the one this re-plan started from need not cross (it is as large as the bookings);
        # nor the cache of plan facts, kept per booking object, which the bookings unpickled
        # in the parent are not (it could never be hit there).
        selector._previous = ({}, 0)
        selector._facts = {}
        return {"selector": selector, "changed": self.changed, "pieces": pieces + self.pieces}

    def load(self) -> Iterator[None]:
        """Unpickle the split mappings into the selector, a piece per step (in order: the
        bookings' order is the plan's)."""
        while self.pieces:
            name, items = pickle.loads(self.pieces.pop(0))
            getattr(self.selector, name).update(items)
            yield


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
