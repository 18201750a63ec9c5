"""The ``sim`` backend: a simulated cluster that outlives the daemon driving it.

It plays the replay's progress model at full speed (that of
:class:`~chronus_py.jobs.state.JobState` with ``speed`` 1, overhead from
``chronus_py.jobs.overhead``): a job's true work is its ``duration_seconds`` (else its estimate),
every start costs one restart overhead of extra work, and a running job progresses at full speed
until its work is done.

Its clock runs on wall time, accelerated: ``now = origin + (wall - wall0) * speed``, with the
anchors persisted. Its state is a pure function of the persisted commands (submit, start,
preempt, cancel, each stamped with its simulated time) and the jobs' true work, kept in its own
SQLite file, apart from the service's database: it plays the cluster, not the scheduler. So
when the daemon is killed the cluster keeps running; on restart the world folds its commands
again and knows what finished meanwhile, exactly as a real cluster would.
"""

from __future__ import annotations

import argparse
import contextlib
import heapq
import json
import math
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from chronus_py.backends.base import BackendUnavailable, NodeInfo, ObservedJob, RunState
from chronus_py.errors import InputError
from chronus_py.jobs.model import Job
from chronus_py.jobs.overhead import restart_overhead
from chronus_py.jobs.state import NOWHERE
from chronus_py.service.json_codec import encode_text
from chronus_py.service.wal import Checkpoints

CANNOT_RESIZE = "it runs each job at the size it started with and has no resize command yet"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS anchor (id INTEGER PRIMARY KEY CHECK (id = 0),
                                   origin REAL NOT NULL, wall0 REAL NOT NULL, speed REAL NOT NULL);
CREATE TABLE IF NOT EXISTS command (seq INTEGER PRIMARY KEY, kind TEXT NOT NULL, job TEXT NOT NULL,
                                    at REAL NOT NULL, data TEXT);
CREATE INDEX IF NOT EXISTS command_job ON command (job);
"""


class StoredSpec(Mapping[str, Any]):
    """A job's submitted fields (``ObservedJob.spec``), read from the world's file on first use:
    the service reads them only to rebuild a job its database lost, so the world keeps none in
    memory."""

    __slots__ = ("_read", "_id", "_fields")

    def __init__(self, read: Callable[[str], dict[str, Any]], job_id: str):
        self._read = read
        self._id = job_id
        self._fields: dict[str, Any] | None = None

    def _all(self) -> dict[str, Any]:
        if self._fields is None:
            self._fields = self._read(self._id)
        return self._fields

    def __getitem__(self, key: str) -> Any:
        return self._all()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self.items()) == dict(other.items())

    __hash__ = None  # type: ignore[assignment]  # a mapping, compared by its items


@dataclass(slots=True)
class _SimJob:
    """One job of the world, only what the cluster needs to run it: its size, true ``work`` and
    the ``overhead`` (work) one start costs, its state and run record (``service``: work banked
    by stopped runs; ``run_since``: the current run's start), where it runs and when it ended.
    Not the submitted spec, which stays in the world's file (``ObservedJob.spec`` reads it when
    used): the world holds one record per job ever submitted (100,000 in the memory benchmark),
    and a whole scheduler record plus the spec per job was ~0.9 KB of the service's ~2.3 KB per job
    (issue 27)."""

    id: str
    gpus: int
    work: float
    overhead: float
    state: RunState = RunState.PENDING
    starts: int = 0
    service: float = 0.0
    run_since: float | None = None
    placement: Mapping[str, tuple[int, ...]] = field(default_factory=lambda: NOWHERE)
    ended_at: float | None = None

    def need(self) -> float:
        """Total work the job needs by now: its true work plus one overhead per start."""
        return self.work + self.starts * self.overhead

    def service_at(self, now: float) -> float:
        """Work done by ``now``, the current run's included."""
        if self.run_since is None or now <= self.run_since:
            return self.service
        return self.service + (now - self.run_since)

    def completes_at(self) -> float:
        """When the current run has done all the work the job needs."""
        return self.run_since + max(self.need() - self.service, 0.0)

    def stop(self, at: float) -> None:
        """Bank the current run's progress (on preemption or its end)."""
        if self.run_since is not None:
            self.service = self.service_at(at)
            self.run_since = None


