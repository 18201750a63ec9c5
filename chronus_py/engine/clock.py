"""The event clock of every replay: arrivals in submission order, completions in a heap, and
wake-ups.

Time never ticks; ``next_time`` jumps to the earliest pending instant. Arrivals come in groups:
the jobs submitted at one instant, or (``window`` > 0) within one ``window``-second slot, shown
together at the last of their submission times, since a policy cannot see a job before it is
submitted (ElasticFlow merges arrivals per slot of its plan). A completion is stamped with the
run segment it belongs to (``JobState.segment``: it counts starts and resizes); once the job
moves - preempted, resized, finished - the entry is stale and the stage drops it when popped,
so a move never has to search the heap.

A policy may count a job done a little before its run completes (``Policy.done_tolerance``:
within that share of its work): :class:`Tolerance` says which completions the clock holds for
a little later are due now, and ``within`` bounds how much later that can be, so the clock
looks no further ahead than it must.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Callable, Sequence

from chronus_py.jobs.model import Job
from chronus_py.jobs.state import JobState

Due = Callable[[str, int, float], bool]


class Clock:
    def __init__(self, jobs: Sequence[Job], window: float = 0.0):
        """``jobs`` in submission order."""
        self.groups = _arrival_groups(jobs, window)
        self.next_group = 0
        self.completions: list[tuple[float, int, str, int]] = []
        self._seq = 0

    def add_completion(self, at: float, job_id: str, run: int) -> None:
        self._seq += 1
        heapq.heappush(self.completions, (at, self._seq, job_id, run))

    def next_time(
        self, wakeup: float | None, live: Callable[[str, int], bool] | None = None
    ) -> float:
        """The next instant anything happens. With ``live``, stale completions at the head are
        dropped first, so they never make an instant of their own."""
        if live is not None:
            while self.completions and not live(self.completions[0][2], self.completions[0][3]):
                heapq.heappop(self.completions)
        candidates = [math.inf if wakeup is None else wakeup]
        if self.next_group < len(self.groups):
            candidates.append(self.groups[self.next_group][0])
        if self.completions:
            candidates.append(self.completions[0][0])
        return min(candidates)

    def quiet(self) -> bool:
        """Nothing left on the clock: no arrival to come and no completion pending."""
        return self.next_group >= len(self.groups) and not self.completions

    def pop_completions(
        self, now: float, within: float = 0.0, due: Due | None = None
    ) -> list[tuple[str, int]]:
        """The completions at or before ``now``, as (job id, run). With ``within`` > 0 also the
        later ones up to ``now + within`` that ``due(job_id, run, now)`` says are done already
        (a world that counts a job done within a tolerance of its work); the others stay."""
        out: list[tuple[str, int]] = []
        later = []
        limit = now + within if within else now
        while self.completions and self.completions[0][0] <= limit:
            entry = heapq.heappop(self.completions)
            at, _, job_id, run = entry
            if at <= now or due is None or due(job_id, run, now):
                out.append((job_id, run))
            else:
                later.append(entry)
        for entry in later:
            heapq.heappush(self.completions, entry)
        return out

    def pop_arrivals(self, now: float) -> list[Job]:
        out: list[Job] = []
        while self.next_group < len(self.groups) and self.groups[self.next_group][0] <= now:
            out.extend(self.groups[self.next_group][1])
            self.next_group += 1
        return out


@dataclass
class Tolerance:
    """``share`` of a job's work it may have left and count as done (0: none, ``within`` stays
    0 and every completion is exact); ``within``: how far ahead of ``now`` a completion may be
    and still be due."""

    share: float
    within: float = 0.0

    def widen(self, r: JobState, now: float) -> None:
        """Keep ``within`` above how much earlier than its completion ``r`` (just started or
        resized) may count as done: ``share`` of its work at its rate (twice, for rounding), or
        all of it if it already is."""
        if not self.share:
            return
        work = r.job.work
        lead = 2 * self.share * work / r.speed + 1e-6
        if r.remaining(now) <= self.share * work:
            lead = max(lead, r.completes_at(work) - now + 1e-6)
        self.within = max(self.within, lead)

    def done(self, r: JobState, now: float) -> bool:
        """Whether the running ``r`` counts as done at ``now``: its work left within ``share``
        of its work, or its run completes within a nanosecond."""
        work = r.job.work
        return r.remaining(now) <= self.share * work or r.completes_at(work) <= now + 1e-9


def _arrival_groups(jobs: Sequence[Job], window: float) -> list[tuple[float, list[Job]]]:
    """Consecutive jobs with the same submission time, or the same ``window`` slot, as one group
    at the last of their submission times."""
    groups: list[tuple[float, list[Job]]] = []
    key_of = (lambda t: t) if window <= 0 else (lambda t: int(t // window))
    last_key = None
    for job in jobs:
        key = key_of(job.submit)
        if groups and key == last_key:
            groups[-1][1].append(job)
            groups[-1] = (job.submit, groups[-1][1])
        else:
            groups.append((job.submit, [job]))
        last_key = key
    return groups
