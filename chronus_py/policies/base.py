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

Beyond the order, a round asks a policy four things, each with a default in :class:`OrderPolicy`
so a policy that is only a key needs none of them (a lease-planning policy answers all):
- ``probe``: would this job be guaranteed now, and at which deadline option (a dry run of
  admission, nothing booked); ``refusal``: why it is not;
- ``solver_stats``: what its solver did (re-plans, fallbacks), for metrics;
- ``replan_due``, ``replan``, ``replan_started``, ``replan_load``, ``catch_up``, ``recheck``,
  ``commit_replan``, ``replan_release``: a re-plan computed elsewhere (the service forks it off
  the request path), read back, brought up to date with the jobs that arrived, started or
  stopped meanwhile, committed later, and the plan it replaced freed;
- ``size``: the size a waiting job that may run at several starts at.
Callers use these and never the policy's class or internals, so a new policy plugs into replay,
``chronus plan`` and the service alike. What the replay loop needs of any policy, rigid or
elastic, is declared the same way, with defaults (``OrderPolicy``, ``SizingPolicy``):
``elastic`` (which stage runs it), ``arrival_window`` and ``done_tolerance``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Collection, Iterable, Mapping, Protocol, Sequence

from chronus_py.jobs.model import DeadlineOption, Job
from chronus_py.jobs.overhead import Overhead
from chronus_py.jobs.state import JobState

if TYPE_CHECKING:
    from chronus_py.selector import SelectorStats


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


@dataclass(frozen=True)
class Sizes:
    """A waiting job the round may start at any of several sizes, as its record at each: the
    work, restart and progress it would have there (``at``: GPUs -> record, ascending). A rigid
    job has one size. What :meth:`Policy.size` chooses from."""

    job: Job
    at: Mapping[int, JobState]

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(self.at)


class Policy(Protocol):
    """What every policy declares, rigid or elastic, so the replay loop reads it without asking
    which kind it is: ``elastic`` (it names every job's size instead of ordering a queue, see
    :class:`ElasticPolicy`), ``arrival_window`` (seconds: arrivals within one such slot reach
    the policy together, at the last of their submission times; 0: only simultaneous ones) and
    ``done_tolerance`` (a job counts as done once its work left is within this share of its
    work; 0: only when its run completes)."""

    name: str
    preemptive: bool
    backfill: bool
    elastic: bool
    arrival_window: float
    done_tolerance: float

    def key(self, job: JobState, now: float) -> tuple:
        """Sort key: smaller runs first."""

    def keys(self, jobs: Sequence[JobState], now: float) -> list[tuple]:
        """``key`` of each of ``jobs``, in their order: the scheduler's walk re-keys its running
        jobs at once (about a million keys a Philly replay under ``chronus``)."""

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

    def probe(self, job: JobState, now: float) -> DeadlineOption | None:
        """The deadline option ``job`` would be guaranteed if it arrived now, without booking
        it (a dry run of admission); None if it would not be, or the policy guarantees
        nothing."""

    def refusal(self, job: JobState, now: float, *, detail: bool = True) -> str:
        """Why ``job`` holds no guarantee (or would get none now), in words for its owner;
        ``detail`` False leaves out what costs more to find (for Chronus, the test that refused
        it), for a reason given for every waiting job after every round."""

    def solver_stats(self) -> SelectorStats | None:
        """What the policy's solver did so far (re-plans, fallbacks, demotions), or None."""

    def replan_due(self, now: float) -> bool:
        """Whether the next ``prepare`` would re-plan (e.g. its lease ended)."""

    def replan(self, active: Mapping[str, JobState], now: float) -> Any:
        """Compute the re-plan that is due, on this copy of the policy (the service runs it in
        a forked child); returns what ``commit_replan`` takes, which must pickle."""

    def replan_started(self, now: float) -> None:
        """The due re-plan is computing elsewhere: until ``commit_replan``, decide against the
        committed plan instead of re-planning in ``prepare``."""

    def replan_load(self, result: Any) -> Iterable[None]:
        """Finish reading ``result`` as it came back unpickled, in steps: the service runs them
        in a worker thread without its lock, and other threads run between two steps (a large
        plan read in one call would stop them all)."""

    def replan_release(self) -> Iterable[None]:
        """Free the plan the last ``commit_replan`` replaced, in steps (as ``replan_load``)."""

    def catch_up(self, result: Any, arrived: Sequence[JobState], now: float) -> Collection[str]:
        """Take the jobs that ``arrived`` while the re-plan computed into ``result`` (of
        ``replan``), which is not this policy's plan yet: the service does it in short steps
        under its lock, answering requests between them from the committed plan, so the commit
        itself has only the last few to take in. Returns the ids whose key will change once
        ``result`` is committed."""

    def recheck(self, result: Any, moved: Sequence[JobState], now: float) -> Collection[str]:
        """Plan again in ``result`` (as ``catch_up``, in steps before the commit) the jobs
        that ``replan`` saw but that started or stopped since: it planned them as they were,
        and a job it saw waiting may be running by the commit (issue 27: a guarantee the
        re-plan dropped for a job it saw pending, with its start latency charged, was then
        withdrawn from it running, and the job preempted as hopeless). Returns the ids whose
        key will change once ``result`` is committed."""

    def commit_replan(
        self,
        result: Any,
        arrived: Sequence[JobState],
        now: float,
        moved: Sequence[JobState] = (),
    ) -> Collection[str]:
        """Make ``result`` (of ``replan``) the policy's plan, taking in the jobs that
        ``arrived`` meanwhile and those that ``moved`` (``recheck``) and were not taken in yet;
        returns the ids whose key changed. ``result`` None (the re-plan failed): the re-plan is
        due again, at the next ``prepare``."""

    def size(self, job: Sizes, view: View) -> int:
        """The size a waiting job starts at this round, one of ``job.sizes``."""


