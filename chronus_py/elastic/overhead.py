"""What a (re)configuration of a job costs: seconds during which it holds its GPUs and makes no
progress (checkpoint, restart of the workers, reload, warm-up).

Default, close to what ElasticFlow's simulator charges (its code, see RESULTS.md):
- every (re)configuration pays ``base`` seconds: 2 s, or ``base_large`` = 7 s on clusters of
  ``large_cluster`` = 256 GPUs or more;
- a start from stopped (first start, or resume after a preemption) adds ``restart`` = 27 s
  (``restart_large`` = 47 s on 256+ GPUs): the job reloads from its checkpoint;
- a resize while running adds ``per_log2`` x (log2 n + 1) seconds, n the new size (2 s: the
  collective communicators are rebuilt), unless every GPU of the new set was already used by the
  job since its last (re)start (a shrink onto a subset): then the base alone.
``scale`` multiplies everything (0 turns overhead off, 2 doubles it) for sensitivity studies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class ResizeOverhead:
    base: float = 2.0
    base_large: float = 7.0
    large_cluster: int = 256
    restart: float = 27.0
    restart_large: float = 47.0
    per_log2: float = 2.0
    scale: float = 1.0

    def seconds(
        self, gpus: int, cluster_gpus: int, *, from_stopped: bool, known_gpus: bool
    ) -> float:
        """Pause for a move to ``gpus`` GPUs (``gpus`` > 0)."""
        large = cluster_gpus >= self.large_cluster
        cost = self.base_large if large else self.base
        if from_stopped:
            cost += self.restart_large if large else self.restart
        elif not known_gpus:
            cost += self.per_log2 * (math.log2(gpus) + 1)
        return cost * self.scale

    def worst(self, gpus: int, cluster_gpus: int) -> float:
        """The most one reconfiguration to ``gpus`` can cost: what plans keep in reserve."""
        return max(
            self.seconds(gpus, cluster_gpus, from_stopped=True, known_gpus=False),
            self.seconds(gpus, cluster_gpus, from_stopped=False, known_gpus=False),
        )