class SimWorld:
    """The cluster's state, folded from commands in time order; completions between commands
    are found by ``advance``. Knows nothing of SQLite or wall time: ``spec_of`` reads a job's
    submitted fields where they are kept (None: observed jobs show no spec)."""

    def __init__(
        self,
        nodes: Sequence[tuple[str, int]],
        spec_of: Callable[[str], dict[str, Any]] | None = None,
    ):
        self.node_gpus = {name: gpus for name, gpus in nodes}
        self.spec_of = spec_of
        self.jobs: dict[str, _SimJob] = {}
        self.owner: dict[tuple[str, int], str] = {}
        self._ends: list[tuple[float, int, str, int]] = []
        self._seq = 0
        self.time = -math.inf
        self.reported: set[str] = set()  # ended jobs the service has not been shown yet
        self.changed: set[str] = set()  # jobs whose state changed since the service last looked

    def advance(self, now: float) -> None:
        """Complete every run whose work is done by ``now``, in time order."""
        while self._ends and self._ends[0][0] <= now:
            at, _, job_id, run = heapq.heappop(self._ends)
            job = self.jobs[job_id]
            if job.state is RunState.RUNNING and job.starts == run:
                self._end(job, RunState.FINISHED, at)
        self.time = max(self.time, now)

    def next_end(self) -> float | None:
        while self._ends and not self._live(self._ends[0]):
            heapq.heappop(self._ends)
        return self._ends[0][0] if self._ends else None

    def _live(self, entry: tuple[float, int, str, int]) -> bool:
        job = self.jobs[entry[2]]
        return job.state is RunState.RUNNING and job.starts == entry[3]

    def _end(self, job: _SimJob, state: RunState, at: float) -> None:
        self.changed.add(job.id)
        self._release(job)
        job.stop(at)
        job.state = state
        job.ended_at = at
        self.reported.add(job.id)

    def _release(self, job: _SimJob) -> None:
        for node, gpus in job.placement.items():
            for gpu in gpus:
                self.owner.pop((node, gpu), None)
        job.placement = NOWHERE

    # -- commands: each checked, then applied; ``check_*`` raise before anything changes --------
    def apply(self, kind: str, job_id: str, at: float, data: Any) -> None:
        """Every command but a submit is a change the service is shown (``jobs_changed``): a
        submitted job waits, as the service that submitted it knows, and under churn (500 a
        second, issue 27) observing each one every round was work for nothing. A cancel is
        shown: the sim cannot tell the service's own from one made outside chronus."""
        self.advance(at)
        getattr(self, f"_{kind}")(job_id, at, data)
        if kind != "submit":
            self.changed.add(job_id)

    def check(self, kind: str, job_id: str, data: Any) -> None:
        """Raise BackendUnavailable if ``kind`` cannot apply now (nothing is changed)."""
        job = self.jobs.get(job_id)
        if kind == "submit":
            return
        if job is None:
            raise BackendUnavailable(f"sim: no job {job_id!r}")
        if kind == "start":
            if job.state is not RunState.PENDING:
                raise BackendUnavailable(f"sim: job {job_id} is {job.state}, not pending")
            count = 0
            for node, gpus in data.items():
                if node not in self.node_gpus:
                    raise BackendUnavailable(f"sim: no node {node!r}")
                for gpu in gpus:
                    if not 0 <= gpu < self.node_gpus[node]:
                        raise BackendUnavailable(f"sim: node {node} has no GPU {gpu}")
                    holder = self.owner.get((node, gpu))
                    if holder is not None:
                        raise BackendUnavailable(f"sim: {node} GPU {gpu} is held by job {holder}")
                count += len(gpus)
            if count != job.gpus:
                raise BackendUnavailable(f"sim: job {job_id} needs {job.gpus} GPUs, got {count}")
        elif kind == "preempt" and job.state is not RunState.RUNNING:
            raise BackendUnavailable(f"sim: job {job_id} is {job.state}, not running")

    def _submit(self, job_id: str, at: float, data: Mapping[str, Any]) -> None:
        if job_id in self.jobs:
            return
        gpus = int(data["spec"]["gpus"])
        self.jobs[job_id] = _SimJob(job_id, gpus, float(data["work"]), restart_overhead(gpus))

    def _start(self, job_id: str, at: float, data: Mapping[str, Any]) -> None:
        job = self.jobs[job_id]
        job.placement = {node: tuple(gpus) for node, gpus in data.items()}
        for node, gpus in job.placement.items():
            for gpu in gpus:
                self.owner[(node, gpu)] = job_id
        job.starts += 1
        job.state = RunState.RUNNING
        job.run_since = at
        self._seq += 1
        heapq.heappush(self._ends, (job.completes_at(), self._seq, job_id, job.starts))

    def _preempt(self, job_id: str, at: float, data: Any) -> None:
        job = self.jobs[job_id]
        job.stop(at)
        self._release(job)
        job.state = RunState.PENDING

    def _cancel(self, job_id: str, at: float, data: Any) -> None:
        job = self.jobs.get(job_id)
        if job is None or job.state in (RunState.FINISHED, RunState.CANCELLED):
            return
        self._end(job, RunState.CANCELLED, at)

    def observe(self, job: _SimJob) -> ObservedJob:
        done = job.service_at(self.time) - job.starts * job.overhead
        return ObservedJob(
            id=job.id,
            state=job.state,
            placement=dict(job.placement),
            run_since=job.run_since,
            ended_at=job.ended_at,
            work_done=min(max(done, 0.0), job.work),
            starts=job.starts,
            spec=None if self.spec_of is None else StoredSpec(self.spec_of, job.id),
        )


