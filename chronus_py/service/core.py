"""The service's state machine, without HTTP: submissions, cancellations, progress reports, and
the round that observes the backend, plans, and applies the decisions through it.

Order of effects, which is what makes a crash at any instant safe:
- a submission is committed to the database (with its promise) before it is answered, then made
  known to the backend; a job committed but unknown to the backend is submitted again on start.
  Requests that the server runs together (a batch, ``batches.py``) share one commit
  (``Service.batch``): each is answered after it, and the batch's submissions reach the backend
  after it too, so the order holds per job;
- a round first observes the backend (completions, jobs that ended outside chronus) and only
  then plans; each decision is applied through the backend, then recorded. If the backend
  refuses or fails, the service rebuilds its scheduler from the backend's view before deciding
  anything again, so a job is never started twice;
- on start, the scheduler is rebuilt from what the backend says runs where, plus the promises
  and estimates of the database.

A round is five steps (``tick`` runs them in a row): ``take_arrivals`` admits the backend's
arrivals and queues their submits; ``act`` issues them; ``decide`` observes, plans, records the
promises and the lease plan and queues the starts and preemptions; ``act`` issues those;
``record`` writes each command that took effect to the database. The server runs every step
but ``act`` under the one lock every request takes, and ``act`` without it, so a request never
waits for a round's batch of commands (``commands.py`` says how a cancellation and an in-flight
start are ordered). Every other method, and the locked steps, is called one at a time (the server
holds the lock, in worker threads so the event loop stays free for ``/healthz``): the scheduler
and the database are never used by two threads at once; ``act`` reads neither.

A kill between ``decide`` and ``record`` is the crash between a command and its record that
could always happen: on restart the scheduler is rebuilt from what the backend runs, so a
command issued is found running and one never issued is decided again.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from chronus_py.backends.base import Backend, BackendUnavailable, NodeInfo, RunState
from chronus_py.errors import ArgumentError, InputError
from chronus_py.jobs.model import Cluster, DeadlineOption, Job, Node
from chronus_py.jobs.throughputs import ThroughputTable
from chronus_py.service import rounds
from chronus_py.service.commands import Command, Outcome, SerialBackend
from chronus_py.service.db import NOT_KEPT, TERMINAL, Database, storage_error
from chronus_py.service.jobspec import (
    FieldError,
    Forbidden,
    JobSpec,
    Origin,
    Unrunnable,
    integer,
    read_job,
    shown,
)
from chronus_py.service.json_codec import log_line

log = logging.getLogger("chronus.serve")
ECHOED = 300
"""The most of an unknown job's id a 404 repeats: room for the longest ids a backend gives
(Kueue's ``<namespace>.<workload>``), not a 60 KB path sent back whole."""
FULL_OBSERVE_EVERY = 300.0
CATCH_UP_STEP = 0.02
"""Seconds of one step of a re-plan's commit under the request lock (``Service.commit_replan``):
a request waits at most about this long behind it."""
CATCH_UP_STEPS = 500
"""Steps after which a commit takes in all the arrivals left at once."""
FORK_GAP = 0.1
"""Wall seconds from the end of a replaced plan's release to the fork of the re-plan owed
meanwhile (``Service.fork_wait``): the release shares the GIL with the requests for 20-50 ms,
and a fork right after it (10-46 ms holding the lock and the GIL) made the requests slowed by
the one wait for the other too (issue 27, session 16, "the wait after a fork")."""
HEALTH_EVERY = 1.0
"""Wall seconds between two reads of node health: a drained node must stop getting new jobs
within a round or two, and one read is one cheap call (one REST request for Slurm)."""
_ENDED = {RunState.FINISHED: "finished", RunState.FAILED: "failed", RunState.CANCELLED: "cancelled"}


class ApiError(Exception):
    """A request the service refuses: HTTP ``status``, a message, and the field at fault."""

    def __init__(self, status: int, message: str, field: str | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field

    def line(self) -> str:
        """The refusal as one line, naming the field."""
        return f"{self.field}: {self.message}" if self.field else self.message


REUSED = "chronus takes no new job under it: submit the job again under another name"
"""Why an arrival whose id names a job that ended is refused (``Service._arrivals``)."""


class Rejected(ApiError):
    """A well-formed job this service cannot run: the API answers it 200, with admission
    ``rejected`` and the reason (``line``), and keeps nothing."""

    def __init__(self, reason: str, field: str | None = None):
        super().__init__(200, reason, field)


@dataclass
class Caller:
    """Who is asking: a tenant, or an admin (sees and changes every tenant's jobs)."""

    tenant: str
    admin: bool = False

    def sees(self, tenant: str) -> bool:
        return self.admin or tenant == self.tenant


@dataclass
class Counters:
    """What the metrics report that is not in the database."""

    submissions: dict[str, int] = field(default_factory=dict)
    round_seconds: list[float] = field(default_factory=list)
    rounds: int = 0
    backend_errors: int = 0
    resyncs: int = 0
    demotions: int = 0
    round_began: float | None = None
    """``time.monotonic()`` when the round in progress began; None between rounds. ``/healthz``
    reads it without the lock, to show a round that runs long."""


_held = threading.local()
"""``lines``: the decision lines this thread holds for one write (``held_decisions``)."""


def decision_log(event: str, **fields: Any) -> None:
    """One structured (JSON) log line per decision."""
    line = log_line({"event": event, **fields})
    lines = getattr(_held, "lines", None)
    if lines is None:
        log.info(line)
    else:
        lines.append(line)


@contextlib.contextmanager
def held_decisions(*, kept: bool = False):
    """The decision lines this thread logs inside, logged as one record (one line each in the
    server's log, ``server._LineFormat``) when the block ends without an exception, and dropped
    if it raises (``Service.batch``: what its failed commit did not keep was never decided),
    unless ``kept`` (a round's step: each line says what was done before the failure).

    Why: ``logging`` costs ~16 us a record besides the line itself (the record, the handlers'
    chain, a flushed write; in-process, issue 27 session 14), and a batch of requests logs up
    to ``batches.MOST`` lines, a round under churn a dozen (its starts and preemptions, each
    start's late-start line, their records)."""
    outer = getattr(_held, "lines", None)
    _held.lines = lines = [] if outer is None else outer
    done = False
    try:
        yield
        done = True
    finally:
        _held.lines = outer
        if outer is None and lines and (done or kept):
            log.info("\n".join(lines))


class Service:
    def __init__(
        self,
        backend: Backend,
        db: Database,
        settings: rounds.SchedulerSettings,
        *,
        allocator_factory: Callable[[], Any] | None = None,
        on_round: Callable[[float], None] | None = None,
        on_admission: Callable[[float], None] | None = None,
        layers=None,
        throughputs: Path | None = None,
        replan_in_child: bool = False,
        on_replan: Callable[[], None] | None = None,
    ):
        self.backend = SerialBackend(backend)
        self._queue: deque[Command] = deque()  # under backend.lock: decided, not yet issued
        self._outcomes: list[Outcome] = []  # under backend.lock: issued, not yet recorded
        self._reports: dict | None = None  # what ``act`` publishes after the commands
        self.replan_in_child = replan_in_child
        self.on_replan = on_replan or (lambda: None)
        self.replan: rounds.Replan | None = None
        # The plan the last commit replaced is being freed (``release_replaced``): no fork
        # until it is, and a re-plan that fell due meanwhile is owed (``fork_wait``).
        self.releasing = False
        # A re-plan was committed and no round has run on its plan yet (see ``fork_wait``).
        self.unrounded = False
        self._replan_owed = False
        self._fork_after = 0.0  # ``time.monotonic()`` before which no owed re-plan is forked
        self._deferred: dict[str, tuple[Job, Mapping[str, Any]]] | None = None
        """Inside ``batch``: the submissions accepted, to be sent to the backend after the
        batch's commit (by job id, so a cancellation in the same batch can drop one)."""
        self._throughputs_dir = throughputs
        self._table: ThroughputTable | None = None
        self.db = db
        self.settings = settings
        self.allocator_factory = allocator_factory or (lambda: None)
        self.on_round = on_round or (lambda seconds: None)
        self.on_admission = on_admission or (lambda seconds: None)
        self.counters = Counters()
        self.layers = layers
        self._placements_changed = True
        nodes = self.backend.nodes()
        self.nodes_seen: list[NodeInfo] = list(nodes)
        self.cluster = Cluster(tuple(Node(n.name, len(n.gpus)) for n in nodes))
        self.cluster_gpus = self.cluster.gpus  # a sum over the nodes: not redone per request
        self.needs_resync = False
        self.storage_failed: tuple[int, str] | None = None
        """A round's or a batch's write the database refused (a full disk: ``storage_error``),
        until the rebuild it forces completes: submissions meanwhile are told that, not only
        that the service is re-reading the cluster."""
        self.rebuild()

    @property
    def plan(self):
        """The last round's :class:`~chronus_py.plan.Plan` (None before the first round),
        assembled on first use after each round."""
        if self._plan is None and self._decided is not None:
            self._plan = rounds.assemble(self.scheduler, self._decided)
        return self._plan

    # -- (re)building from the backend's truth plus the database -----------------------------------
    def rebuild(self) -> None:
        """A fresh scheduler holding every active job as the backend sees it, with the
        promises and estimates the database remembers."""
        now = self.backend.now()
        observed = {o.id: o for o in self.backend.jobs()}
        self._backend_keeps_promises = getattr(self.backend, "records_promises", False)
        self._backend_resizes = getattr(self.backend, "resizes_waiting_jobs", False)
        forgets = getattr(self.backend, "forgets_ended_jobs", False)
        self.needs_resync = True  # until this rebuild completes: no admission meanwhile
        self.estimates: dict[str, float] = {}
        self.scheduler = rounds.scheduler_for(
            self.settings,
            self.cluster,
            allocator=self.allocator_factory(),
            estimates=self.estimates,
            even_gangs=self.backend.even_gangs,
            whole_pods=self.backend.whole_pods,
            start_latency=getattr(self.backend, "start_latency", None),
        )
        # the one field of a job's spec read after admission (for the layers), kept alone: the
        # whole spec per job was memory held for nothing (issue 27)
        self.cgroups: dict[str, str] = {}
        self.tenants = rounds.Tenants(self.scheduler)  # each held job's, from its record
        measured = self.db.reestimated_ids()
        with self.db.transaction():
            for row in self.db.jobs(active_only=True):
                obs = observed.pop(row["id"], None)
                spec = self._with_pods(row, self._stored(row, now), obs, now)
                if obs is not None and obs.state in _ENDED:
                    self.db.set_state(
                        row["id"], _ENDED[obs.state], finished=obs.ended_at, starts=obs.starts
                    )
                    continue
                if obs is None and forgets and (row["first_start"] is not None or row["starts"]):
                    # It ran, so the backend had it: it ended, or its cluster manager lost it,
                    # while the service was away. Submitted again, its work ran a second time
                    # from the start (Slurm: a finished job purged MinJobAge after it ended);
                    # lost while the service runs, it fails too.
                    self.db.set_state(row["id"], "failed", finished=now)
                    decision_log("gone", job=row["id"], reason="the backend no longer has it")
                    continue
                if obs is None:
                    self.backend.submit(spec.job, spec.fields)
                guaranteed = (
                    DeadlineOption(row["guaranteed_at"], row["guaranteed_value"])
                    if row["guaranteed_at"] is not None
                    else None
                )
                if obs is not None and self._backend_keeps_promises:
                    guaranteed = obs.guaranteed  # the cluster's record outranks this replica's
                known = spec.estimate is not None or row["id"] in measured
                self._restore(spec, row["estimate"], obs, guaranteed, now, known=known)
            for obs in observed.values():
                if obs.state in _ENDED or obs.spec is None or self.db.has_job(obs.id):
                    continue
                origin = Origin.record(str(obs.spec.get("tenant")), now)
                spec = self._read(dict(obs.spec), origin, now)
                admission = rounds.Admission(
                    rounds.NOT_GUARANTEED,
                    reason="recovered from the backend: the database had no record",
                )
                if obs.guaranteed is not None:
                    admission = rounds.Admission(
                        rounds.GUARANTEED,
                        obs.guaranteed,
                        "recovered from the backend's record of the promise",
                    )
                self._record(spec, self.db.next_seq(), admission)
                self._restore(
                    spec,
                    rounds.planned_work(spec.estimate),
                    obs,
                    obs.guaranteed,
                    now,
                    known=spec.estimate is not None,
                )
                decision_log("recovered", job=spec.job.id, state=str(obs.state))
        self.promised = rounds.guarantees(self.scheduler)
        self.replan = None  # a re-plan in flight planned the old scheduler: its result is dropped
        self._replan_owed = False  # the new scheduler's own select re-plans it
        self.bad_nodes: set[str] = set()
        self._follow_health()
        self._full_observe_at = time.monotonic() + FULL_OBSERVE_EVERY
        self._fresh = True
        self._placements_changed = True
        self._decided = None
        self._plan = None
        self.needs_resync = False
        self.storage_failed = None
        self.counters.resyncs += 1
        self._publish_due = True

    def _restore(
        self, spec: JobSpec, estimate: float, obs, guaranteed, now: float, *, known: bool
    ) -> None:
        job_id = spec.job.id
        self.estimates[job_id] = estimate
        self._keep_cgroup(spec)
        running = obs is not None and obs.state is RunState.RUNNING
        done = 0.0 if obs is None else obs.work_done
        if done is None:
            # The backend only knows how long the current run has been going (its earlier runs'
            # work is unknown: counting it as none errs towards more remaining work).
            done = now - obs.run_since if running and obs.run_since is not None else 0.0
        kwargs = dict(
            work_done=max(done, 0.0),
            starts=obs.starts if obs else 0,
            guaranteed=guaranteed,
            known=known,
        )
        try:
            rounds.restore(
                self.scheduler,
                spec.job,
                now,
                placement=dict(obs.placement) if running else None,
                **kwargs,
            )
        except ValueError as exc:
            # The backend runs it where the scheduler cannot hold it (e.g. a node left the
            # partition): stop it, and schedule it again from where it is.
            decision_log("preempt", job=job_id, reason=f"cannot hold its placement: {exc}")
            self.backend.preempt(job_id)
            rounds.restore(self.scheduler, spec.job, now, placement=None, **kwargs)
        self.db.set_state(
            job_id,
            "running" if running else "pending",
            placement=obs.placement if running else None,
            starts=obs.starts if obs else None,
        )

    # -- requests ----------------------------------------------------------------------------------
    @contextlib.contextmanager
    def batch(self):
        """Requests run in a row as one group (``batches.Batches``): one database transaction
        for all of them (each request's own is a savepoint in it), committed before any of them
        is answered, and then the group's submissions sent to the backend, in order.

        Why: a commit per request was ~10% of the server's CPU under churn (BEGIN and COMMIT,
        SQLite's WAL frames of the same few pages written again for every request; py-spy,
        session 14). The promise does not change: an answered job is in the database, and a
        job reaches the backend only once committed. If the commit fails, no request of the
        group was kept, each gets the error, and the scheduler, which admitted them in memory,
        is rebuilt from the database and the backend before anything is decided again."""
        self._deferred = {}
        try:
            with held_decisions(), self.db.transaction(), self._backend_together():
                yield
        except BaseException as exc:
            self.failed(exc)
            raise
        finally:
            deferred, self._deferred = self._deferred, None
        if not deferred:
            return
        try:
            with self._backend_together():
                for job, fields in deferred.values():
                    self._submit_to_backend(job, fields)
        except BackendUnavailable as exc:  # their commit: ``rebuild`` submits them again
            self._backend_failed("submit", None, exc)

    def _backend_together(self):
        """The backend's ``together`` (optional: the sim's one transaction for the commands of
        a batch), ended before the database's commit that records what the commands did, as a
        command's own commit was."""
        together = getattr(self.backend.inner, "together", None)
        return contextlib.nullcontext() if together is None else together()

    def submit(self, body: Any, caller: Caller, *, dry_run: bool = False) -> tuple[int, dict]:
        if self.needs_resync:
            # The scheduler may not match the cluster: a promise made now could not be kept.
            if self.storage_failed is not None:
                status, what = self.storage_failed
                raise ApiError(status, f"{what}: {NOT_KEPT}")
            raise ApiError(
                503, "the service is re-reading the cluster after an error; retry shortly"
            )
        started = time.perf_counter()
        now = self.backend.now()
        self._replan_if_due(now)
        origin = Origin.request(caller.tenant, admin=caller.admin)
        try:
            spec, admission = self.intake(body, origin, now, dry_run=dry_run)
        except Rejected as exc:
            return self._rejected(exc.line())
        if dry_run:
            # No id: no job has it, nor is it kept for one (a link to it would lead nowhere).
            return 200, {"submitted": False, "dry_run": True, "admission": admission.to_dict()}
        self.on_admission(time.perf_counter() - started)
        shown = self.shown(spec.job.id, caller)
        return 201, {"id": shown, "submitted": True, "now": now, "admission": admission.to_dict()}

    def intake(
        self,
        body: Any,
        origin: Origin,
        now: float,
        *,
        dry_run: bool = False,
        in_round: bool = False,
    ) -> tuple[JobSpec, rounds.Admission]:
        """The one way in for a new job, a request's or a backend arrival's: its fields read by
        the rules of its ``origin``, its id checked against every id ever accepted, then what
        this cluster can never run refused, and the rest admitted (``accept``: the database,
        the promise, the audit, the backend), or only probed in a ``dry_run``.

        One rule for refusals: a job that breaks the published schema (openapi.py: types,
        ranges, the cluster's size, the elastic models) or reuses an id is an ApiError naming
        the field; a well-formed job this service cannot run (its last deadline not after now,
        no measured size in its elastic range, a backend's objection) is :class:`Rejected`
        with the reason. Either way nothing is kept."""
        spec = self._read(body, origin, now)
        job = spec.job
        if rounds.held(self.scheduler, job.id) or self.db.has_job(job.id):
            raise ApiError(409, f"you have a job with id {origin.shown(job.id)!r} already", "id")
        if not spec.needs_size and job.gpus > self.cluster_gpus:
            raise ApiError(422, f"expected at most the cluster's {self.cluster_gpus}", "gpus")
        refused = rounds.reject_reason(
            self.scheduler, job, spec.estimate, now, sized=not spec.needs_size
        )
        if refused is None and spec.needs_size:
            sized = rounds.size_elastic(self.scheduler, spec, now)
            if isinstance(sized, str):
                raise Rejected(sized)
            spec, job = sized, sized.job
            refused = rounds.reject_reason(self.scheduler, job, spec.estimate, now)
        refused = refused or self.backend.refuse(job, spec.fields)
        if refused is not None:
            raise Rejected(refused[1], refused[0])
        try:
            if dry_run:
                admission = rounds.probe(self.scheduler, job, spec.estimate, now)
                self._record_promise_changes(now)
                return spec, admission
            return spec, self.accept(spec, now, in_round=in_round)
        except ArgumentError as exc:
            # The library's own checks (``Scheduler.submit``, before it changes anything) of
            # a well-formed job the service's reading let through (a deadline's value or an
            # elastic job's iterations past 1e15): rejected naming the field, not a 503
            # (schemathesis: duration_seconds 1.4e308), nor, for a backend's arrival, an
            # error out of every round.
            raise Rejected(exc.why, exc.field) from None

    def _stored(self, row: Mapping[str, Any], now: float) -> JobSpec:
        """An accepted job's row, read back as a record. One that cannot be is a line naming
        the database and the job, and no start: serving without it would lose an accepted
        job, and the traceback it was named neither (a tenant's 128-character id, refused by
        the request's rule when read back, kept ``chronus serve`` from starting)."""
        try:
            return self._read(row["spec"], Origin.record(row["tenant"], row["submit"]), now)
        except ApiError as exc:
            raise InputError(
                self.db.path, f"cannot be read back: {exc.line()}", field=f"job {row['id']!r}"
            ) from None

    def _with_pods(self, row: Mapping[str, Any], spec: JobSpec, obs, now: float) -> JobSpec:
        """A stored job with the pods its backend's record gives it where the database has
        none (``Job.pod_gpus``): a job accepted by a chronus before it, whose backend now reads
        them (Kueue: from the Workload's pod sets). The database's row is rewritten so. Without
        it, the upgraded service kept planning such a job as a gang of no fixed pods, which
        Kueue could not start (2 pods of 3 GPUs planned 4 + 2 on 4-GPU nodes)."""
        pods = None if obs is None or obs.spec is None else obs.spec.get("pod_gpus")
        if pods is None or spec.fields.get("pod_gpus") is not None:
            return spec
        try:
            fixed = self._read(
                {**row["spec"], "pod_gpus": pods}, Origin.record(row["tenant"], row["submit"]), now
            )
        except ApiError as exc:  # another size than the record's (a resize follows): as it was
            log.warning(
                json.dumps({"event": "pods_refused", "job": row["id"], "error": exc.line()})
            )
            return spec
        self.db.respec(row["id"], fixed.fields, row["estimate"])
        return fixed

    def _read(self, body: Any, origin: Origin, now: float) -> JobSpec:
        """A job's fields, checked (``jobspec.read_job``); what is wrong is an ApiError naming
        the field (403 for a field the caller may not set, else 422; :class:`Rejected` for a
        well-formed elastic job none of whose sizes is measured)."""
        try:
            return read_job(body, origin, now=now, throughputs=self.throughputs)
        except Unrunnable as exc:
            raise Rejected(exc.why, exc.field) from None
        except Forbidden as exc:
            raise ApiError(403, exc.why, exc.field) from None
        except FieldError as exc:
            raise ApiError(422, exc.why, exc.field) from None
        except (TypeError, ValueError) as exc:  # a record's field no check foresaw
            raise ApiError(422, str(exc)) from None

    def _rejected(self, why: str) -> tuple[int, dict]:
        """The answer to a well-formed job this service cannot run: no job, so no id."""
        admission = rounds.Admission(rounds.REJECTED, reason=why)
        self._count(admission.decision)
        return 200, {"submitted": False, "admission": admission.to_dict()}

    @staticmethod
    def scoped(job_id: str, caller: Caller) -> str:
        """The id a job ``caller`` names ``job_id`` has in the service (``Origin.scope``)."""
        return Origin.request(caller.tenant, admin=caller.admin).scope(job_id)

    @staticmethod
    def shown(job_id: str, caller: Caller) -> str:
        """A job's id as ``caller`` names it (``Origin.shown``)."""
        return Origin.request(caller.tenant, admin=caller.admin).shown(job_id)

    def accept(self, spec: JobSpec, now: float, *, in_round: bool = False) -> rounds.Admission:
        """Admit a checked job: commit it and its promise, then tell the backend: at once for a
        request, and for a round's arrival (``in_round``) by ``act`` before the round decides,
        so a round admitting 60 Workloads does not hold requests up for 60 backend writes. The
        submit thus comes before any start of the job; a kill before it is issued is the
        crash between commit and submit that ``rebuild`` repairs (it submits what the backend
        lacks)."""
        job = spec.job
        self.estimates[job.id] = rounds.planned_work(spec.estimate)
        stats = rounds.solver_stats(self.scheduler)
        before = None if stats is None else stats.rounds
        state, admission = rounds.admit(self.scheduler, job, now, known=spec.estimate is not None)
        self._keep_cgroup(spec)
        deadline = admission.deadline
        try:
            with self.db.transaction():
                self._record(spec, state.seq, admission)
                if deadline is not None:
                    self.db.promise(
                        job.id, "promised", (deadline.at, deadline.value), now, update_job=False
                    )
                    self.promised[job.id] = deadline
                self.db.decision(now, job.id, "admit:" + admission.decision, None, admission.reason)
                if stats is not None and stats.rounds != before:
                    self._record_promise_changes(now, in_transaction=True)
        except BaseException as exc:
            # Not kept (e.g. a full disk), but admitted in memory: rebuilt from the database
            # and the backend before anything is decided again, as a batch whose commit fails
            # is (``batch``); else the job would hold its id (a 409 on retry) and its GPUs.
            self.failed(exc)
            raise
        decision_log(
            "admit",
            job=job.id,
            tenant=job.tenant,
            decision=admission.decision,
            deadline=None if deadline is None else deadline.at,
            now=now,
        )
        self._count(admission.decision)
        self._publish_due = True
        if in_round:
            with self.backend.lock:
                self._queue.append(Command("submit", job.id, None, "", now, job, spec.fields))
            return admission
        if self._deferred is not None:  # in a batch: after its commit
            self._deferred[job.id] = (job, spec.fields)
        else:
            self._submit_to_backend(job, spec.fields)
        return admission

    def _submit_to_backend(self, job: Job, fields: Mapping[str, Any]) -> None:
        try:
            self.backend.submit(job, fields)
        except BackendUnavailable as exc:
            self._backend_failed("submit", job.id, exc)

    def _keep_cgroup(self, spec: JobSpec) -> None:
        cgroup = spec.fields.get("cgroup")
        if cgroup is not None:
            self.cgroups[spec.job.id] = cgroup

    def _record(self, spec: JobSpec, seq: int, admission: rounds.Admission) -> None:
        """Keep a job taken in, with the admission it was answered and its promise, in the
        database (the caller holds the transaction); its id is never given again."""
        deadline = admission.deadline
        self.db.add_job(
            job_id=spec.job.id,
            seq=seq,
            tenant=spec.job.tenant,
            spec=spec.fields,
            submit=spec.job.submit,
            estimate=rounds.planned_work(spec.estimate),
            first_deadline=_first(spec),
            admission=admission.to_dict(),
            guaranteed=None if deadline is None else (deadline.at, deadline.value),
        )

    def cancel(self, job_id: str, caller: Caller) -> dict:
        row = self._visible(job_id, caller)
        job_id = row["id"]
        if row["state"] == "cancelled":
            return self.job_view(row, caller)  # DELETE is idempotent
        if row["state"] in TERMINAL:
            raise ApiError(
                409,
                f"job {self.shown(job_id, caller)!r} is {row['state']}: nothing to cancel",
                "id",
            )
        now = self.backend.now()
        try:
            with self.backend.lock:  # a start of it in flight ends first, or is never issued
                self._drop_commands(job_id)
                done = self._take_done(job_id)
                # submitted earlier in this batch: the backend never heard of it, nor will
                if self._deferred is None or self._deferred.pop(job_id, None) is None:
                    self.backend.cancel(job_id)
        except BackendUnavailable as exc:
            self._backend_failed("cancel", job_id, exc)
            raise ApiError(503, f"the backend did not take the cancellation: {exc}") from None
        if rounds.active_job(self.scheduler, job_id) is not None:
            rounds.withdraw(self.scheduler, job_id, now)
            self._placements_changed = True
        self._forget(job_id)
        with self.db.transaction():
            for command in done:  # issued before the cancellation: recorded before it
                self._record_command(command)
            self.db.set_state(job_id, "cancelled", finished=now)
            self.db.decision(now, job_id, "cancel", None, f"cancelled by {caller.tenant}")
        decision_log("cancel", job=job_id, by=caller.tenant, now=now)
        # the row as set_state left it, without reading it back
        return self.job_view(
            {**row, "state": "cancelled", "placement": None, "finished_at": now}, caller
        )

    def _forget(self, job_id: str) -> None:
        """Drop what memory holds of a job that ended: its database row is its record now, as
        after a restart (:meth:`rebuild` takes in only active jobs). Kept, the records of every
        job ever submitted grew the server by ~0.8 KB a job for good (issue 27)."""
        rounds.forget(self.scheduler, job_id)
        self.promised.pop(job_id, None)
        self.estimates.pop(job_id, None)
        self.cgroups.pop(job_id, None)

    def progress(self, job_id: str, body: Any, caller: Caller) -> dict:
        row = self._visible(job_id, caller)
        if row["state"] == "cancelled":
            raise ApiError(404, f"job {job_id!r} was cancelled", "id")
        job_id = row["id"]
        if not isinstance(body, dict) or set(body) != {"iterations_done"}:
            raise ApiError(422, 'expected {"iterations_done": N}', "iterations_done")
        done = integer(body["iterations_done"])
        if done is None or done < 0:
            raise ApiError(422, "expected an integer >= 0", "iterations_done")
        # What the job's own record forbids is a conflict with it (409), not a malformed field.
        total = row["spec"].get("iterations")
        if total is None:
            raise ApiError(409, "the job was submitted without iterations", "iterations_done")
        if done > total:
            raise ApiError(409, f"the job has {total} iterations in all", "iterations_done")
        active = rounds.active_job(self.scheduler, job_id)
        if active is None:
            raise ApiError(409, f"job {job_id} is {row['state']}, not active", "iterations_done")
        now = self.backend.now()
        self._replan_if_due(now)
        old = self.estimates[job_id]
        first = not active.known
        new = rounds.progress(self.scheduler, job_id, done / total, now)
        if new is not None:
            self.estimates[job_id] = new
            with self.db.transaction():
                self.db.reestimated(job_id, now, old, new)
                if first:  # its admission was decided with its first estimate: record it
                    self._record_promise_changes(now, in_transaction=True)
            event = "estimate" if first else "reestimate"
            decision_log(event, job=job_id, old=old, new=new, now=now)
        return {**self.job_view(self.db.job(job_id), caller), "reestimated": new is not None}

    def _visible(self, job_id: str, caller: Caller) -> dict:
        """The job ``caller`` names ``job_id``: its own scoped id first, then the id as given
        (a job an admin submitted for the tenant, or one that came from the backend)."""
        names = (job_id,) if caller.admin else (self.scoped(job_id, caller), job_id)
        for name in names:
            row = self.db.job(name)
            if row is not None and caller.sees(row["tenant"]):
                return row
        raise ApiError(404, f"no job {shown(job_id, ECHOED)}", "id")

    def resolve(self, job_id: str, caller: Caller) -> str:
        """The service's own id of the job ``caller`` names ``job_id`` (404 if not theirs)."""
        return self._visible(job_id, caller)["id"]

    def named_by_tenants(self, job_id: str) -> list[str]:
        """The ids of the jobs that tenants name ``job_id`` (each its tenant's scoped id): the
        address of a job's page that a tenant shares names the job so, and an admin, who names
        every job by its full id, follows it through these (``/ui/jobs/{id}``)."""
        scoped = (Origin.request(t).scope(job_id) for t in self.db.tenants())
        return [name for name in scoped if self.db.has_job(name)]

    def get_job(self, job_id: str, caller: Caller) -> dict:
        return self.job_view(self._visible(job_id, caller), caller)

    def live_job(self, job_id: str, caller: Caller) -> dict:
        """``GET /v1/jobs/{id}``: a cancelled job is gone from there (``DELETE`` removed it; a
        read after it is a 404), and stays in the listing with state cancelled."""
        row = self._visible(job_id, caller)
        if row["state"] == "cancelled":
            raise ApiError(
                404, f"job {job_id!r} was cancelled (GET /v1/jobs?state=cancelled lists it)", "id"
            )
        return self.job_view(row, caller)

    def list_jobs(
        self,
        caller: Caller,
        *,
        tenant: str | None,
        state: str | None,
        limit: int,
        after: str | None,
    ) -> list[dict]:
        if not caller.admin:
            if tenant is not None and tenant != caller.tenant:
                return []
            tenant = caller.tenant
        if after is not None:
            try:
                after = self._visible(after, caller)["id"]
            except ApiError:
                # Not "nothing after it": the answer would tell another tenant's ids apart.
                raise ApiError(
                    404, f"no job {shown(after, ECHOED)} of yours to list after", "after"
                ) from None
        return [
            self.job_view(r, caller)
            for r in self.db.jobs(tenant=tenant, state=state, limit=limit, after=after)
        ]

    def job_view(self, row: Mapping[str, Any], caller: Caller | None = None) -> dict:
        """A job as ``caller`` sees it (its id as the caller names it; None: in full)."""
        spec = row["spec"]
        estimate = rounds.estimate_state(self.scheduler, row["id"], self.backend.now())
        out = {
            "id": row["id"] if caller is None else self.shown(row["id"], caller),
            "tenant": row["tenant"],
            "state": row["state"],
            "gpus": spec["gpus"],
            "submit": row["submit"],
            "deadlines": spec.get("deadlines", []),
            "estimate_seconds": self._estimate_seconds(row, estimate),
            "admission": row["admission"],
            "guaranteed": None
            if row["guaranteed_at"] is None
            else {"at": row["guaranteed_at"], "value": row["guaranteed_value"]},
            "placement": row["placement"] or {},
            "elastic": spec.get("elastic"),
            "estimate": estimate,
            "first_start": row["first_start"],
            "finished_at": row["finished_at"],
            "starts": row["starts"],
        }
        if row["state"] == "finished" and row["first_deadline"] is not None:
            out["met_first_deadline"] = row["finished_at"] <= row["first_deadline"]
        return out

    def _estimate_seconds(self, row: Mapping[str, Any], estimate: dict | None) -> float | None:
        """The work the job is planned with; None while it is being measured (the probe it is
        ranked by is no estimate), and for an ended job that never got one."""
        if estimate is not None:
            return estimate["seconds"]
        spec = row["spec"]
        if "estimate_seconds" in spec or "elastic" in spec or self.db.was_reestimated(row["id"]):
            return row["estimate"]
        return None

    def cluster_view(self) -> dict:
        """The cluster as the scheduler places on it: nodes and their health as the rounds last
        read them (``HEALTH_EVERY``), so this read never waits for a backend command."""
        nodes = self.nodes_seen
        used: dict[str, int] = {}
        for placement in rounds.placements(self.scheduler).values():
            for node, gpus in placement.items():
                used[node] = used.get(node, 0) + len(gpus)
        pending, running = rounds.job_counts(self.scheduler)
        return {
            "backend": self.backend.name,
            "now": self.backend.now(),
            "gpus": self.cluster_gpus,
            "free_gpus": rounds.free_gpus(self.scheduler),
            "pending": pending,
            "running": running,
            "nodes": [
                {
                    "name": n.name,
                    "gpus": len(n.gpus),
                    "used": used.get(n.name, 0),
                    "healthy": n.healthy,
                    "reason": n.reason,
                }
                for n in nodes
            ],
        }

    # -- the round ---------------------------------------------------------------------------------
    def tick(self) -> None:
        """One whole round, its steps in a row (what a caller without the server's loop runs).
        Backend failures are logged and leave the service to resync and retry on the next
        tick."""
        try:
            self.look()
            self.take_arrivals()
            self.act()
            self.decide()
            self.act()
        finally:
            self.record()

    def look(self) -> None:
        """Without the request lock, before a round: a backend that reads its cluster in one
        look (``Backend.look``, optional) reads it now, for the round's ``arrivals`` and
        ``jobs``. Under the lock, a slow cluster manager held up requests, and the loop's
        throttle, which paces rounds by how long they hold the lock, turned it into a pause
        twice as long between rounds (Slurm 24.11 at load 28: 0.4-1.2 s listings, 1-2 s
        pauses, 3.5-4.5 s from round to round; issue 26, session 12). A failure is the
        round's: it looks again under the lock, and fails there as before."""
        if self.to_look:
            with contextlib.suppress(BackendUnavailable):
                self.backend.look()  # under the backend's lock, as every call (``SerialBackend``)

    @property
    def to_look(self) -> bool:
        """Whether ``look`` has anything to do: the loop skips its thread hand-off where the
        backend has no ``look`` (the sim) or the round resyncs anyway."""
        return hasattr(self.backend, "look") and not self.needs_resync

    def take_arrivals(self) -> None:
        """Under the request lock, a round's first step: resync if due, owe a due re-plan
        (the loop forks it after the round), and admit the backend's arrivals, queueing their
        submits (``act`` issues them before ``decide`` observes: a submit is where the backend
        says an arrival's object is gone, which the round must know before it decides to start
        it)."""
        with held_decisions(kept=True):
            self._take_arrivals()

    def _take_arrivals(self) -> None:
        self.counters.round_began = time.monotonic()
        with self.backend.lock:
            if self._queue or self._outcomes:
                # The loop records a round before the next begins; anything else is a bug that
                # could issue one round's commands after the next round's.
                raise RuntimeError("a round began before the last one's commands were recorded")
        try:
            if self.needs_resync:
                self.rebuild()
            self._replan_if_due(self.backend.now(), notify=False)
            self._arrivals()
        except BackendUnavailable as exc:
            self._backend_failed("round", None, exc)

    def decide(self) -> None:
        """Under the request lock, once the arrivals are submitted: observe, plan, record the
        promises and the lease plan, and queue the backend commands (``act`` issues them)."""
        with held_decisions(kept=True):
            self._decide()

    def _decide(self) -> None:
        if self.counters.round_began is None:
            self.counters.round_began = time.monotonic()
        with self.backend.lock:
            if self._queue:
                raise RuntimeError("a round decided before its queued commands were issued")
        try:
            self._observe()
            if time.monotonic() >= self._health_at:
                self._follow_nodes()
                if not self.needs_resync:  # else the rebuild follows health on the new cluster
                    self._follow_health()
            self._round()
            self._reports = None
            if self._publish_due and not self.needs_resync and hasattr(self.backend, "publish"):
                self._publish_due = False
                self._reports = rounds.reports(self.scheduler, self.backend.now())
        except BackendUnavailable as exc:
            self._backend_failed("round", None, exc)

    @property
    def to_act(self) -> bool:
        """Whether ``act`` has anything to do: commands queued, or reports to publish. Only a
        round's steps add either, so the loop reads it between them and skips an idle ``act``
        and its two thread hand-offs (most rounds under churn: a cancellation only removes
        commands; issue 27, session 16)."""
        return bool(self._queue) or self._reports is not None

    def act(self) -> None:
        """Without the request lock, in the loop's thread: issue the queued commands in order,
        each under the backend's lock, then publish. It reads neither the scheduler nor the
        database. After a failure nothing more is issued (today's rule: nothing is decided or
        done until the scheduler is rebuilt from the backend's view); a command a cancellation
        dropped from the queue meanwhile is never issued."""
        try:
            while True:
                with self.backend.lock:
                    if not self._queue or self.needs_resync:
                        break
                    command = self._queue.popleft()
                    try:
                        self._issue(command)
                    except BackendUnavailable as exc:
                        self.needs_resync = True  # at once: no submission is promised meanwhile
                        self._outcomes.append(Outcome(command, exc))
                        break
                    self._outcomes.append(Outcome(command))
            if self._reports is not None and not self.needs_resync:
                self.backend.publish(self._reports)
        except BackendUnavailable as exc:  # publish failed: the next round resyncs
            self.needs_resync = True
            with self.backend.lock:
                self._outcomes.append(Outcome(Command("publish", "", None, "", 0.0), exc))
        finally:
            self._reports = None
            with self.backend.lock:
                if self._queue:  # not issued (a failure before them): decided again after resync
                    self._queue.clear()
                    self.needs_resync = True

    def _issue(self, command: Command) -> None:
        if command.action == "submit":
            self.backend.submit(command.job, command.fields)
        elif command.action == "start":
            self.backend.start(command.job_id, command.placement)
        else:
            self.backend.preempt(command.job_id)

    def record(self) -> None:
        """Under the request lock: write each command that took effect to the database (the job's
        state only while it is still active: a cancellation after its start has the last word),
        count the failures, and keep the layers current."""
        with held_decisions(kept=True):
            self._record_outcomes()

    def _record_outcomes(self) -> None:
        try:
            with self.backend.lock:
                outcomes, self._outcomes = self._outcomes, []
                if self._queue:  # a step failed before act: never issued, decided again
                    self._queue.clear()
                    self.needs_resync = True
            done = [o.command for o in outcomes if o.error is None and o.command.action != "submit"]
            for o in outcomes:
                if o.error is not None:
                    self._backend_failed(o.command.action, o.command.job_id or None, o.error)
            if done:
                self._placements_changed = True
                with self.db.transaction():
                    for c in done:
                        self._record_command(c)
                for c in done:
                    decision_log(
                        c.action, job=c.job_id, placement=c.placement, reason=c.reason, now=c.at
                    )
        finally:
            self.counters.round_began = None
        if self.layers is not None and self._placements_changed:
            self._placements_changed = False
            self._write_layers()

    def _record_command(self, c: Command) -> None:
        if rounds.active_job(self.scheduler, c.job_id) is not None:
            self.db.set_state(
                c.job_id,
                "running" if c.action == "start" else "pending",
                placement=c.placement,
                started=c.at if c.action == "start" else None,
                starts=rounds.starts(self.scheduler, c.job_id),
            )
        self.db.decision(c.at, c.job_id, c.action, c.placement, c.reason)

    def _take_done(self, job_id: str) -> list[Command]:
        """Take a job's commands that took effect but are not recorded yet out of the outcomes
        (the caller holds the backend's lock, and records them)."""
        mine = [
            o.command
            for o in self._outcomes
            if o.command.job_id == job_id and not o.error and o.command.action != "submit"
        ]
        if mine:
            self._outcomes = [o for o in self._outcomes if o.command not in mine]
            for c in mine:
                decision_log(
                    c.action, job=c.job_id, placement=c.placement, reason=c.reason, now=c.at
                )
        return mine

    def _drop_commands(self, job_id: str) -> None:
        """Take a job's queued commands out (the caller holds the backend's lock)."""
        kept = [c for c in self._queue if c.job_id != job_id]
        if len(kept) != len(self._queue):
            decision_log("dropped_commands", job=job_id, commands=len(self._queue) - len(kept))
            self._queue = deque(kept)

    def _write_layers(self) -> None:
        running = {
            job_id: (placement, self.cgroups.get(job_id))
            for job_id, placement in rounds.placements(self.scheduler).items()
        }
        try:
            nodes = self.layers.update(running)
        except OSError as exc:
            self._placements_changed = True
            log.warning(json.dumps({"event": "layers_error", "error": str(exc)}))
            return
        if nodes:
            decision_log("layers", nodes=nodes)

    def _arrivals(self) -> None:
        """Jobs that entered through the backend (a trace's arrivals, jobs submitted to the
        cluster manager with chronus' marker) go through ``intake`` like a request; one it
        refuses is ended on the backend, unless its id names a job chronus took that is still
        active (accepted, and the backend not told yet: kept). An id of a job that ended is a
        new job under a used id: refused, or it came back every round for ever (a Kueue
        Workload recreated after its job was cancelled, its quota held). A backend with
        ``refuse_arrival`` is handed the field at fault and why, to tell the job's owner in
        its own terms (a marker key, an annotation); any other is told ``cancel``."""
        refuse = getattr(self.backend, "refuse_arrival", None)
        for fields in self.backend.arrivals():
            now = self.backend.now()
            job_id = str(fields.get("id"))
            try:
                self.intake(dict(fields), _record_origin(fields, now), now, in_round=True)
            except ApiError as exc:
                if exc.status == 409:
                    row = self.db.job(job_id)
                    if row is None or row["state"] not in TERMINAL:
                        decision_log("refuse", job=job_id, reason=exc.line())
                        continue
                    exc = ApiError(409, f"a job of this id ended ({row['state']}); {REUSED}", "id")
                decision_log("refuse", job=job_id, reason=exc.line())
                if refuse is None:
                    self.backend.cancel(job_id)
                else:
                    refuse(job_id, exc.field, exc.message)

    def throughputs(self) -> ThroughputTable:
        """The throughput tables elastic jobs are sized by (``--throughputs``, else the bundled
        A100 tables), read on the first elastic job."""
        if self._table is None:
            from chronus_py.jobs.throughputs import read_throughputs

            self._table = read_throughputs(self._throughputs_dir)
        return self._table

    def _follow_nodes(self) -> None:
        """Take nodes that joined, left or changed their GPU count into the cluster, for a
        backend whose nodes may change while it serves (``nodes_can_change``: Kubernetes Node
        objects). The scheduler is then rebuilt on the new cluster from the backend's view, as
        after a backend error: this round decides nothing, the next one starts from the rebuild
        (a job running on a node that left is stopped there and scheduled again)."""
        if not getattr(self.backend, "nodes_can_change", False):
            return
        seen = {n.name: len(n.gpus) for n in self.backend.nodes()}
        had = {n.name: n.gpus for n in self.cluster.nodes}
        if seen == had:
            return
        decision_log(
            "cluster_changed",
            joined=sorted(seen.keys() - had.keys()),
            left=sorted(had.keys() - seen.keys()),
            resized={n: [had[n], g] for n, g in sorted(seen.items()) if had.get(n, g) != g},
        )
        self.cluster = Cluster(tuple(Node(name, gpus) for name, gpus in seen.items()))
        self.needs_resync = True

    def _follow_health(self) -> None:
        """Keep placement off nodes the backend reports unhealthy (Slurm: drained, down, not
        responding) and let it use them again when they recover. Jobs already running there are
        the backend's business: it ends or keeps them, and observation follows."""
        self._health_at = time.monotonic() + HEALTH_EVERY
        known = {n.name for n in self.cluster.nodes}
        self.nodes_seen = [n for n in self.backend.nodes() if n.name in known]
        nodes = {n.name: n for n in self.nodes_seen}
        bad = {name for name, n in nodes.items() if not n.healthy}
        for name in sorted(bad - self.bad_nodes):
            rounds.set_health(self.scheduler, name, healthy=False)
            decision_log("node_unhealthy", node=name, reason=nodes[name].reason)
        for name in sorted((self.bad_nodes - bad) & nodes.keys()):
            rounds.set_health(self.scheduler, name, healthy=True)
            decision_log("node_healthy", node=name)
        self.bad_nodes = bad | (self.bad_nodes - nodes.keys())

    def _observations(self):
        """What changed on the backend: every job every ``FULL_OBSERVE_EVERY`` wall seconds
        (and always from a backend without ``jobs_changed``), else only the changes."""
        changed = getattr(self.backend, "jobs_changed", None)
        if changed is None or time.monotonic() >= self._full_observe_at:
            self._full_observe_at = time.monotonic() + FULL_OBSERVE_EVERY
            return self.backend.jobs()
        return changed()

    def _observe(self) -> None:
        """Bring the scheduler in line with the backend: completions, any disagreement about
        what runs (which forces a rebuild from the backend's view), and runs that began later
        than the round that started them.

        A start takes effect when the backend runs the job, not when the round decided it:
        after the grace of the jobs preempted for it, and the cluster manager's own scheduling
        pass (about a second for Slurm). Counted from the round, the job would be credited
        with work it has not done, and a guarantee planned on that credit can be broken; so a
        run counts from when the backend says it began, whenever that is later."""
        ended = []
        now = self.backend.now()
        for obs in self._observations():
            state = rounds.active_job(self.scheduler, obs.id)
            if state is None:
                continue
            if obs.state in _ENDED:
                ended.append(obs)
            elif self._backend_resizes and _resized(obs, state.job):
                self._resize(obs, now)
            elif (obs.state is RunState.RUNNING) != rounds.is_running(state) or (
                obs.state is RunState.RUNNING and dict(obs.placement) != dict(state.placement)
            ):
                decision_log(
                    "resync", job=obs.id, backend=str(obs.state), scheduler=str(state.status)
                )
                self.needs_resync = True
            elif (
                obs.state is RunState.RUNNING
                and obs.run_since is not None
                and state.run_since is not None
                and obs.run_since > state.run_since
            ):
                late = obs.run_since - state.run_since
                rounds.run_began(self.scheduler, obs.id, obs.run_since, now)
                decision_log("late_start", job=obs.id, seconds=round(late, 3))
        if ended:
            self._placements_changed = True
            with self.db.transaction():
                for obs in ended:
                    at = obs.ended_at if obs.ended_at is not None else self.backend.now()
                    rounds.finish(self.scheduler, obs.id, at)
                    self._forget(obs.id)
                    self.db.set_state(obs.id, _ENDED[obs.state], finished=at, starts=obs.starts)
                    self.db.decision(at, obs.id, _ENDED[obs.state], None, "observed")
                    decision_log(_ENDED[obs.state], job=obs.id, at=at)
        if self.needs_resync:
            self.rebuild()

    def _resize(self, obs, now: float) -> None:
        """Hook (issue 24), for a backend with ``resizes_waiting_jobs``: it runs a waiting job at
        another size than the scheduler holds (Kueue reserved a preempted Workload again at
        another pod count). Keep the spec the backend reports (the old one is read from the
        database: the service keeps no spec in memory), the estimate scaled as that spec's, and
        rebuild: the rebuilt scheduler re-plans the job at its new size and keeps its promise
        only if it still fits (a withdrawn one is recorded as a demotion)."""
        row = self.db.job(obs.id)
        origin = Origin.record(row["tenant"], row["submit"])
        try:
            old = self._read(row["spec"], origin, now)
            spec = self._read(dict(obs.spec), origin, now)
        except ApiError as exc:
            log.warning(json.dumps({"event": "resize_refused", "job": obs.id, "error": exc.line()}))
            return
        estimate = row["estimate"]
        if old.estimate and spec.estimate:
            estimate *= spec.estimate / old.estimate
        why = f"the backend runs it at {spec.job.gpus} GPUs (was {old.job.gpus})"
        with self.db.transaction():
            self.db.respec(obs.id, spec.fields, estimate)
            self.db.decision(now, obs.id, "resized", None, why)
        decision_log("resized", job=obs.id, gpus=spec.job.gpus, was=old.job.gpus, now=now)
        self.needs_resync = True

    # -- the lease re-plan, in a child process --------------------------------------------------
    def _replan_if_due(self, now: float, *, notify: bool = True) -> None:
        """When the lease has ended, before anything selects: tell the committed plan (it goes
        on deciding, as it does while a child computes: nothing re-plans under the lock) and
        owe the re-plan, which the server's loop forks in a hold of its own once the request
        or round in progress is done (:meth:`fork_replan`, when :meth:`fork_wait` says so). A
        re-plan of thousands of guarantees takes seconds, which no request should wait for;
        nor for the fork, which copies the page tables of the whole process (10-46 ms with
        the lock and the GIL held at 6,024 guarantees): forked in the call that met the
        lease's end, every request of that call's batch waited for it (issue 27, session 17).
        ``notify``: wake the loop to fork (from a request; the loop looks after each round).

        A re-plan that falls due while another is in flight is not owed: the one in flight
        re-plans the lease it was forked in, and its plan's own lease is due again at its
        commit. The owed one is logged as deferred when it cannot be forked at once (a child
        alive, the replaced plan being freed, no round on the committed plan yet)."""
        if not self.replan_in_child or not rounds.replan_due(self.scheduler, now):
            return
        rounds.defer_replan(self.scheduler, now)
        self._replan_owed = self.replan is None
        if self.replan is not None or self.releasing or self.unrounded:
            # logged: with a child alive, telling the committed plan copies its pages
            decision_log("replan_deferred", now=now, owed=self._replan_owed)
        elif notify:
            self.on_replan()

    def fork_wait(self) -> float | None:
        """Seconds until the owed re-plan may be forked (0.0: now), or None: none is owed, or
        it may not be forked yet, for any of three reasons.

        Not while a child computes or its commit is under way (``replan``). Not while the plan
        the last commit replaced is being freed (``releasing``): after a fork every page that
        release writes (each freed booking is a write) is a copy, 61,000 copies and 2.5x the
        release's CPU at 6,024 guarantees (``benchmarks/replan_commit.py --fork-first``), all
        in the process that answers requests; and only ``FORK_GAP`` after it ends. Nor between
        a commit and the first round on the new plan (``unrounded``): that round starts and
        stops jobs all over the plan, and after a fork each page it writes is a copy: 26-61 ms
        of CPU under the lock with 5,900-7,300 page faults, against 5-10 ms and up to 380
        faults before the fork (10 s leases; issue 27, session 16, "the wait after a fork").
        The three came together whenever a re-plan took longer than its lease: the next was
        due at its commit. Read by the loop without the lock: :meth:`fork_replan` checks
        again under it."""
        if not self._replan_owed or self._fork_blocked:
            return None
        return max(0.0, self._fork_after - time.monotonic())

    @property
    def _fork_blocked(self) -> bool:
        return self.replan is not None or self.releasing or self.unrounded or self.needs_resync

    def fork_replan(self) -> None:
        """Under the lock, from the server's loop between requests: fork the owed re-plan
        (``rounds.start_replan``; the committed plan was told of the lease at its end)."""
        if not self._replan_owed or self._fork_blocked:
            return
        self._replan_owed = False
        now = self.backend.now()
        began = time.perf_counter()
        self.replan = rounds.start_replan(self.scheduler, now)
        if self.replan is not None:
            # with the fork's wall time: the one hold of the lock a re-plan's start costs
            forked = round(1000 * (time.perf_counter() - began), 1)
            decision_log("replan_started", now=now, jobs=len(self.replan.known), fork_ms=forked)

    def replan_result(self, replan: rounds.Replan):
        """The child's result (blocks: call it off the event loop, without the lock)."""
        return rounds.replan_result(replan, self.scheduler)

    def release_replaced(self) -> None:
        """Free the plan the last commit replaced (off the event loop, without the lock); the
        next re-plan may be forked ``FORK_GAP`` after it is (:meth:`fork_wait`)."""
        try:
            rounds.release_replaced(self.scheduler)
        finally:
            self._fork_after = time.monotonic() + FORK_GAP
            self.releasing = False

    def commit_replan(self, replan: rounds.Replan, result) -> bool:
        """One step, under the lock, of making the child's plan the committed one; True once
        done (or dropped), False if a step is still due (the caller releases the lock between
        steps, so requests are answered in between).

        While the child computed, the committed plan admitted every new job; each must be
        booked into the child's plan too before it is committed (about 2,500 after a 26 s
        re-plan of 5,000 guarantees, each an admission against the new plan: seconds in one
        go). So each step books arrivals into the uncommitted result for at most
        ``CATCH_UP_STEP`` seconds (``rounds.catch_up``) and the commit comes only in the step
        that leaves none behind: it books the last few and swaps in one piece, and every answer
        before it came from the committed plan, every answer after it from the new one, with
        the jobs answered by the old plan booked in the new. Jobs the committed plan started
        or stopped since the fork are re-planned in the same steps, first: the child planned
        them as they were, and a job it saw pending may run by now (``rounds.catch_up``). New
        submissions cost the lock what their catch-up costs, so each step gains on them;
        ``CATCH_UP_STEPS`` bounds the steps anyway (a saturated server commits the rest at
        once, as it used to). The next round records the promises the commit changed."""
        now = self.backend.now()
        if replan is not self.replan or self.needs_resync:
            return True  # the scheduler was rebuilt meanwhile: its own select re-plans it
        replan.steps += 1
        caught_up = False
        if result is not None and replan.steps < CATCH_UP_STEPS:
            caught_up = rounds.catch_up(self.scheduler, replan, result, now, CATCH_UP_STEP)
            if not caught_up:
                return False
        self.replan = None
        rounds.commit_replan(self.scheduler, replan, result, now, caught_up=caught_up)
        self.releasing = True  # until ``release_replaced`` has freed the plan this replaced
        self.unrounded = True  # until the next round has run on the new plan
        self._fresh = True
        self._plan = None  # assembled again, from the committed plan, when next asked
        decision_log(
            "replan_committed",
            now=now,
            began=replan.now,
            ok=result is not None,
            caught_up=len(replan.taken),
            steps=replan.steps,
        )
        return True

    def _round(self) -> None:
        now = self.backend.now()
        # A lease may have ended since the round took its arrivals: owed (forked by the loop
        # after this round), not re-planned by this round's select under the lock (seconds
        # with thousands of guarantees).
        self._replan_if_due(now, notify=False)
        stats = rounds.solver_stats(self.scheduler)
        before = None if stats is None else stats.rounds
        started = time.perf_counter()
        decided = rounds.advance(self.scheduler, now, committed=self._fresh, replan=self.replan)
        seconds = time.perf_counter() - started
        self.unrounded = False
        self._decided = decided
        self._plan = None
        self.counters.rounds += 1
        self.counters.round_seconds.append(seconds)
        del self.counters.round_seconds[:-1000]
        self.on_round(seconds)
        if self._fresh or (stats is not None and stats.rounds != before):
            # Guarantees change only at a re-plan, or when restored jobs are first admitted.
            self._fresh = False
            self._record_promise_changes(now)
        if decided.started or decided.preempted or (stats is not None and stats.rounds != before):
            self._publish_due = True
        if self.needs_resync:
            return
        reasons = rounds.reasons(self.scheduler, decided)
        queued = [
            Command("preempt", s.id, None, reasons.get(s.id, ""), now) for s in decided.preempted
        ]
        queued += [
            Command(
                "start",
                s.id,
                {n: tuple(g) for n, g in s.placement.items()},
                reasons.get(s.id, ""),
                now,
            )
            for s in decided.started
        ]
        with self.backend.lock:
            self._queue.extend(queued)

    def failed(self, exc: BaseException) -> None:
        """A step failed part way (a round, a batch's commit): nothing more is decided until
        the scheduler is rebuilt from the database and the backend."""
        self.needs_resync = True
        self.storage_failed = storage_error(exc) or self.storage_failed

    def _backend_failed(self, what: str, job_id: str | None, exc: Exception) -> None:
        """Nothing more is decided until the scheduler is rebuilt from the backend's view. A
        backend that failed to write its own store (the sim's file, beside the database) on a
        full disk is a full disk: submissions are told that (``storage_failed``), not only that
        the service is re-reading the cluster."""
        self.counters.backend_errors += 1
        self.needs_resync = True
        self.storage_failed = storage_error(exc.__cause__) or self.storage_failed
        log.warning(
            json.dumps({"event": "backend_error", "during": what, "job": job_id, "error": str(exc)})
        )

    def _record_promise_changes(self, now: float, *, in_transaction: bool = False) -> None:
        """Record guarantees a round gave (a retried admission) or withdrew (a demotion)."""
        current = rounds.guarantees(self.scheduler)
        if current == self.promised:
            return
        changes = [(j, "promised", d) for j, d in current.items() if self.promised.get(j) != d]
        changes += [
            (j, "demoted", None)
            for j in self.promised
            if j not in current and rounds.active_job(self.scheduler, j) is not None
        ]
        if not in_transaction:
            with self.db.transaction():
                self._write_promises(changes, now)
        else:
            self._write_promises(changes, now)
        self.promised = current

    def _write_promises(self, changes, now: float) -> None:
        for job_id, event, deadline in changes:
            self.db.promise(
                job_id, event, None if deadline is None else (deadline.at, deadline.value), now
            )
            if event == "demoted":
                self.counters.demotions += 1
            decision_log(
                event, job=job_id, deadline=None if deadline is None else deadline.at, now=now
            )

    def next_wakeup(self) -> float | None:
        """The backend time the loop must run a round by, if nothing else happens."""
        times = [
            t
            for t in (
                rounds.next_wakeup(self.scheduler, self.backend.now()),
                self.backend.next_event(),
            )
            if t is not None
        ]
        return min(times, default=None)

    def _count(self, decision: str) -> None:
        self.counters.submissions[decision] = self.counters.submissions.get(decision, 0) + 1


def _resized(obs, job) -> bool:
    """Whether a waiting job's backend reports it at another GPU count than ``job`` has."""
    gpus = (obs.spec or {}).get("gpus")
    return obs.state is RunState.PENDING and gpus is not None and int(gpus) != job.gpus


def _record_origin(fields: Mapping[str, Any], now: float) -> Origin:
    """A backend arrival's origin: the tenant and submission time its record names."""
    try:
        submit = float(fields.get("submit", now))
    except (TypeError, ValueError):
        raise ApiError(422, f"expected a number, got {fields.get('submit')!r}", "submit") from None
    return Origin.record(str(fields.get("tenant", "default")), submit)


def _first(spec: JobSpec) -> float | None:
    return spec.job.deadlines[0].at if spec.job.deadlines else None
