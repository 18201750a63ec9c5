"""Lease arithmetic: which lease an instant falls in, how many leases a job needs, and the GPU
round-up the plan's capacity accounting uses.

Leases are numbered from time 0: lease ``k`` is ``[k*L, (k+1)*L)``. A deadline ``D`` can use the
leases that end by it, i.e. those before ``floor(D / L)`` (the artifact's ``compute_maximum_lease``).
"""
from __future__ import annotations

import math

DEFAULT_LEASE = 20 * 60.0


def lease_of(t: float, lease: float) -> int:
    """The lease that instant ``t`` falls in."""
    return int(math.floor(t / lease + 1e-9))


def lease_deadline(deadline: float, lease: float) -> int:
    """Leases ``< lease_deadline`` end no later than ``deadline``."""
    return int(math.floor(deadline / lease + 1e-9))


def leases_needed(work: float, lease: float) -> int:
    """Whole leases that ``work`` seconds occupy (at least one)."""
    return max(1, math.ceil(work / lease - 1e-9))


def round_up_gpus(gpus: int, per_node: int = 8) -> int:
    """Chronus' packing sizes {1, 2, 4, then multiples of a node}: a 3-GPU job reserves 4 and a
    12-GPU job two whole nodes, so the plan's capacity is what placement can really deliver."""
    if gpus <= 2:
        return gpus
    if gpus <= 4:
        return 4
    return per_node * math.ceil(gpus / per_node)
