"""The lease plan: free GPUs per time slot, and each admitted job's GPUs per slot to its deadline.

Slots lie on an absolute grid (slot k is ``[k*slot, (k+1)*slot)``), so a plan made at one event
stays meaningful at the next: a job that ran at least its planned size so far is still on plan.
A job is fitted by **minimum satisfactory share** (ElasticFlow's idea): its smallest size cap under
which filling the free timeline *backwards from its deadline* - each slot gets the largest allowed
size that is at most the cap and at most the free GPUs - completes its remaining iterations. Filling
backwards leaves the near future free for jobs that arrive later with tighter deadlines; taking the
smallest cap leaves the most GPUs for everyone else.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from chronus_py.jobs.model import Job

CHUNK = 256


@dataclass(frozen=True, slots=True)
class Lease:
    """GPUs per slot from absolute slot ``start`` on (``sizes[i]`` GPUs in slot ``start + i``)."""

    start: int
    sizes: np.ndarray

    @property
    def end(self) -> int:
        return self.start + len(self.sizes)

    def at(self, slot: int) -> int:
        i = slot - self.start
        return int(self.sizes[i]) if 0 <= i < len(self.sizes) else 0


def size_tables(job: Job) -> tuple[np.ndarray, np.ndarray]:
    """``best[a]``: the largest size of the job that is <= a (0 if none), for a in 0..max_size;
    ``rate[n]``: iterations/s on n GPUs (0 for sizes the job cannot run on)."""
    best = np.zeros(job.max_size + 1, dtype=np.int64)
    rate = np.zeros(job.max_size + 1)
    for n, r in zip(job.sizes, job.throughputs):
        best[n:] = n
        rate[n] = r
    return best, rate


class Timeline:
    """Free GPUs per slot from the slot holding ``now`` on; grows on demand."""

    def __init__(self, now: float, total: int, slot: float):
        self.now = now
        self.total = total
        self.slot = slot
        self.origin = math.floor(now / slot)
        self.free = np.full(64, total, dtype=np.int64)

    def _ensure(self, n: int) -> None:
        if n > len(self.free):
            grown = np.full(max(n, 2 * len(self.free)), self.total, dtype=np.int64)
            grown[: len(self.free)] = self.free
            self.free = grown

    @property
    def first(self) -> float:
        """Usable seconds of slot 0: only from ``now`` on."""
        return (self.origin + 1) * self.slot - self.now

    def reserve(self, lease: Lease) -> None:
        lo, hi = lease.start - self.origin, lease.end - self.origin
        self._ensure(hi)
        if hi <= 0:
            return
        cut = max(0, -lo)
        self.free[max(lo, 0) : hi] -= lease.sizes[cut:]

    def fill(
        self,
        job: Job,
        remaining: float,
        deadline: float,
        cap: int,
        tables: tuple[np.ndarray, np.ndarray],
    ) -> Lease | None:
        """Backward fill under ``cap`` GPUs; None if the work does not fit before ``deadline``."""
        best, rate = tables
        end = math.floor(deadline / self.slot) - self.origin  # slots 0..end-1 end by the deadline
        if end <= 0:
            return None
        self._ensure(end)
        need = remaining
        hi = end
        chunk = CHUNK
        pieces: list[np.ndarray] = []
        while hi > 0:
            lo = max(0, hi - chunk)
            chunk *= 2
            g = best[np.minimum(self.free[lo:hi], cap)]
            work = rate[g] * self.slot
            if lo == 0:
                work[0] *= self.first / self.slot
            done = np.cumsum(work[::-1])
            k = int(np.searchsorted(done, need))
            if k < len(done):
                first = hi - 1 - k
                pieces.append(g[first - lo :])
                return Lease(self.origin + first, np.concatenate(pieces[::-1]))
            pieces.append(g)
            need -= done[-1] if len(done) else 0.0
            hi = lo
        return None

    def fit(
        self,
        job: Job,
        remaining: float,
        deadline: float,
        tables: tuple[np.ndarray, np.ndarray],
    ) -> Lease | None:
        """Minimum satisfactory share: the fill under the smallest cap that completes, found by
        bisection over the job's sizes (a larger cap never does less work on the same timeline
        while throughput grows with size, which holds up to a job's cap)."""
        window = deadline - self.now
        caps = [
            n
            for n, fastest in zip(job.sizes, np.maximum.accumulate(job.throughputs))
            if fastest * window >= remaining
        ]
        found = None
        lo, hi = 0, len(caps) - 1
        while lo <= hi:
            mid = (lo + hi) // 2
            lease = self.fill(job, remaining, deadline, caps[mid], tables)
            if lease is None:
                lo = mid + 1
            else:
                found, hi = lease, mid - 1
        return found
