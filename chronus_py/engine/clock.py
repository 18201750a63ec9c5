"""The event clock: arrivals in submission order, completions in a heap, and wake-ups.

Time never ticks; ``next_time`` jumps to the earliest pending instant. A completion is stamped
with the run (start count) it belongs to, and a completion of an earlier run — the job was
preempted since — is dropped when popped, so preemption never has to search the heap.
"""

from __future__ import annotations

import heapq
import math
from typing import Sequence

from chronus_py.jobs.model import Job


class Clock:
    def __init__(self, jobs: Sequence[Job]):
        self.arrivals = jobs
        self.next_arrival = 0
        self.completions: list[tuple[float, int, str, int]] = []
        self._seq = 0

    def add_completion(self, at: float, job_id: str, run: int) -> None:
        self._seq += 1
        heapq.heappush(self.completions, (at, self._seq, job_id, run))

    def next_time(self, wakeup: float | None) -> float:
        candidates = [math.inf if wakeup is None else wakeup]
        if self.next_arrival < len(self.arrivals):
            candidates.append(self.arrivals[self.next_arrival].submit)
        if self.completions:
            candidates.append(self.completions[0][0])
        return min(candidates)

    def pop_completions(self, now: float) -> list[tuple[str, int]]:
        out = []
        while self.completions and self.completions[0][0] <= now:
            _, _, job_id, run = heapq.heappop(self.completions)
            out.append((job_id, run))
        return out

    def pop_arrivals(self, now: float) -> list[Job]:
        start = self.next_arrival
        while (
            self.next_arrival < len(self.arrivals)
            and self.arrivals[self.next_arrival].submit <= now
        ):
            self.next_arrival += 1
        return list(self.arrivals[start : self.next_arrival])

    @property
    def done(self) -> bool:
        return self.next_arrival >= len(self.arrivals) and not self.completions