class SimBackend:
    """The Backend protocol over a :class:`SimWorld` persisted in SQLite (``path``).

    ``trace_jobs`` (in submission order) enter through ``arrivals`` once the clock passes their
    submission time."""

    name = "sim"
    even_gangs = False
    whole_pods = False

    def __init__(
        self,
        path: Path,
        nodes: Sequence[tuple[str, int]],
        *,
        speed: float = 1.0,
        origin: float = 0.0,
        trace_jobs: Sequence[Job] = (),
    ):
        self.path = Path(path)
        # Commands are written under the service's backend lock, a spec is read when the service
        # rebuilds a job (under its request lock): one connection, used by one thread at a time.
        self._db_lock = threading.Lock()
        self.nodes_ = tuple(NodeInfo(name, tuple(range(gpus))) for name, gpus in nodes)
        try:
            self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.executescript(_SCHEMA)
            self._anchor(speed, origin)
            self.world = self._world_from_file(nodes)
        except sqlite3.Error as exc:
            raise InputError(self.path, f"cannot open the sim world: {exc}") from None
        self.trace = tuple(trace_jobs)
        self._next_trace = 0
        self._settled = 0
        self._together = 0  # open ``together`` blocks; commands wait for the outermost's commit

    def _world_from_file(self, nodes: Sequence[tuple[str, int]]) -> SimWorld:
        """The world the persisted commands make, now, as a new service instance sees it: it
        has been shown nothing yet, so every ended job is news to it."""
        world = SimWorld(nodes, self._spec)
        for kind, job_id, at, data in self.db.execute(
            "SELECT kind, job, at, data FROM command ORDER BY seq"
        ):
            world.apply(kind, job_id, at, json.loads(data) if data else None)
        world.advance(self.now())
        world.reported = {
            j.id for j in world.jobs.values() if j.state not in (RunState.PENDING, RunState.RUNNING)
        }
        return world

    def _anchor(self, speed: float, origin: float) -> None:
        """Keep the persisted clock; a new ``speed`` re-anchors it at the current instant."""
        row = self.db.execute("SELECT origin, wall0, speed FROM anchor").fetchone()
        wall = time.time()
        if row is None:
            self.origin, self.wall0, self.speed = origin, wall, speed
        else:
            self.origin, self.wall0, self.speed = row
            if speed != self.speed:
                self.origin, self.wall0, self.speed = self.now(), wall, speed
        self.db.execute(
            "INSERT OR REPLACE INTO anchor VALUES (0, ?, ?, ?)",
            (self.origin, self.wall0, self.speed),
        )

    # -- the Backend protocol --------------------------------------------------------------------
    def now(self) -> float:
        return self.origin + (time.time() - self.wall0) * self.speed

    def wall_seconds_until(self, t: float) -> float:
        return max(t - self.now(), 0.0) / self.speed

    def nodes(self) -> Sequence[NodeInfo]:
        return self.nodes_

    def jobs(self) -> Sequence[ObservedJob]:
        self.world.advance(self.now())
        world = self.world
        out = [
            world.observe(job)
            for job in world.jobs.values()
            if job.state in (RunState.PENDING, RunState.RUNNING) or job.id in world.reported
        ]
        world.reported.clear()
        world.changed.clear()
        return out

    def jobs_changed(self) -> Sequence[ObservedJob]:
        self.world.advance(self.now())
        world = self.world
        out = [world.observe(world.jobs[i]) for i in world.changed]
        world.reported.clear()
        world.changed.clear()
        return out

    def arrivals(self) -> Sequence[Mapping[str, Any]]:
        now = self.now()
        while self._next_trace < len(self.trace) and self.trace[self._next_trace].submit <= now:
            self._next_trace += 1
        while self._settled < self._next_trace and self.trace[self._settled].id in self.world.jobs:
            self._settled += 1  # accepted or refused: never offered again
        return [
            trace_fields(job)
            for job in self.trace[self._settled : self._next_trace]
            if job.id not in self.world.jobs
        ]

    def refuse(self, job: Job, spec: Mapping[str, Any]) -> tuple[str, str] | None:
        if spec.get("duration_seconds") or job.duration:
            return None
        return (
            "duration_seconds",
            "required by the sim backend for a job without estimate_seconds: the true work it "
            "simulates",
        )

    def submit(self, job: Job, spec: Mapping[str, Any] | None = None) -> None:
        """``spec`` (the submitted fields) is kept for a service that lost its database; the true
        work is its ``duration_seconds``, else the job's ``duration``."""
        if job.id in self.world.jobs:
            return  # idempotent: a service that crashed after submitting submits again
        # kept as given, not copied: the service never changes a job's fields after it is
        # accepted, and the world holds them for every job ever submitted
        spec = spec or {"id": job.id, "gpus": job.gpus, "tenant": job.tenant}
        work = spec.get("duration_seconds") or job.duration
        if work is None:
            raise BackendUnavailable(f"sim: job {job.id} has no duration to simulate")
        self._command("submit", job.id, {"spec": spec, "work": float(work)})

    def start(self, job_id: str, placement: Mapping[str, tuple[int, ...]]) -> None:
        job = self.world.jobs.get(job_id)
        if (
            job is not None
            and job.state is RunState.RUNNING
            and job.placement == {n: tuple(g) for n, g in placement.items()}
        ):
            return
        self._command("start", job_id, {n: list(g) for n, g in placement.items()})

    def preempt(self, job_id: str) -> None:
        self._command("preempt", job_id, None)

    def cancel(self, job_id: str) -> None:
        if job_id not in self.world.jobs:
            job = next((j for j in self.trace if j.id == job_id), None)
            if job is None:
                return
            self.submit(job, trace_fields(job))
        self._command("cancel", job_id, None)

    def next_event(self) -> float | None:
        times = [
            t
            for t in (
                self.world.next_end(),
                self.trace[self._next_trace].submit if self._next_trace < len(self.trace) else None,
            )
            if t is not None
        ]
        return min(times, default=None)

    def close(self) -> None:
        self.db.close()

    # -- internals --------------------------------------------------------------------------------
    @contextlib.contextmanager
    def together(self) -> Iterator[None]:
        """Optional hook (``Service.batch``): the commands issued inside, by any thread, are
        written in one transaction, committed when the outermost block ends, however it ends.

        Why: an autocommitted insert per command was ~5% of the server's samples under churn
        (issue 27, session 14): a batch of requests sends up to 32 cancellations or
        submissions. The service ends the block before it commits (or answers) what it did
        with them, so the order of the two files after a kill is as it was with a commit per
        command. A command takes effect in the world before the commit; if the commit fails,
        what it held is rolled back and the world folded again from the file (it shows what
        a restart would), and ``BackendUnavailable`` says so: the service rebuilds its view."""
        with self._db_lock:
            self._together += 1
        try:
            yield
        finally:
            with self._db_lock:
                self._together -= 1
                if self._together == 0 and self.db.in_transaction:
                    self._commit()

    def checkpoints(self) -> Checkpoints:
        """Optional hook (``chronus serve``): the world's file checkpointed by the caller rather
        than by the commands' commits, which run in the requests' batches (``wal.py``)."""
        with self._db_lock:
            return Checkpoints(self.db, self.path)

    def _commit(self) -> None:
        try:
            self.db.execute("COMMIT")
        except sqlite3.Error as exc:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            world = self._world_from_file(tuple(self.world.node_gpus.items()))
            world.changed = set(world.jobs)
            self.world = world
            raise BackendUnavailable(f"sim: cannot commit the commands: {exc}") from None

    def _command(self, kind: str, job_id: str, data: Any) -> None:
        """Check, persist, then apply: a command is in the file (or in the open ``together``
        transaction) before it takes effect, so a restart folds exactly what happened."""
        at = self.now()
        with self._db_lock:
            world = self.world
            world.advance(at)
            world.check(kind, job_id, data)
            try:
                if self._together and not self.db.in_transaction:
                    # begun at the block's first command: a block without any costs nothing
                    self.db.execute("BEGIN")
                # orjson's text (``json_codec``): the standard library's encoder of a submitted
                # job's fields was 0.4-1.8% of the server's GIL samples under churn (issue 27,
                # session 18)
                self.db.execute(
                    "INSERT INTO command (kind, job, at, data) VALUES (?, ?, ?, ?)",
                    (kind, job_id, at, None if data is None else encode_text(data)),
                )
            except sqlite3.Error as exc:  # its cause is kept: a full disk is the service's too
                raise BackendUnavailable(f"sim: cannot record {kind} of {job_id}: {exc}") from exc
            world.apply(kind, job_id, at, data)

    def _spec(self, job_id: str) -> dict[str, Any]:
        """The fields ``job_id`` was submitted with, from its submit command."""
        with self._db_lock:
            (data,) = self.db.execute(
                "SELECT data FROM command WHERE job=? AND kind='submit' ORDER BY seq LIMIT 1",
                (job_id,),
            ).fetchone()
        return json.loads(data)["spec"]

    def commands(self) -> list[tuple[str, str, float, Any]]:
        """Every command so far, in order (tests check the world's history against it)."""
        return [
            (k, j, at, json.loads(d) if d else None)
            for k, j, at, d in self.db.execute(
                "SELECT kind, job, at, data FROM command ORDER BY seq"
            )
        ]


