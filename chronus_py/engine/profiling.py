"""The profiling stage of a replay: a small pool where every new job runs briefly first.

As in Chronus (chronus.md §a), a new job is profiled on a separate pool of ``nodes`` nodes, on at
most one node's worth of GPUs (wider jobs are profiled on 8 GPUs and extrapolated). The artifact
profiles in arrival order (``order="fifo"``); under bursts its 32 GPUs queue jobs for up to two
hours, and an SLO job that waited an hour for a 5-minute profile has lost its deadline before the
scheduler sees it (Philly SLO, SRTF: pool wait median 9 min, p90 55 min; 4,934 jobs missed that
met their deadline without the pool). ``order="deadline"`` (the default) profiles the tightest
deadline first (best-effort jobs last, arrival order among equals) and lets a job that fits start
when an earlier one does not. A job whose work ends within the ``window`` finishes there and never
enters the main queue; waiting for the pool counts in its JCT. Every other job enters the main
queue at the end of its window with the profiler's estimate of its work, which is what the
scheduler then uses.

The estimate is modelled, not fitted per job (the traces carry no per-iteration samples): it is the
true work times ``exp(e)``, ``e ~ Normal(0, s)``, with ``s = sqrt(sigma^2 + cv^2 / n)``. ``n`` is
the
number of iterations the window observed (the trace's ``iterations`` column; 1 when unknown), ``cv``
the per-iteration spread after warm-up (1-5% in the artifact's training traces), and ``sigma`` the
extra extrapolation error of a robustness study. The draw depends only on the seed and the job id.
The profiler knows its own measurement spread, so it reports an uncertainty band with the
estimate (``z * cv / sqrt(n)``, relative); it cannot know ``sigma``.
"""

from __future__ import annotations

import bisect
import heapq
import math
from dataclasses import dataclass, field

import numpy as np

from chronus_py.estimates import draw
from chronus_py.jobs.model import Job

MINUTE = 60.0
ORDERS = ("deadline", "fifo")


@dataclass
class ProfilingPool:
    nodes: int = 4
    gpus_per_node: int = 8
    window: float = 5 * MINUTE
    cv: float = 0.03
    sigma: float = 0.0
    z: float = 2.0
    seed: int = 0
    order: str = "deadline"
    estimates: dict[str, float] = field(default_factory=dict)
    bands: dict[str, float] = field(default_factory=dict)
    _queue: list = field(default_factory=list)
    _running: list = field(default_factory=list)
    _free: int = 0

    def __post_init__(self) -> None:
        if self.order not in ORDERS:
            raise ValueError(f"order must be one of {', '.join(ORDERS)}, got {self.order!r}")
        self._free = self.nodes * self.gpus_per_node
        self._arrivals = 0

    def gpus_for(self, job: Job) -> int:
        return min(job.gpus, self.gpus_per_node, self.nodes * self.gpus_per_node)

    def estimate(self, job: Job) -> float:
        """The profiler's estimate of the job's work (set when its window ends): the pool is an
        :class:`~chronus_py.estimates.Estimator` for the jobs it let through."""
        return self.estimates[job.id]

    def uncertainty(self, job: Job) -> float:
        """The relative half-width of the estimate's band (what a careful planner adds)."""
        return self.bands[job.id]

    def arrive(self, job: Job, work: float) -> None:
        """Queue a new job; it starts at the next ``pop``, so jobs arriving at the same instant
        are profiled in the pool's order, not in the order they were handed over."""
        first = job.first_deadline if self.order == "deadline" else 0.0
        bisect.insort(self._queue, (first, self._arrivals, job, work))
        self._arrivals += 1

    def _start_waiting(self, now: float) -> None:
        """Start queued jobs in order; under ``deadline`` order, later ones fill GPUs the head
        cannot use (``fifo`` keeps the artifact's head-of-line blocking). Called at every event
        of a replay, so a full pool returns at once instead of copying the queue."""
        if not self._free or not self._queue:
            return
        kept: list = []
        for i, entry in enumerate(self._queue):
            if not self._free or (self.order == "fifo" and kept):
                kept.extend(self._queue[i:])
                break
            job, work = entry[2], entry[3]
            if self.gpus_for(job) > self._free:
                kept.append(entry)
                continue
            self._free -= self.gpus_for(job)
            done = work <= self.window
            end = now + (work if done else self.window)
            heapq.heappush(self._running, (end, job.submit, job.id, job, work, done, now))
        self._queue = kept

    def next_time(self) -> float:
        return self._running[0][0] if self._running else math.inf

    def pop(self, now: float) -> list[tuple[Job, float, bool, float]]:
        """Jobs whose window ended by ``now``: (job, start, finished in the pool, end); then the
        freed GPUs go to queued jobs."""
        out = []
        while self._running and self._running[0][0] <= now:
            end, _, _, job, work, done, start = heapq.heappop(self._running)
            self._free += self.gpus_for(job)
            if not done:
                self.estimates[job.id] = self._measure(job, work)
            out.append((job, start, done, end))
        self._start_waiting(now)
        return out

    def _measure(self, job: Job, work: float) -> float:
        per_iteration = work / job.iterations if job.iterations else work
        observed = max(1.0, self.window / per_iteration) if job.iterations else 1.0
        self.bands[job.id] = self.z * self.cv / math.sqrt(observed)
        spread = math.sqrt(self.sigma**2 + self.cv**2 / observed)
        return work * float(np.exp(draw(self.seed, job.id, "profile").normal(0.0, spread)))
