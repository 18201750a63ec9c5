"""Documented upper bounds on what one input may ask for.

Each bound is far above any real cluster or trace and far below what would make a command hang or
exhaust memory: cell trees, node lists and per-node GPU sets are materialised, so their size must
be bounded before they are built. Readers refuse larger values with a one-line error naming the
key and the bound (README, "Input limits").
"""

from __future__ import annotations

MAX_NODES = 100_000  # nodes in one cluster
MAX_GPUS_PER_NODE = 1_024
MAX_GPUS = 1_000_000  # GPUs in one cluster (HiveD: leaf cells), and in one job or request
MAX_PODS = 100_000  # pods in one request (a scenario step's pod counts summed)
MAX_CELL_LEVELS = 32  # levels of a HiveD cell hierarchy
# Any time or duration, in seconds (~31.7 million years). float64 still resolves 0.125 s there,
# so epoch times in milliseconds read as seconds (~1.7e12) are slow to think about but correct.
MAX_SECONDS = 1e15
# One job's run time. A replay re-plans at every lease boundary while a deadline job runs, so a
# 1,900-year job (1e9 minutes) meant 5e7 rounds; no training job runs for more than a year.
MAX_JOB_SECONDS = 366 * 86400.0


def too_large(value: float, bound: float) -> str:
    """The error text for a value above its bound."""
    return f"must be <= {bound:,g}" if isinstance(bound, float) else f"must be <= {bound:,}"