def trace_fields(job: Job) -> dict[str, Any]:
    """A trace job as the fields of ``POST /v1/jobs``, with its submission time and true work."""
    return {
        "id": job.id,
        "gpus": job.gpus,
        "tenant": job.tenant,
        "submit": job.submit,
        "estimate_seconds": job.duration,
        "duration_seconds": job.duration,
        "deadlines": [{"at": d.at, "value": d.value} for d in job.deadlines],
        **({"iterations": job.iterations} if job.iterations else {}),
        **({"model": job.model} if job.model else {}),
    }


# -- the registry's entry points ------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("sim backend (--backend sim)")
    group.add_argument("--nodes", type=int, default=None, help="simulated nodes (default 120)")
    group.add_argument("--gpus-per-node", type=int, default=None, help="GPUs per node (default 8)")
    group.add_argument(
        "--speed", type=float, default=None, help="simulated seconds per wall second (default 1)"
    )
    group.add_argument(
        "--trace",
        default=None,
        help="also feed this trace's jobs (bundled name or CSV) at their times",
    )
    group.add_argument(
        "--sim-state",
        type=Path,
        default=None,
        help="the simulated cluster's own SQLite file (default: next to --db, named <db>.sim)",
    )


def from_args(
    args: argparse.Namespace, *, db_path: Path, nodes: Sequence[tuple[str, int]] | None = None
) -> SimBackend:
    """A sim backend from the serve options; ``nodes`` (from a HiveD config) overrides
    ``--nodes``/``--gpus-per-node``."""
    speed, nodes, trace_jobs = _options(args, nodes)
    path = args.sim_state or Path(f"{db_path}.sim")
    return SimBackend(path, nodes, speed=speed, trace_jobs=trace_jobs)


