"""What (re)configuring a job costs: one interface, two models, chosen by name.

An overhead model answers one question, ``seconds(gpus, cluster_gpus, from_stopped=...,
known_gpus=...)``: how long a move of a job to ``gpus`` GPUs keeps it from making progress while
it holds them: a start from stopped (first start, or resume after a preemption), or a resize of
a running job, cheaper when every GPU of the new set was already the job's since its last start
(a shrink onto a subset). ``worst`` is the most one move can cost: what plans keep in reserve.

- ``chronus-restart`` (:class:`ChronusRestart`), as the Chronus artifact charges it (chronus.md
  §e): checkpoint 0.1 min + resume 0.4 min, scaled by ``1 + log2 g``, for **every** start
  including the first, and the same for any resize (it is a checkpoint and a restart too).
- ``pause`` (:class:`PauseOverhead`), close to what ElasticFlow's simulator charges (its code,
  see RESULTS.md): every move pays ``base`` seconds (2 s, or ``base_large`` = 7 s on clusters of
  ``large_cluster`` = 256 GPUs or more); a start from stopped adds ``restart`` = 27 s
  (``restart_large`` = 47 s on 256+ GPUs); a resize onto new GPUs adds ``per_log2`` x
  (log2 n + 1) seconds (2 s: the collective communicators are rebuilt).

``scale`` multiplies either (0 turns overhead off, 2 doubles it) for sensitivity studies.

How an engine charges the seconds is the engine's: the rigid replay (and the scheduler's
estimates) adds a start's seconds to the job's work, as the artifact does, which is a pause at
full speed; the elastic replay pauses the job, holding its GPUs. Rigid replays default to
``chronus-restart`` and elastic ones to ``pause``, the models their published results use; either
runs with any trace.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Protocol

MINUTE = 60.0


@lru_cache(maxsize=256)
def restart_overhead(gpus: int) -> float:
    """Seconds of extra work that one (re)start of a ``gpus``-GPU job costs (the artifact's).
    Cached: the scheduler and the sim backend keep it per job, one float object per size then
    rather than per job (issue 27)."""
    return 0.5 * (1.0 + math.log2(max(gpus, 1))) * MINUTE


class Overhead(Protocol):
    name: str

    def seconds(
        self, gpus: int, cluster_gpus: int, *, from_stopped: bool, known_gpus: bool
    ) -> float:
        """Seconds a move to ``gpus`` GPUs (> 0) costs (see the module docstring)."""

    def worst(self, gpus: int, cluster_gpus: int) -> float:
        """The most one move to ``gpus`` can cost."""


@dataclass(frozen=True)
class ChronusRestart:
    scale: float = 1.0
    name: str = "chronus-restart"

    def seconds(
        self, gpus: int, cluster_gpus: int, *, from_stopped: bool, known_gpus: bool
    ) -> float:
        return restart_overhead(gpus) * self.scale

    def worst(self, gpus: int, cluster_gpus: int) -> float:
        return restart_overhead(gpus) * self.scale


@dataclass(frozen=True)
class PauseOverhead:
    base: float = 2.0
    base_large: float = 7.0
    large_cluster: int = 256
    restart: float = 27.0
    restart_large: float = 47.0
    per_log2: float = 2.0
    scale: float = 1.0
    name: str = "pause"

    def seconds(
        self, gpus: int, cluster_gpus: int, *, from_stopped: bool, known_gpus: bool
    ) -> float:
        large = cluster_gpus >= self.large_cluster
        cost = self.base_large if large else self.base
        if from_stopped:
            cost += self.restart_large if large else self.restart
        elif not known_gpus:
            cost += self.per_log2 * (math.log2(gpus) + 1)
        return cost * self.scale

    def worst(self, gpus: int, cluster_gpus: int) -> float:
        return max(
            self.seconds(gpus, cluster_gpus, from_stopped=True, known_gpus=False),
            self.seconds(gpus, cluster_gpus, from_stopped=False, known_gpus=False),
        )


OVERHEADS: dict[str, Callable[[float], Overhead]] = {
    "chronus-restart": lambda scale: ChronusRestart(scale=scale),
    "pause": lambda scale: PauseOverhead(scale=scale),
}


def default_overhead(elastic: bool) -> str:
    """The overhead model a replay charges unless told otherwise: ElasticFlow's pause for an
    elastic policy, the Chronus artifact's per-start work for a rigid one (what each world's
    published results were measured with)."""
    return "pause" if elastic else "chronus-restart"


def make_overhead(name: str, scale: float = 1.0) -> Overhead:
    """The overhead model ``name`` scaled by ``scale``; ValueError naming the choices if unknown
    or if ``scale`` is negative (callers name the option)."""
    if name not in OVERHEADS:
        raise ValueError(f"unknown overhead model {name!r} (have: {', '.join(OVERHEADS)})")
    if not math.isfinite(scale) or scale < 0:
        raise ValueError(f"overhead scale must be >= 0, got {scale}")
    return OVERHEADS[name](scale)


def per_start(model: Overhead, cluster_gpus: int) -> Callable[[int], float]:
    """The work one (re)start of a ``gpus``-GPU job costs under ``model``: what the scheduler adds
    to a rigid job's work per start."""
    return lambda gpus: model.seconds(gpus, cluster_gpus, from_stopped=True, known_gpus=False)
