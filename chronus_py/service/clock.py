"""Chronus's clock for a backend that drives a real cluster (Slurm, Kueue): Unix time, unless a
compressed-time run makes one wall second ``scale`` seconds of chronus time from ``origin`` on
(what the end-to-end tests, demos and benchmarks run). One home, so every backend compresses
time the same way."""

from __future__ import annotations

import time


class CompressedTime:
    """A mixin: the backend sets ``origin`` and ``scale`` (its time options) and ``poll`` (wall
    seconds between its looks at the cluster)."""

    origin: float
    scale: float
    poll: float

    def _v(self, t: float) -> float:
        """Chronus's time for a Unix time on the cluster."""
        return self.origin + (t - self.origin) * self.scale

    def now(self) -> float:
        return self._v(time.time())

    def wall_seconds_until(self, t: float) -> float:
        return max(0.0, (t - self.now()) / self.scale)

    def next_event(self) -> float | None:
        return self.now() + self.poll * self.scale
