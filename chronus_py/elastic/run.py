"""A job's life in an elastic replay: what the engine tracks and the policies read."""

from __future__ import annotations

from dataclasses import dataclass, field

from chronus_py.elastic.jobs import ElasticJob


@dataclass(eq=False)
class Run:
    """Mutable per-job state. ``guaranteed`` is set when a policy admits the job against its plan
    (a promise to meet its deadline); ``dropped`` when a policy gives up on it (it never runs
    again)."""

    job: ElasticJob
    remaining: float
    size: int = 0
    since: float = 0.0
    paused_until: float = 0.0
    guaranteed: bool = False
    dropped: bool = False
    first_start: float | None = None
    finish: float | None = None
    starts: int = 0
    resizes: int = 0
    preemptions: int = 0
    overhead_seconds: float = 0.0
    overhead_gpu_seconds: float = 0.0
    gpu_seconds: float = 0.0
    known_gpus: set = field(default_factory=set)
    id: str = field(init=False)
    deadline: float = field(init=False)
    rate_of: dict[int, float] = field(init=False, repr=False)
    next_size: dict[int, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # lookups the policies make thousands of times per event
        self.id = self.job.id
        self.deadline = self.job.deadline
        self.rate_of = {0: 0.0, **dict(zip(self.job.sizes, self.job.rates))}
        self.next_size = {a: b for a, b in zip((0,) + self.job.sizes, self.job.sizes)}

    def progress_to(self, t: float) -> None:
        """Advance the job's work to time ``t`` at its current size."""
        if self.size:
            start = max(self.since, self.paused_until)
            if t > start:
                self.remaining -= self.rate_of[self.size] * (t - start)
            self.gpu_seconds += self.size * (t - self.since)
        self.since = t

    def completes_at(self) -> float:
        """When the job finishes if nothing changes (infinity when stopped)."""
        if not self.size:
            return float("inf")
        start = max(self.since, self.paused_until)
        return start + max(self.remaining, 0.0) / self.rate_of[self.size]
