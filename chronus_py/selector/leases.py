"""Lease arithmetic: which lease an instant falls in and how many leases a job needs.

Leases are numbered from time 0: lease ``k`` is ``[k*L, (k+1)*L)``. A deadline ``D`` can use the
leases that end by it, i.e. those before ``floor(D / L)`` (the artifact's
``compute_maximum_lease``).
"""

from __future__ import annotations

import math


def lease_of(t: float, lease: float) -> int:
    """The lease that instant ``t`` falls in."""
    return int(math.floor(t / lease + 1e-9))


def lease_deadline(deadline: float, lease: float) -> int:
    """Leases ``< lease_deadline`` end no later than ``deadline``."""
    return int(math.floor(deadline / lease + 1e-9))


def leases_needed(work: float, lease: float) -> int:
    """Whole leases that ``work`` seconds occupy (at least one)."""
    return max(1, math.ceil(work / lease - 1e-9))
