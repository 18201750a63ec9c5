"""The backend interface: how ``chronus serve`` talks to the cluster manager that runs the jobs.

The service owns the scheduling loop, the promises and the database; a backend owns the truth
about what runs where. Everything a backend reports is an observation (the service never assumes
that a command it gave took effect until the backend shows it), which is what makes a restart
safe: on start the service asks the backend what runs, and believes it.

To write a backend for another cluster manager (Kubernetes, LSF, ...), implement the methods of
:class:`Backend` below. Calls come from one thread (the scheduling loop); a backend may block
inside a call (e.g. retrying a REST request) but must raise :class:`BackendUnavailable` rather
than hang for long, so the service can report the outage and retry the round later without
deciding anything.

Times are absolute seconds on the backend's own clock (``now()``): the sim backend's accelerated
clock, or Unix time for a real cluster. Job ids are the chronus ids (strings); a backend maps them
to its own (a Slurm job id) and back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Mapping, Protocol, Sequence

from chronus_py.jobs.model import DeadlineOption, Job


class BackendUnavailable(RuntimeError):
    """The cluster manager cannot be reached or answered garbage; nothing was changed by the call
    that raised it (or, for ``start``/``preempt``, the service must re-observe before retrying)."""


class RunState(StrEnum):
    PENDING = "pending"  # known to the backend, not running (never started, or preempted)
    RUNNING = "running"  # holding GPUs
    FINISHED = "finished"  # completed its work
    FAILED = "failed"  # ended without completing (crash, node failure): the job is over
    CANCELLED = "cancelled"  # cancelled outside chronus (e.g. ``scancel``) or by ``cancel``


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """One node: its name, GPU indices, and whether placement may use it (``healthy`` False for a
    drained/down node; ``reason`` says why)."""

    name: str
    gpus: tuple[int, ...]
    healthy: bool = True
    reason: str = ""


@dataclass(frozen=True, slots=True)
class ObservedJob:
    """What the backend knows of one chronus job.

    ``placement`` (node -> GPU indices) is where it runs while RUNNING, else empty. ``run_since``
    is when the current run started (RUNNING only; None while a started run has not begun,
    as a Kueue Workload whose pods pull their image: the service counts it from when the
    backend says it began), ``ended_at`` when it ended (terminal states).
    ``work_done`` is seconds of the job's work behind it if the backend can tell (the sim backend
    can; a real one may only know elapsed run time, then None and the service counts from
    ``run_since``). ``starts`` counts runs so far, the current one included. ``spec`` is the job
    as it was submitted (the fields of ``POST /v1/jobs``) if the backend kept it (the sim backend
    does; Slurm can in the job's comment), so a service that lost its database can still rebuild
    the job; None if the backend cannot tell. ``guaranteed`` is the promise the backend keeps
    for the job, read by a service whose backend ``records_promises`` (see :class:`JobReport`)."""

    id: str
    state: RunState
    placement: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    run_since: float | None = None
    ended_at: float | None = None
    work_done: float | None = None
    starts: int = 0
    spec: Mapping[str, Any] | None = None
    guaranteed: DeadlineOption | None = None


@dataclass(frozen=True, slots=True)
class JobReport:
    """What the rounds decided about one active job, for a backend that shows it to the job's
    owner (the optional ``publish``): its guarantee, the start the lease plan reserves for it
    (None: running, or not in the lease plan), and why it is not guaranteed (empty if it is)."""

    running: bool
    guaranteed: DeadlineOption | None
    planned_start: float | None
    reason: str


class Backend(Protocol):
    name: str
    even_gangs: bool
    """Whether every node of a job must hold the same number of its GPUs (Slurm asks GPUs per
    node); the scheduler then never plans a placement such as 3 GPUs here and 1 there."""
    whole_pods: bool
    """Whether the cluster manager runs a job as fixed pods it cannot reshape (Kueue); the
    scheduler then never spreads a gang's GPUs over nodes to fit it."""

    def now(self) -> float:
        """The backend's clock, in absolute seconds."""

    def wall_seconds_until(self, t: float) -> float:
        """Real seconds the loop should sleep before backend time ``t`` (0 if it is past); the sim
        backend divides by its speed-up."""

    def nodes(self) -> Sequence[NodeInfo]:
        """Every node of the partition chronus schedules, with health."""

    def jobs(self) -> Sequence[ObservedJob]:
        """Every chronus job the backend still tracks (pending, running, or ended since it was
        last reported), so the service can reconcile its database with the truth."""

    def jobs_changed(self) -> Sequence[ObservedJob]:
        """Optional (a backend may leave it out): the jobs whose state changed since the last
        call of ``jobs`` or ``jobs_changed`` (ended, started, stopped, or changed outside
        chronus), as ``jobs`` reports them; a job chronus submitted may be left out until it
        changes (the service knows it waits). A service with thousands of jobs observes through
        it every round and calls ``jobs`` only now and then; without it, ``jobs`` every round."""

    def start_latency(self) -> float:
        """Optional (a backend may leave it out: 0): backend seconds from when the plan had a job
        start to its work beginning, as measured so far on this cluster (Slurm: noticing freed
        GPUs or the arrival, the round's solve, the release, Slurm's scheduling pass and launch,
        and the grace of the jobs the start displaces). The plan charges it on every start, so
        a guarantee includes it."""

    def look(self) -> None:
        """Optional: read the cluster for the next round's ``arrivals`` and ``jobs``, called
        without the service's request lock just before the round (Slurm: settle the last
        round's starts and stops, list every job), so a slow read holds up no request and
        does not lengthen the pause the loop leaves between rounds (``Service.look``)."""

    def arrivals(self) -> Sequence[Mapping[str, Any]]:
        """Jobs that entered through the backend itself since the last call (Slurm: held jobs that
        carry the chronus marker; sim: trace arrivals up to ``now()``), each as the job fields of
        ``POST /v1/jobs`` (``id``, ``gpus``, ``deadlines``, ``estimate_seconds``, ``tenant``, ...),
        so the service checks them on the same path as API submissions. A job is returned until
        the service has accepted it (``submit``) or refused it (``cancel``), so a crash in between
        loses nothing."""

    def refuse(self, job: Job, spec: Mapping[str, Any]) -> tuple[str, str] | None:
        """Why this backend cannot run a checked submission, as (field, reason), or None. The
        service asks before accepting, so it never promises what the backend would refuse
        (the sim backend needs a job's true work to simulate it)."""

    def submit(self, job: Job, spec: Mapping[str, Any] | None = None) -> None:
        """Make an accepted API job known to the backend, not running (Slurm: a held job). Must be
        idempotent: after a crash the service may submit a job again. ``spec`` is the job as
        submitted (the fields of ``POST /v1/jobs``); a backend that can keep it returns it as
        ``ObservedJob.spec``. ``job.duration`` is the true work where the caller knows it (the
        sim backend simulates that much work)."""

    def start(self, job_id: str, placement: Mapping[str, tuple[int, ...]]) -> None:
        """Run a pending job on exactly these GPUs. Idempotent for a job already running there."""

    def preempt(self, job_id: str) -> None:
        """Checkpoint-and-stop a running job; it becomes PENDING and keeps its progress. A
        backend may finish the stop at its next ``start`` or ``jobs`` call, so the jobs one
        round preempts share one checkpoint grace (Slurm does)."""

    def cancel(self, job_id: str) -> None:
        """End a job for good (CANCELLED). Idempotent."""

    def next_event(self) -> float | None:
        """The next backend time something is known to happen without a command (a sim
        completion or trace arrival), or the next poll instant of a real backend; None: nothing."""

    def close(self) -> None:
        """Release connections and threads; jobs keep running."""

    # Optional, for a backend whose users submit to the cluster manager itself (Slurm's marker,
    # Kueue's annotations), so a refusal reaches them in the terms they used:
    #
    #     def refuse_arrival(self, job_id: str, field: str | None, why: str) -> None:
    #         """End an arrival the service refused (as ``cancel`` would), telling its owner why
    #         where they look. ``field`` is the job field at fault as the service names it
    #         (``deadlines[0].at``; None: the job as a whole), for the backend to name in its
    #         own terms. Without it the service calls ``cancel``."""
    #
    # Optional, for a backend that forgets a job some time after it ends (Slurm purges it
    # ``MinJobAge`` later, and a controller that lost its state forgets every job):
    # ``forgets_ended_jobs = True``. A job the database says ran (so the backend had it) and
    # the backend no longer lists when the service rebuilds is then failed, as one the backend
    # loses while the service runs; otherwise it is submitted again (``submit`` is idempotent
    # for the crash between a job's acceptance and its submission), and its work runs twice.
    #
    # Optional, for a backend that keeps the promises in the cluster manager itself (Kueue: on
    # the Workload), so a service that lost its database rebuilds them from the backend alone:
    # ``records_promises = True``, ``ObservedJob.guaranteed`` filled, and
    #
    #     def publish(self, reports: Mapping[str, JobReport]) -> None:
    #         """Record and show what the rounds decided about these active jobs (called after a
    #         round that changed something); must not start or stop anything."""


def topology_mismatch(
    cells: Mapping[str, int],
    nodes: Mapping[str, int],
    manager: str,
    *,
    not_there: str,
    leave_out: str = "",
) -> str | None:
    """Why a HiveD config's nodes (name -> GPUs) are not the cluster manager's ``nodes``, or
    None: config nodes it lacks (``not_there`` says what they are not), its nodes in no cell
    (``leave_out``: how else to exclude them), or a node whose GPU count differs. One rule for
    every backend that takes ``--cluster``; each words only its own side."""
    extra = sorted(set(cells) - set(nodes))
    if extra:
        return f"nodes {', '.join(extra)} {not_there}"
    missing = sorted(set(nodes) - set(cells))
    if missing:
        listed = ", ".join(missing)
        return f"{manager} nodes {listed} are in no cell: add them to the config{leave_out}"
    for name in sorted(cells):
        if cells[name] != nodes[name]:
            return f"node {name} has {cells[name]} GPUs here but {nodes[name]} in {manager}"
    return None