class OrderPolicy:
    """Base for policies that are only a key: no hooks, no wake-ups, no guarantees."""

    name = "order"
    preemptive = True
    backfill = True
    elastic = False
    arrival_window = 0.0
    done_tolerance = 0.0

    def key(self, job: JobState, now: float) -> tuple:
        raise NotImplementedError

    def keys(self, jobs: Sequence[JobState], now: float) -> list[tuple]:
        key = self.key
        return [key(job, now) for job in jobs]

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

    def probe(self, job: JobState, now: float) -> DeadlineOption | None:
        return None

    def refusal(self, job: JobState, now: float, *, detail: bool = True) -> str:
        if not job.job.is_slo:
            return "best-effort job: no deadline to guarantee"
        return f"policy {self.name} gives no guarantees"

    def solver_stats(self) -> SelectorStats | None:
        return None

    def replan_due(self, now: float) -> bool:
        return False

    def replan(self, active: Mapping[str, JobState], now: float) -> Any:
        return None

    def replan_started(self, now: float) -> None:
        return None

    def replan_load(self, result: Any) -> Iterable[None]:
        return ()

    def replan_release(self) -> Iterable[None]:
        return ()

    def catch_up(self, result: Any, arrived: Sequence[JobState], now: float) -> Collection[str]:
        return ()

    def recheck(self, result: Any, moved: Sequence[JobState], now: float) -> Collection[str]:
        return ()

    def commit_replan(
        self,
        result: Any,
        arrived: Sequence[JobState],
        now: float,
        moved: Sequence[JobState] = (),
    ) -> Collection[str]:
        return ()

    def size(self, job: Sizes, view: View) -> int:
        """Without guarantees to go by: a best-effort job its largest size (nothing is gained
        by waiting on a small one); an SLO job the smallest that meets its first deadline alone
        from now, restart included, else its fastest (smallest of equals)."""
        sizes = job.sizes
        if len(sizes) == 1 or not job.job.is_slo:
            return sizes[-1]
        deadline = job.job.deadlines[0].at
        for n in sizes:
            state = job.at[n]
            if view.now + state.overhead + (state.estimate - state.service) <= deadline:
                return n
        return min(sizes, key=lambda n: (job.at[n].estimate, n))


# -- elastic policies: they name every job's size at each event instead of ordering a queue --
@dataclass(frozen=True)
class ElasticView:
    """What an elastic policy may know of the cluster (the elastic counterpart of the rigid
    policies' ``View``): its GPUs and the overhead model it will be charged."""

    gpus: int
    overhead: Overhead


class ElasticPolicy(Protocol):
    """A policy that names every active job's size at each event (registered in
    ``chronus_py.policies.POLICIES`` with ``elastic`` True). The replay loop runs it behind
    ``chronus_py.engine.elastic.ElasticScheduler``: ``admit`` and ``assign`` are that stage's
    ``select``, ``finished`` follows its ``finish``; arrivals within one ``arrival_window``
    (seconds, 0: only simultaneous ones) reach ``admit`` together, and a job counts as done
    within ``done_tolerance`` of its work (as for :class:`Policy`)."""

    name: str
    elastic: bool
    arrival_window: float
    done_tolerance: float

    def admit(
        self, now: float, arrivals: list[JobState], active: list[JobState], cluster: ElasticView
    ) -> None:
        """Decide each newcomer: set ``guaranteed`` (promised), ``dropped``, or neither (run
        unpromised)."""

    def assign(
        self, now: float, active: list[JobState], cluster: ElasticView
    ) -> tuple[dict[str, int], float]:
        """Every active job's size now (absent = 0), and when to be asked again (inf: at the next
        arrival or completion)."""

    def finished(self, run: JobState) -> None:
        """A job completed or was dropped: forget it."""


class SizingPolicy:
    """Base for elastic policies: the defaults of :class:`ElasticPolicy` but ``admit`` and
    ``assign``. ``done_tolerance`` is a millionth: a job's progress, banked per run segment in
    floating point, may stop a rounding short of its iterations, and the elastic policies were
    measured (issue 15) with such a job counted done."""

    name = "sizing"
    elastic = True
    arrival_window = 0.0
    done_tolerance = 1e-6

    def finished(self, run: JobState) -> None:
        return None
