"""The work arriving at the cluster, as admission of a wide guarantee needs to foresee it.

A job wider than the headroom's share is promised only if the GPU-time free before its deadline
holds its booking and the pool's work, and the pool's work includes what will arrive meanwhile:
on an overloaded cluster (Philly MIX1 at 32 GPUs, offered load 1.15) the queue can be short at
the moment a wide job asks and still the next hours' arrivals need every GPU; the wide promises
that let through cost the 1-GPU jobs their deadlines (issue 28, session 13).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass, field


@dataclass
class Arrivals:
    """The jobs arrived: each one's time (non-decreasing), GPU-seconds of work and GPUs. Only
    as much history is kept as the longest span asked about so far (:meth:`expected`), at least
    ``lookback`` as given: from ``since`` on; ``first`` is the first arrival ever. A rate is
    measured over at least ``shortest`` seconds: jobs arriving together are not a rate (two
    jobs a second apart, the service's first, read as a flood that no wide job could be
    promised against)."""

    times: list[float] = field(default_factory=list)
    works: list[float] = field(default_factory=list)
    widths: list[int] = field(default_factory=list)
    since: float = -math.inf
    first: float | None = None
    lookback: float = 0.0
    shortest: float = 0.0

    def record(self, at: float, work: float, gpus: int) -> None:
        """A job of ``work`` GPU-seconds on ``gpus`` GPUs arrived at ``at``."""
        if self.first is None:
            self.first = at
        self.times.append(at)
        self.works.append(work)
        self.widths.append(gpus)
        old = bisect_left(self.times, at - self.lookback)
        if old > len(self.times) // 2:  # dropped in halves: amortised O(1) per arrival
            self.since = at - self.lookback
            del self.times[:old], self.works[:old], self.widths[:old]

    def expected(self, now: float, until: float) -> float:
        """GPU-seconds expected to arrive from ``now`` to ``until`` that can run by ``until``:
        at the rate seen over as long a span before ``now`` (or over all that is kept, if that
        is shorter; over ``shortest`` at least). None seen: none expected.

        Each job seen counts no more than its GPUs for the whole span ahead, as a queued job
        does (``LeaseSelector._queued``): an 8-hour job arriving cannot use more of a 2-hour
        window than its width for 2 hours, and what it has left after is the pool's business
        after it. Counted in full, the long jobs of a burst made the wide-job mix expect more
        work in a wide job's window than the cluster can run in it, and refused it (issue 28,
        session 17: 17 / 9 / 11 of the 64+ GPU jobs of seeds 0-2 promised, 18 / 9 / 12 with
        the clip; the Philly traces at 32 GPUs unchanged).

        Work that arrives at ``now`` itself is not a rate yet: it is the work being admitted,
        counted once as the queue's or as a booking. Counted here too, a service's first jobs
        read as a flood: two 4-GPU jobs submitted together to an empty 4-GPU cluster, 1,600 s
        of work with their deadline at 4,000 s, got one promise (session 13's first CI run)."""
        ahead = until - now
        self.lookback = max(self.lookback, ahead)
        if ahead <= 0.0 or self.first is None:
            return 0.0
        span = max(min(ahead, now - max(self.first, self.since)), self.shortest)
        if span <= 0.0:
            return 0.0
        i = bisect_left(self.times, now - span)
        j = bisect_left(self.times, now, lo=i)
        came = sum(map(min, self.works[i:j], (gpus * ahead for gpus in self.widths[i:j])))
        return came / span * ahead