def check(
    args: argparse.Namespace, *, nodes: Sequence[tuple[str, int]] | None = None
) -> dict[str, Any]:
    """What ``chronus serve --check`` reports for the sim: its flags checked as ``serve``
    checks them (``--speed 0``, ``--nodes 0`` or a ``--trace`` that cannot be read were
    'config OK' and then refused at start), its cluster and trace, and nothing written."""
    speed, nodes, trace_jobs = _options(args, nodes)
    return {
        "nodes": len(nodes),
        "gpus": sum(gpus for _, gpus in nodes),
        "speed": speed,
        "trace_jobs": len(trace_jobs),
    }


def _options(
    args: argparse.Namespace, nodes: Sequence[tuple[str, int]] | None
) -> tuple[float, Sequence[tuple[str, int]], Sequence[Job]]:
    """The speed, nodes and trace jobs the serve options give (one line for a bad one)."""
    from chronus_py.jobs.model import Cluster

    speed = 1.0 if args.speed is None else args.speed
    if not math.isfinite(speed) or speed <= 0:
        raise InputError("--speed", f"must be a positive number, got {speed}")
    if nodes is None:
        count = 120 if args.nodes is None else args.nodes
        per_node = 8 if args.gpus_per_node is None else args.gpus_per_node
        if count <= 0 or per_node <= 0:
            raise InputError("--nodes/--gpus-per-node", "must be positive")
        nodes = [(n.name, n.gpus) for n in Cluster.uniform(count, per_node).nodes]
    trace_jobs: Sequence[Job] = ()
    if args.trace:
        from chronus_py.readers import read_trace

        trace_jobs = read_trace(args.trace).jobs
    return speed, nodes, trace_jobs
