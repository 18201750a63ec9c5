"""How wrong runtime estimates turn out to be, learned online from the jobs that were re-estimated.

A guarantee is only as safe as the estimate it was planned with, and a guaranteed job that waits
for its laxity trigger is not observed (so not re-estimated) before it starts: an underestimate
then surfaces when the deadline can no longer absorb it. The profiler's own band covers only its
measurement spread, not its extrapolation error, which nobody knows in advance. But every job
that runs long enough to be re-estimated reveals one sample of that error (observed work over the
first estimate). The :class:`EstimateErrors` quantile of those samples is the relative pad a
planner adds to jobs not yet observed: with estimates off by log-normal sigma 0.1, the 0.95
quantile pads them by about 18%. The lower quantile is the other side: how much shorter such a job
may turn out, so that nobody gives up on a job whose estimate is merely pessimistic.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np


@dataclass
class EstimateErrors:
    """A sliding window of ``observed / first estimate`` ratios and their outer quantiles.

    ``pad()`` is 0 until ``min_samples`` jobs were observed (no evidence, no pad), then the
    ``quantile`` of the window minus one, never below 0: overestimates need no protection.
    ``cut()`` mirrors it from below: one minus the ``1 - quantile`` quantile, never below 0.
    """

    quantile: float = 0.95
    window: int = 1000
    min_samples: int = 20
    _ratios: deque = field(default_factory=deque, repr=False)
    _pad: float | None = field(default=0.0, repr=False)
    _cut: float | None = field(default=0.0, repr=False)

    def __post_init__(self) -> None:
        if not 0.0 < self.quantile < 1.0:
            raise ValueError(f"quantile must be in (0, 1), got {self.quantile}")
        self._ratios = deque(maxlen=self.window)

    def record(self, first_estimate: float, observed: float) -> None:
        """One job's first estimate of its total work against what its progress showed."""
        if first_estimate > 0.0 and observed > 0.0:
            self._ratios.append(observed / first_estimate)
            self._pad = self._cut = None

    def pad(self) -> float:
        """Relative headroom for a job not observed yet (e.g. 0.18 = plan 18% more work)."""
        if self._pad is None:
            self._pad = max(self._ratio(self.quantile) - 1.0, 0.0)
        return self._pad

    def cut(self) -> float:
        """How much less work a job not observed yet may turn out to need (e.g. 0.15 = 15% less)."""
        if self._cut is None:
            self._cut = max(1.0 - self._ratio(1.0 - self.quantile), 0.0)
        return self._cut

    def _ratio(self, quantile: float) -> float:
        """The window's ``quantile``, or 1 (estimates taken as exact) before ``min_samples``."""
        if len(self._ratios) < self.min_samples:
            return 1.0
        return float(np.quantile(self._ratios, quantile))

    def __len__(self) -> int:
        return len(self._ratios)
