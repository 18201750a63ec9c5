"""The data model: what a trace row or a cluster manager submits, and the cluster it runs on.

Times are absolute seconds (floats); ids are strings. Inputs are frozen dataclasses. The truth
about a job (``duration``) lives here because replay needs it, but policies never read it: they see
:class:`~chronus_py.scheduler.JobState` and its estimate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum


class JobKind(StrEnum):
    STRICT_SLO = "strict"
    SOFT_SLO = "soft"
    BEST_EFFORT = "best_effort"


@dataclass(frozen=True, slots=True)
class DeadlineOption:
    """One deadline of a job's list (tightest first): finish by ``at`` and earn ``value``."""

    at: float
    value: float


@dataclass(frozen=True, slots=True)
class Job:
    """A training job as submitted. ``duration`` is seconds of work at ``gpus`` GPUs."""

    id: str
    tenant: str
    gpus: int
    submit: float
    kind: JobKind
    deadlines: tuple[DeadlineOption, ...] = ()
    duration: float | None = None
    iterations: int | None = None
    model: str | None = None

    @property
    def is_slo(self) -> bool:
        return self.kind is not JobKind.BEST_EFFORT

    @property
    def first_deadline(self) -> float:
        """The tightest deadline, or infinity for best-effort jobs."""
        return self.deadlines[0].at if self.deadlines else math.inf

    @property
    def max_value(self) -> float:
        return max((d.value for d in self.deadlines), default=0.0)


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    gpus: int


@dataclass(frozen=True, slots=True)
class Cluster:
    """Nodes and their GPU counts; topology beyond that lives in ``placement``."""

    nodes: tuple[Node, ...]

    @classmethod
    def uniform(cls, nodes: int, gpus_per_node: int) -> "Cluster":
        width = len(str(max(nodes - 1, 0)))
        return cls(tuple(Node(f"node{i:0{width}d}", gpus_per_node) for i in range(nodes)))

    @property
    def gpus(self) -> int:
        return sum(n.gpus for n in self.nodes)
