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
    """GPU-seconds of work arrived, as a running total at each arrival time (non-decreasing
    times). Only as much history is kept as the longest span asked about so far
    (:meth:`expected`), at least ``lookback`` as given: from ``since`` on, ``dropped`` being
    the total before it; ``first`` is the first arrival ever. A rate is measured over at least
    ``shortest`` seconds: jobs arriving together are not a rate (two jobs a second apart, the
    service's first, read as a flood that no wide job could be promised against)."""

    times: list[float] = field(default_factory=list)
    totals: list[float] = field(default_factory=list)
    dropped: float = 0.0
    since: float = -math.inf
    first: float | None = None
    lookback: float = 0.0
    shortest: float = 0.0

    def record(self, at: float, work: float) -> None:
        """``work`` GPU-seconds arrived at ``at``."""
        if self.first is None:
            self.first = at
        self.totals.append((self.totals[-1] if self.totals else self.dropped) + work)
        self.times.append(at)
        old = bisect_left(self.times, at - self.lookback)
        if old > len(self.times) // 2:  # dropped in halves: amortised O(1) per arrival
            self.dropped, self.since = self.totals[old - 1], at - self.lookback
            del self.times[:old], self.totals[:old]

    def expected(self, now: float, until: float) -> float:
        """GPU-seconds expected to arrive from ``now`` to ``until``: at the rate seen over as
        long a span before ``now`` (or over all that is kept, if that is shorter; over
        ``shortest`` at least). None seen: none expected.

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
        came = self._total_before(j) - self._total_before(i)
        return came / span * ahead

    def _total_before(self, i: int) -> float:
        """GPU-seconds arrived before the ``i``-th kept arrival."""
        return self.totals[i - 1] if i else self.dropped
