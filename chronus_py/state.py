"""Live job state: the one mutable record, owned by the :class:`~chronus_py.scheduler.Scheduler`.

Everything here is observable by a real cluster manager (start times, service received, restarts);
the job's true duration is not. ``estimate`` is what the estimate stage believes the job's work is;
``known`` is False while that is only a placeholder (the job is not measured yet), and no
guarantee is planned on it (``chronus_py.estimates.in_place``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Mapping

from chronus_py.model import DeadlineOption, Job


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
    placement: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    guaranteed: DeadlineOption | None = None
    was_guaranteed: DeadlineOption | None = None
    known: bool = True  # False while ``estimate`` is only a placeholder (nothing measured yet)
    id: str = field(init=False)
    gpus: int = field(init=False)

    def __post_init__(self) -> None:
        # Copies of the job's, as plain slots: the scheduler reads them millions of times a replay.
        self.id = self.job.id
        self.gpus = self.job.gpus

    def service_at(self, now: float) -> float:
        """Seconds of progress (at full speed) received so far, including the current run."""
        if self.run_since is None:
            return self.service
        return self.service + (now - self.run_since) * self.speed

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
        return max(self.estimate + charged * self.overhead - self.service_at(now), 0.0)

    def attained(self, now: float) -> float:
        """GPU-seconds of service so far (Tiresias' attained service)."""
        return self.service_at(now) * self.job.gpus

    def slack(self, now: float) -> float:
        """Seconds to spare before the guaranteed (else first) deadline if run from now on."""
        deadline = self.guaranteed.at if self.guaranteed else self.job.first_deadline
        return deadline - now - self.remaining(now) if math.isfinite(deadline) else math.inf
