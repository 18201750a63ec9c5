"""The two ways a promise is fitted into the free capacity of one :class:`LeasePlan`.

- :func:`latest_leases` (rigid jobs): a job of fixed width takes the latest leases before its
  deadline that still have room for it, leaving the near future to jobs that arrive later with
  tighter deadlines: the solvers' packer's search (``solvers.latest_slots``), on the plan's
  window of booked GPUs.
- :func:`min_share` (elastic jobs): **minimum satisfactory share** (ElasticFlow's idea): the
  smallest size cap under which filling the free capacity *backwards from the deadline* - each
  lease gets the largest size the job has that is at most the cap and at most the free GPUs -
  completes its remaining iterations (:func:`backward_fill`). Filling backwards leaves the near
  future free as above; taking the smallest cap leaves the most GPUs for everyone else.

Both leave the plan's ``headroom`` share of each lease unpromised (``LeasePlan.kept``) and book
nothing: the caller books what it keeps.
"""

from __future__ import annotations

import math

import numpy as np

from chronus_py.jobs.model import Job
from chronus_py.selector.plan import LeasePlan, Sizes

CHUNK = 256
"""Leases the backward fill looks at first; it doubles the look-back until the work fits."""


def latest_leases(
    plan: LeasePlan, first: int, end: int, gpus: int, need: int, keep: int = 0
) -> np.ndarray | None:
    """The latest ``need`` leases of ``first .. end - 1`` with ``gpus`` GPUs free above the
    ``keep`` GPUs each lease holds back (absolute lease indices, sorted), or None if there are
    not that many: ``latest_slots``' answer, in half its time (4.0-6.8 against 12.6-15.0 us
    in-process, issue 27 session 15), comparing the plan's own window of booked GPUs with what
    may be booked rather than making an array of free GPUs. Asked at every admission and up to
    five times per refused one."""
    if end - first < need:
        return None
    ok = (plan.window(first, end) <= plan.capacity - keep - gpus).nonzero()[0]
    if ok.size < need:
        return None
    slots = ok[ok.size - need :]
    slots += first
    return slots


def size_tables(job: Job) -> tuple[np.ndarray, np.ndarray]:
    """``best[a]``: the largest size of the job that is <= a (0 if none), for a in 0..max_size;
    ``rate[n]``: iterations/s on n GPUs (0 for sizes the job cannot run on)."""
    best = np.zeros(job.max_size + 1, dtype=np.int64)
    rate = np.zeros(job.max_size + 1)
    for n, r in zip(job.sizes, job.throughputs):
        best[n:] = n
        rate[n] = r
    return best, rate


def backward_fill(
    plan: LeasePlan,
    remaining: float,
    now: float,
    deadline: float,
    cap: int,
    tables: tuple[np.ndarray, np.ndarray],
    headroom: float = 0.0,
) -> Sizes | None:
    """The job's sizes filled backwards from ``deadline`` under ``cap`` GPUs, from the lease
    holding ``now`` on (of which only the part from ``now`` counts); None if ``remaining``
    iterations do not fit before the deadline."""
    best, rate = tables
    lease = plan.lease
    origin = math.floor(now / lease)
    end = math.floor(deadline / lease) - origin  # leases 0..end-1 (from origin) end by it
    if end <= 0:
        return None
    used = plan.window(origin, origin + end)
    limit = plan.capacity - plan.kept(headroom)
    opening = ((origin + 1) * lease - now) / lease  # the share of lease 0 still ahead
    need = remaining
    hi = end
    chunk = CHUNK
    pieces: list[np.ndarray] = []
    while hi > 0:
        lo = max(0, hi - chunk)
        chunk *= 2
        g = best[np.minimum(limit - used[lo:hi], cap)]
        work = rate[g] * lease
        if lo == 0:
            work[0] *= opening
        done = np.cumsum(work[::-1])
        k = int(np.searchsorted(done, need))
        if k < len(done):
            start = hi - 1 - k
            pieces.append(g[start - lo :])
            return Sizes(origin + start, np.concatenate(pieces[::-1]))
        pieces.append(g)
        need -= done[-1] if len(done) else 0.0
        hi = lo
    return None


def min_share(
    plan: LeasePlan,
    job: Job,
    remaining: float,
    now: float,
    deadline: float,
    tables: tuple[np.ndarray, np.ndarray],
    headroom: float = 0.0,
) -> Sizes | None:
    """Minimum satisfactory share: the backward fill under the smallest cap that completes,
    found by bisection over the job's sizes (a larger cap never does less work on the same
    plan while throughput grows with size, which holds up to a job's cap)."""
    window = deadline - now
    caps = [
        n
        for n, fastest in zip(job.sizes, np.maximum.accumulate(job.throughputs))
        if fastest * window >= remaining
    ]
    found = None
    lo, hi = 0, len(caps) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        sizes = backward_fill(plan, remaining, now, deadline, caps[mid], tables, headroom)
        if sizes is None:
            lo = mid + 1
        else:
            found, hi = sizes, mid - 1
    return found
