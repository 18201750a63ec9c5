"""The data model: what a trace row or a cluster manager submits, and the cluster it runs on.

Times are absolute seconds (floats); ids are strings. Inputs are frozen dataclasses. The truth
about a job (``duration``) lives here because replay needs it, but policies never read it: they see
:class:`~chronus_py.jobs.state.JobState` and its estimate.

One job model for rigid and elastic jobs: a job may run on any of its ``sizes`` (ascending), and
on ``n`` GPUs it makes ``rate(n)`` units of work per second. A rigid job is the case of one size,
``sizes == (gpus,)``, with no throughput curve: its work is ``duration`` seconds at rate 1. An
elastic job (ElasticFlow's model: strong scaling at a fixed global ``batch``) has a curve,
``rates[i]`` iterations per second on ``sizes[i]`` GPUs, and its work is ``iterations``. Work is
counted in the job's own unit (seconds without a curve, iterations with one) so neither world
converts through a reference size whose throughput may not be measured, and a rigid replay does
exactly the arithmetic it always did.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import StrEnum
from functools import lru_cache

import numpy as np


class JobKind(StrEnum):
    STRICT_SLO = "strict"
    SOFT_SLO = "soft"
    BEST_EFFORT = "best_effort"


def shown_seconds(t: float) -> str:
    """A time or a length in seconds as messages and output files write it: exact (it reads
    back as the same float) and never in exponent notation. ``:g`` kept six digits, so a Unix
    time read "guaranteed to finish by 1.79601e+09", up to 5,000 s off, and a replay's deadline
    at 12,204,630 s went into jobs.csv as 1.22046e+07, which its report then read back."""
    return np.format_float_positional(t, trim="-")


@dataclass(frozen=True, slots=True)
class DeadlineOption:
    """One deadline of a job's list (tightest first): finish by ``at`` and earn ``value``."""

    at: float
    value: float


@dataclass(frozen=True, slots=True)
class Job:
    """A training job as submitted. ``duration`` is seconds of work at ``gpus`` GPUs (the size it
    asks for). ``sizes``/``rates``: the sizes it may run on and their iterations per second (see
    the module docstring); without ``rates`` the job is rigid and ``sizes`` is ``(gpus,)``.

    ``pod_gpus``: the GPUs of each of its pods when the cluster manager runs it as pods it
    fixed (Kueue: a Workload's pods, ``gpus / pod_gpus`` of them), so the scheduler places it
    as those pods, each whole on one node; None (a trace, Slurm, the API) lets the scheduler
    shape the gang (``Scheduler.request_for``)."""

    id: str
    tenant: str
    gpus: int
    submit: float
    kind: JobKind
    deadlines: tuple[DeadlineOption, ...] = ()
    duration: float | None = None
    iterations: float | None = None
    model: str | None = None
    batch: int | None = None
    sizes: tuple[int, ...] = ()
    rates: tuple[float, ...] = ()
    pod_gpus: int | None = None

    def __post_init__(self) -> None:
        # Without a curve the one size is the request, also after ``replace(job, gpus=n)``.
        if not self.rates:
            object.__setattr__(self, "sizes", _one_size(self.gpus))
        elif len(self.rates) != len(self.sizes):
            raise ValueError(f"job {self.id}: {len(self.sizes)} sizes but {len(self.rates)} rates")

    @property
    def rigid(self) -> bool:
        return len(self.sizes) == 1

    @property
    def min_size(self) -> int:
        return self.sizes[0]

    @property
    def max_size(self) -> int:
        return self.sizes[-1]

    @property
    def work(self) -> float:
        """Total work in the job's unit: iterations with a curve, else seconds at its size."""
        return self.iterations if self.rates else self.duration

    @property
    def throughputs(self) -> tuple[float, ...]:
        """Work per second on each of ``sizes`` (1 for a job without a curve)."""
        return self.rates or (1.0,)

    @property
    def top_rate(self) -> float:
        return max(self.throughputs)

    def rate(self, gpus: int) -> float:
        """Work per second on ``gpus`` GPUs (one of its sizes)."""
        return self.rates[self.sizes.index(gpus)] if self.rates else 1.0

    def seconds(self, gpus: int, work: float | None = None) -> float:
        """Seconds ``work`` (default: all of the job's) takes at ``gpus`` GPUs, one of its sizes:
        a scheduling round plans a job at one size in seconds (a rigid job's work already is)."""
        return (self.work if work is None else work) / self.rate(gpus)

    def up_to(self, gpus: int) -> Job | None:
        """The job on a cluster of ``gpus`` GPUs: with only its sizes that fit (None if none
        does)."""
        keep = [i for i, n in enumerate(self.sizes) if n <= gpus]
        if not keep:
            return None
        if len(keep) == len(self.sizes):
            return self
        return replace(
            self,
            gpus=min(self.gpus, self.sizes[keep[-1]]),
            sizes=tuple(self.sizes[i] for i in keep),
            rates=tuple(self.rates[i] for i in keep),
        )

    def best_time(self) -> float:
        """Seconds to finish alone at the fastest size, without any overhead."""
        return self.work / self.top_rate

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


@lru_cache(maxsize=256)
def _one_size(gpus: int) -> tuple[int, ...]:
    """A rigid job's sizes, ``(gpus,)``: one shared tuple per size rather than one per job (the
    service holds 100,000 jobs; issue 27)."""
    return (gpus,)


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
