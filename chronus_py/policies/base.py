"""What a policy is: a queue-sort key plus two flags, and optional hooks.

The policy decides *which* jobs should run (by ordering them); the scheduler's shared placement
walk decides *where*, and nothing else (Blox, Gavel: policy picks which, mechanism does where).
The scheduler walks all active jobs in key order and gives each the GPUs it needs while the
cluster has them; ``backfill`` lets a later job start when an earlier one does not fit, and
``preemptive`` lets the walk stop running jobs that fell out of the fitting set.

Contract that keeps the scheduler fast without re-sorting the world at every event:
- a job's key does not change while it waits, unless ``prepare`` names it;
- a running job's key does not get worse as time passes, except at the instant
  ``key_worsens_at`` returns for it (the scheduler wakes up then);
- keys end with the job's submission sequence number, so ties are deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Collection, Mapping, Protocol, Sequence

from chronus_py.model import DeadlineOption
from chronus_py.state import JobState


@dataclass(frozen=True)
class View:
    """What a policy sees at a decision point. Read-only by convention.

    ``active`` holds every pending and running job, ``arrived`` the jobs submitted since the
    previous decision point (in submission order), so a policy can admit them as a batch.
    ``node_gpus`` is the GPUs of the cluster's largest node (what a whole-node request is).
    ``estimate_pad`` is how much work (relative) to add to a job not observed yet, learned from
    the errors of earlier estimates (``chronus_py.estimates.errors``), and ``estimate_cut`` how much
    less it may need.
    """

    now: float
    active: Mapping[str, JobState]
    running: Mapping[str, JobState]
    arrived: Sequence[JobState]
    free_gpus: int
    total_gpus: int
    node_gpus: int
    estimate_pad: float = 0.0
    estimate_cut: float = 0.0


@dataclass(frozen=True)
class LeaseReport:
    """What a lease-planning policy adds to a round's plan: the end of the current lease, the
    start times of the future leases held for each guaranteed job, and how the lease plan was
    solved (backend, status, counts) with its solve time so far."""

    lease_end: float
    lease_plan: Mapping[str, tuple[float, ...]]
    solver: Mapping[str, Any]
    solve_seconds: float


class Policy(Protocol):
    name: str
    preemptive: bool
    backfill: bool

    def key(self, job: JobState, now: float) -> tuple:
        """Sort key: smaller runs first."""

    def key_worsens_at(self, job: JobState, now: float) -> float | None:
        """For a job that just started: when its key next gets worse (None: never)."""

    def prepare(self, view: View) -> Collection[str]:
        """Called once per decision point before ordering; returns the ids whose key changed."""

    def next_wakeup(self, now: float) -> float | None:
        """An extra decision point the policy needs (e.g. a lease boundary), or None."""

    def preempted(self, job: JobState, now: float) -> bool:
        """``job`` was just stopped for others; True if its key changed (a lease plan re-times a
        guaranteed job: the restart it lost moves its laxity earlier)."""

    def take_guarantee_changes(self) -> Mapping[str, DeadlineOption | None]:
        """Deadline guarantees given (the option) or withdrawn (None) since the last call; the
        scheduler copies them into its job records after ``prepare``."""

    def standing(self, job_id: str) -> str:
        """Why the job stands where it does in the order, for a decision's reason ("" if the
        key says it all)."""

    def lease_report(self) -> LeaseReport | None:
        """The lease plan behind the order, for policies that keep one (else None)."""


class OrderPolicy:
    """Base for policies that are only a key: no hooks, no wake-ups."""

    name = "order"
    preemptive = True
    backfill = True

    def key(self, job: JobState, now: float) -> tuple:
        raise NotImplementedError

    def key_worsens_at(self, job: JobState, now: float) -> float | None:
        return None

    def prepare(self, view: View) -> Collection[str]:
        return ()

    def next_wakeup(self, now: float) -> float | None:
        return None

    def preempted(self, job: JobState, now: float) -> bool:
        return False

    def take_guarantee_changes(self) -> Mapping[str, DeadlineOption | None]:
        return {}

    def standing(self, job_id: str) -> str:
        return ""

    def lease_report(self) -> LeaseReport | None:
        return None
