"""Lease arithmetic: which lease an instant falls in and how many leases a job needs.

Leases are numbered from time 0: lease ``k`` is ``[k*L, (k+1)*L)``. A deadline ``D`` can use the
leases that end by it, i.e. those before ``floor(D / L)`` (the artifact's
``compute_maximum_lease``), and the lease ``D`` falls in when the job's last piece of work fits
in the part of it before ``D`` (:func:`deadline_window`). Counting whole leases only threw away
up to one lease of every deadline not on a lease boundary: in a service, where deadlines fall
anywhere, a job that could finish was refused, or demoted while running.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence

EPS = 1e-9


def lease_of(t: float, lease: float) -> int:
    """The lease that instant ``t`` falls in."""
    return int(math.floor(t / lease + EPS))


def lease_deadline(deadline: float, lease: float) -> int:
    """Leases ``< lease_deadline`` end no later than ``deadline``."""
    return int(math.floor(deadline / lease + EPS))


def leases_needed(work: float, lease: float) -> int:
    """Whole leases that ``work`` seconds occupy (at least one). Asked for every SLO job several
    times a re-plan, so without ``max``'s call (issue 27)."""
    need = math.ceil(work / lease - EPS)
    return need if need > 1 else 1


def deadline_window(
    deadline: float, lease: float, work: float, spare: float = 0.0
) -> tuple[int, int]:
    """``(end, need)``: any ``need`` leases before lease ``end`` hold ``work`` seconds finished
    by ``deadline``.

    ``end`` takes in the lease the deadline falls in when the job's last piece (its work past
    ``need - 1`` whole leases) fits before the deadline with ``spare`` seconds to spare: planned
    there, that lease is its last and the job stops in time; planned elsewhere, it has ``need``
    whole leases. Otherwise ``end`` is the first lease that does not end by the deadline."""
    end = lease_deadline(deadline, lease)
    need = leases_needed(work, lease)
    tail = deadline - end * lease
    if tail > EPS * lease and work - (need - 1) * lease + spare <= tail + EPS * lease:
        end += 1
    return end, need


def block_end(leases: tuple[int, ...], deadline: float, lease: float) -> tuple[int, float]:
    """The lease after a plan's deadline lease, and the instant the plan's work must end by: the
    lease the deadline falls in is the deadline lease if the plan uses it (only a last piece that
    fits was planned there), else the last one that ends by the deadline."""
    end = lease_deadline(deadline, lease)
    if leases and leases[-1] == end and deadline > end * lease + EPS * lease:
        return end + 1, deadline
    return end, end * lease


def room(leases: Sequence[int], deadline: float, lease: float) -> float:
    """Seconds of the given leases (sorted, distinct) before ``deadline``: each lease's share,
    added up in order. The leases wholly before it come first and are found by bisection (the
    same test on the same products as adding them up one by one); their sum is their count
    times ``lease`` when that is a whole number of seconds, since every partial sum is then
    exact, and is added up otherwise. One pass over every lease of every running guaranteed
    job once a lease was 2 % of a Chronus replay of MIX2 (issue 27, session 15)."""
    lo = bisect_left(leases, True, key=lambda index: deadline - index * lease < lease)
    if float(lease).is_integer():
        total = lo * lease
    else:
        total = 0.0
        for _ in range(lo):
            total += lease
    for index in leases[lo:]:  # a share below one lease, then none (the shares only fall)
        share = deadline - index * lease
        if share <= 0.0:
            break
        total += share
    return total
