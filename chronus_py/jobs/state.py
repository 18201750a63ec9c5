"""Live job state: the one mutable record, owned by the :class:`~chronus_py.scheduler.Scheduler`.

Everything here is observable by a real cluster manager (start times, service received, restarts);
the job's true duration is not. ``estimate`` is what the estimate stage believes the job's work is;
``known`` is False while that is only a placeholder (the job is not measured yet), and no
guarantee is planned on it (``chronus_py.estimates.in_place``).

Progress, for rigid and elastic jobs alike: ``service`` is work done in the job's unit
(:class:`~chronus_py.jobs.model.Job`: seconds without a throughput curve, iterations with one),
banked when a run stops or changes; a running job adds ``speed`` units per second from
``run_since`` on, or from ``paused_until`` if later (a start or resize that pauses it: checkpoint,
restart, warm-up). ``speed`` is the placement slowdown of a rigid job (1 at full speed), the
throughput of its size for an elastic one. The elastic scheduler also keeps ``size`` (the GPUs
it runs on now, 0 stopped), the resizes and pauses it paid, its GPU-seconds and the GPUs it used
since its last start (``known_gpus``: a shrink onto them is cheap).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache
from typing import AbstractSet, Iterator, Mapping

from chronus_py.jobs.model import DeadlineOption, Job


class _Nowhere(Mapping[str, tuple[int, ...]]):
    """The placement of a job that runs nowhere: one shared, read-only empty mapping rather than
    an empty dict per job record (a placement is replaced, never changed in place; issue 27). It
    pickles and copies as the one ``NOWHERE``."""

    __slots__ = ()

    def __getitem__(self, node: str) -> tuple[int, ...]:
        raise KeyError(node)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return "{}"

    def __reduce__(self) -> str:
        return "NOWHERE"


NOWHERE = _Nowhere()


class Status(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(slots=True, eq=False)
class JobState:
    job: Job
    seq: int
    estimate: float
    overhead: float
    uncertainty: float = 0.0
    observed: bool = False
    status: Status = Status.PENDING
    service: float = 0.0
    wall: float = 0.0
    run_since: float | None = None
    speed: float = 1.0
    starts: int = 0
    preemptions: int = 0
    first_start: float | None = None
    finish: float | None = None
    placement: Mapping[str, tuple[int, ...]] = field(default_factory=lambda: NOWHERE)
    guaranteed: DeadlineOption | None = None
    was_guaranteed: DeadlineOption | None = None
    known: bool = True  # False while ``estimate`` is only a placeholder (nothing measured yet)
    paused_until: float = -math.inf
    size: int = 0
    dropped: bool = False  # a policy gave up on it: it never runs again
    resizes: int = 0
    overhead_seconds: float = 0.0
    overhead_gpu_seconds: float = 0.0
    gpu_seconds: float = 0.0
    known_gpus: AbstractSet[int] = frozenset()  # replaced, never changed in place
    id: str = field(init=False)
    gpus: int = field(init=False)
    deadline: float = field(init=False)
    rate_of: dict[int, float] = field(init=False, repr=False)
    next_size: dict[int, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # Copies of the job's, as plain slots: the scheduler reads them millions of times a replay,
        # elastic policies the per-size lookups thousands of times per event.
        job = self.job
        self.id = job.id
        self.gpus = job.gpus
        self.deadline = job.first_deadline
        self.rate_of, self.next_size = _per_size(tuple(job.sizes), tuple(job.rates))

    @property
    def segment(self) -> int:
        """Which run segment the job is in: it counts every start and resize, so a completion
        stamped with it is stale once the job moved (``chronus_py.engine.clock``)."""
        return self.starts + self.resizes

    def service_at(self, now: float) -> float:
        """Work done so far (in the job's unit), including the current run."""
        if self.run_since is None:
            return self.service
        start = self.run_since if self.run_since >= self.paused_until else self.paused_until
        if now <= start:
            return self.service
        return self.service + (now - start) * self.speed

    def completes_at(self, work: float) -> float:
        """When the current run has done ``work`` in all if nothing changes (inf if stopped)."""
        if self.run_since is None:
            return math.inf
        start = self.run_since if self.run_since >= self.paused_until else self.paused_until
        return start + max(work - self.service, 0.0) / self.speed

    def stop(self, now: float) -> None:
        """Bank the current run's progress and wall time (on preemption or completion)."""
        if self.run_since is not None:
            self.service = self.service_at(now)
            self.wall += now - self.run_since
            self.run_since = None

    def remaining(self, now: float) -> float:
        """Estimated seconds of work left, counting the restart overhead of every start so far
        and, when pending, of the start it still needs."""
        charged = self.starts + (self.status is Status.PENDING)
        left = self.estimate + charged * self.overhead - self.service_at(now)
        return 0.0 if 0.0 > left else left  # max(left, 0.0), without a call (millions a replay)

    def attained(self, now: float) -> float:
        """GPU-seconds of service so far (Tiresias' attained service)."""
        return self.service_at(now) * self.job.gpus

    def slack(self, now: float) -> float:
        """Seconds to spare before the guaranteed (else first) deadline if run from now on."""
        deadline = self.guaranteed.at if self.guaranteed else self.job.first_deadline
        return deadline - now - self.remaining(now) if math.isfinite(deadline) else math.inf


@lru_cache(maxsize=4096)
def _per_size(
    sizes: tuple[int, ...], rates: tuple[float, ...]
) -> tuple[dict[int, float], dict[int, int]]:
    """A job's rate per size (0: stopped) and the next size up from each, shared by every job of
    the same sizes and rates (read, never changed): two dicts per job were 448 bytes of the
    service's ~4 KB per job, for a handful of distinct values (issue 27)."""
    rate_of = {0: 0.0, **{n: rates[sizes.index(n)] if rates else 1.0 for n in sizes}}
    return rate_of, dict(zip((0,) + sizes, sizes))
