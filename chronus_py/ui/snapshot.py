"""What the web view shows, read from a running service in one go (under the service's lock)
and handed to the renderers as plain values, so rendering never touches live state.

It reads the same data the JSON endpoints serve: the scheduler's active jobs (``/v1/jobs``'
estimate, placement and guarantee), the last round's lease plan (``/v1/plan``), the backend's
nodes (``/v1/cluster``) and the database's rows. A job's fixed fields (tenant, spec, admission)
are parsed once and kept, so a poll at 5,000 active jobs reads the database only for the jobs
it has not seen and for the page it shows.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from chronus_py.service import rounds
from chronus_py.service.core import Caller, Service

FRESH = 1.0
"""Seconds a read of the whole service serves every open page."""


@dataclass(frozen=True, slots=True)
class Fixed:
    """A job's fields that never change once accepted."""

    tenant: str
    submit: float
    gpus: int
    first_deadline: float | None
    deadlines: tuple[float, ...]
    decision: str
    reason: str
    elastic: bool


@dataclass(slots=True)
class JobRow:
    """One job as the jobs table and the timeline show it. Times are the backend's seconds;
    ``planned_start``/``planned_finish`` are None when the plan does not say (a pool job that
    waits for capacity, or an ended job)."""

    id: str
    tenant: str
    state: str
    kind: str
    gpus: int
    decision: str
    reason: str
    guaranteed_at: float | None
    first_deadline: float | None
    planned_start: float | None
    planned_finish: float | None
    slack: float | None
    estimate: float | None
    low: float | None
    high: float | None
    phase: str
    preemptions: int
    placement: Mapping[str, tuple[int, ...]]
    leases: tuple[float, ...] = ()
    progress: float | None = None


@dataclass(frozen=True, slots=True)
class NodeView:
    name: str
    gpus: int
    healthy: bool
    reason: str
    busy: Mapping[int, str]
    """GPU index -> the kind of the job on it, or "other" for another tenant's job."""
    owners: Mapping[int, str] = field(default_factory=dict)
    """GPU index -> the tenant of the job on it."""


@dataclass
class Snapshot:
    """Everything one page shows, for one caller."""

    now: float
    backend: str
    caller: Caller
    lease: float | None
    lease_end: float | None
    jobs: list[JobRow]
    nodes: list[NodeView]
    total_gpus: int
    reserved_now: int
    quotas: dict[str, int]
    usage: dict[str, int]
    cells: dict[str, str] = field(default_factory=dict)
    """node -> the tenant whose cell it is in (HiveD pinned cells), for grouping rows."""
    generation: int = 0
    """Which full read this is: a page drawn from one is the same until the next."""
    version: tuple = ()
    """The service's :meth:`Reader.version` when this was read."""


@dataclass
class Reading:
    """What one read under the service's lock copies, as plain values, so that building the
    rows and drawing run without the lock. ``states`` is None when the last full read is still
    fresh (``FRESH``): only the caller's ended jobs were read."""

    now: float
    version: tuple = ()
    states: list[tuple] | None = None
    lease_plan: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    lease: float | None = None
    lease_end: float | None = None
    cluster: dict = field(default_factory=dict)
    quotas: dict[str, int] = field(default_factory=dict)
    cells: dict[str, str] = field(default_factory=dict)
    ended: list[dict[str, Any]] = field(default_factory=list)


class Reader:
    """Reads the service for the pages: :meth:`read` under the lock (copies), :meth:`view`
    without it (rows, per caller). Keeps the parsed fixed fields of every job it has seen, and
    the last full view for ``FRESH`` seconds, so any number of open pages cost at most one copy
    of 5,000 jobs a second under the lock."""

    def __init__(self, service):
        self.service = service
        self._fixed: dict[str, Fixed] = {}
        self._cached: Snapshot | None = None
        self._cached_at = -math.inf
        self.generation = 0

    def fixed(self, job_id: str) -> Fixed:
        got = self._fixed.get(job_id)
        if got is None:
            got = self._fixed[job_id] = _fixed(self.service.db.job(job_id))
        return got

    def _preload(self, ids: list[str]) -> None:
        """Parse the fixed fields of jobs not seen yet, in one query per 500."""
        missing = [i for i in ids if i not in self._fixed]
        conn = self.service.db.conn
        for at in range(0, len(missing), 500):
            chunk = missing[at : at + 500]
            marks = ",".join("?" * len(chunk))
            cur = conn.execute(
                "SELECT id, tenant, submit, spec, first_deadline, admission FROM job"
                f" WHERE id IN ({marks})",
                chunk,
            )
            for row in cur.fetchall():
                self._fixed[row[0]] = _fixed(
                    {
                        "tenant": row[1],
                        "submit": row[2],
                        "spec": json.loads(row[3]),
                        "first_deadline": row[4],
                        "admission": json.loads(row[5]),
                    }
                )

    def version(self) -> tuple:
        """What the pages show changes only when this does (or the clock moves): each of the
        service's writes (a submission, cancellation, start, preemption, end, promise or
        estimate is one or more; an idle round writes nothing), each lease re-plan (it moves
        reserved leases without a write), each rebuild of the scheduler, the unhealthy nodes.
        A few integers and a small set, read without the lock: a poll of an unchanged page is
        answered from them (``routes``), without a read of 5,000 jobs or a drawing."""
        service = self.service
        stats = rounds.solver_stats(service.scheduler)
        return (
            service.db.conn.total_changes,
            None if stats is None else stats.rounds,
            service.counters.resyncs,
            frozenset(service.bad_nodes),
        )

    def read(self, caller: Caller, *, ended: int = 0) -> Reading:
        """Under the lock: a copy of every active job (unless the last is fresh), and the
        caller's ``ended`` most recently ended jobs."""
        service = self.service
        version = self.version()  # before the copy: what is copied is at least this new
        now = service.backend.now()
        rows = self._ended(caller, ended) if ended else []
        if self._cached is not None and time.monotonic() - self._cached_at < FRESH:
            return Reading(now=now, ended=rows)
        scheduler = service.scheduler
        report = rounds.lease_report(scheduler)  # what /v1/plan's lease_plan is made of
        active = rounds.active_jobs(scheduler)
        if len(self._fixed) > 2 * len(active) + 1000:  # ended jobs: read from their own rows
            self._fixed = {s.id: self._fixed[s.id] for s in active if s.id in self._fixed}
        self._preload([s.id for s in active])
        quotas, cells = _hived(scheduler)
        return Reading(
            now=now,
            version=version,
            states=[_copy(s, now) for s in active],
            lease_plan={} if report is None else report.lease_plan,
            lease=_lease_seconds(service),
            lease_end=None if report is None else report.lease_end,
            cluster=service.cluster_view(),
            quotas=quotas,
            cells=cells,
            ended=rows,
        )

    def view(self, reading: Reading, caller: Caller) -> Snapshot:
        """Without the lock: the caller's view of a reading, its active jobs (an admin: every
        job) and ended ones; other tenants' GPUs show as "other", without names."""
        if reading.states is not None:
            self.generation += 1
            full = self._full(reading)
            self._cached = replace(full, generation=self.generation, version=reading.version)
            self._cached_at = time.monotonic()
        full = self._cached
        if caller.admin:
            jobs = list(full.jobs)
            nodes = full.nodes
            usage, quotas = full.usage, full.quotas
        else:
            tenant = caller.tenant
            jobs = [j for j in full.jobs if j.tenant == tenant]
            nodes = [
                replace(
                    n,
                    busy={g: k if n.owners[g] == tenant else "other" for g, k in n.busy.items()},
                )
                for n in full.nodes
            ]
            usage = {tenant: full.usage.get(tenant, 0)}
            quotas = {t: q for t, q in full.quotas.items() if t == tenant}
        jobs += [self._ended_row(r) for r in reading.ended]
        if not caller.admin:  # a tenant names its jobs without the service's tenant scope
            jobs = [replace(j, id=Service.shown(j.id, caller)) for j in jobs]
        return replace(full, caller=caller, jobs=jobs, nodes=nodes, usage=usage, quotas=quotas)

    def forget(self) -> None:
        """The next read copies the service again (after a change made through the view)."""
        self._cached_at = -math.inf

    def _full(self, reading: Reading) -> Snapshot:
        """Every active job and node, as an admin sees them."""
        now, lease, plan = reading.now, reading.lease, reading.lease_plan
        fixed = self._fixed
        jobs = [_row(t, fixed[t[0]], plan.get(t[0], ()), lease, now) for t in reading.states]
        view = reading.cluster
        busy: dict[str, dict[int, str]] = {}
        owners: dict[str, dict[int, str]] = {}
        usage: dict[str, int] = {}
        for job in jobs:
            if job.state != "running":
                continue
            tenant, placement = job.tenant, job.placement
            usage[tenant] = usage.get(tenant, 0) + job.gpus
            kind = job.kind
            for node, indices in placement.items():
                cells = busy.setdefault(node, {})
                owner = owners.setdefault(node, {})
                for g in indices:
                    cells[g] = kind
                    owner[g] = tenant
        nodes = [
            NodeView(
                n["name"],
                n["gpus"],
                n["healthy"],
                n["reason"] or "",
                busy.get(n["name"], {}),
                owners.get(n["name"], {}),
            )
            for n in view["nodes"]
        ]
        reserved = sum(
            j.gpus
            for j in jobs
            if j.state == "pending" and any(t <= now < t + (lease or 0) for t in j.leases)
        )
        return Snapshot(
            now=now,
            backend=view["backend"],
            caller=Caller("admin", admin=True),
            lease=lease,
            lease_end=reading.lease_end,
            jobs=jobs,
            nodes=nodes,
            total_gpus=view["gpus"],
            reserved_now=reserved,
            quotas=reading.quotas,
            usage=usage,
            cells=reading.cells,
        )

    def one(self, job_id: str, caller: Caller) -> JobRow | None:
        """Under the lock: one job's row (None if the caller may not see it)."""
        service = self.service
        state = rounds.active_job(service.scheduler, job_id)
        if state is not None:
            if not caller.sees(service.tenants.get(job_id, "")):
                return None
            report = rounds.lease_report(service.scheduler)
            leases = () if report is None else report.lease_plan.get(job_id, ())
            now = service.backend.now()
            row = _row(_copy(state, now), self.fixed(job_id), leases, _lease_seconds(service), now)
            return self.describe([row])[0]
        row = service.db.job(job_id)
        if row is None or not caller.sees(row["tenant"]):
            return None
        return self._ended_row(row)

    def describe(self, rows: list[JobRow]) -> list[JobRow]:
        """Under the lock: ``rows`` with the estimate band and phase of ``/v1/jobs``."""
        scheduler, now = self.service.scheduler, self.service.backend.now()
        out = []
        for row in rows:
            told = rounds.estimate_state(scheduler, row.id, now)
            if told is not None:
                row = replace(
                    row,
                    estimate=told["seconds"],
                    low=told["low"],
                    high=told["high"],
                    phase=told["phase"],
                )
            out.append(row)
        return out

    def _ended(self, caller: Caller, limit: int) -> list[dict[str, Any]]:
        where = "state IN ('finished', 'cancelled', 'failed')"
        args: list[Any] = []
        if not caller.admin:
            where += " AND tenant=?"
            args.append(caller.tenant)
        cur = self.service.db.conn.execute(
            f"SELECT * FROM job WHERE {where} ORDER BY seq DESC LIMIT {int(limit)}", args
        )
        names = [c[0] for c in cur.description]
        rows = []
        for raw in cur.fetchall():
            row = dict(zip(names, raw))
            for key in ("spec", "admission", "placement"):
                if row.get(key) is not None:
                    row[key] = json.loads(row[key])
            rows.append(row)
        return rows

    def _ended_row(self, row: Mapping[str, Any]) -> JobRow:
        fixed = _fixed(row)
        deadline = (
            row["guaranteed_at"] if row["guaranteed_at"] is not None else fixed.first_deadline
        )
        finish = row["finished_at"]
        return JobRow(
            id=row["id"],
            tenant=row["tenant"],
            state=row["state"],
            kind=_kind(fixed, row["guaranteed_at"] is not None),
            gpus=int(row["spec"].get("gpus") or fixed.gpus),
            decision=fixed.decision,
            reason=fixed.reason,
            guaranteed_at=row["guaranteed_at"],
            first_deadline=fixed.first_deadline,
            planned_start=row["first_start"],
            planned_finish=finish,
            slack=None if deadline is None or finish is None else deadline - finish,
            estimate=row["estimate"],
            low=None,
            high=None,
            phase="ended",
            preemptions=max(int(row["starts"] or 0) - 1, 0),
            placement={n: tuple(g) for n, g in (row["placement"] or {}).items()},
        )


def _copy(state, now: float) -> tuple:
    """What a row needs of a job's live state, copied under the lock."""
    running = rounds.is_running(state)
    guaranteed = state.guaranteed
    return (
        state.id,
        running,
        state.run_since,
        state.remaining(now),
        None if guaranteed is None else guaranteed.at,
        state.estimate,
        state.known,
        state.preemptions,
        state.gpus,
        dict(state.placement) if running else {},
        state.service_at(now),
    )


def _row(
    copied: tuple, fixed: Fixed, leases: tuple[float, ...], lease: float | None, now: float
) -> JobRow:
    """An active job's row (without the estimate band: :meth:`Reader.describe` adds it to the
    rows a page shows). A running job is planned to finish when its remaining work is done; a
    pending one with leases reserved, in its last lease."""
    (
        job_id,
        running,
        since,
        remaining,
        guaranteed,
        estimate,
        known,
        preempted,
        gpus,
        placement,
        service,
    ) = copied
    start = finish = None
    if running:
        start = since if since is not None else now
        finish = now + remaining
    elif leases and lease:
        start = leases[0]
        finish = leases[-1] + min(max(remaining - lease * (len(leases) - 1), 0.0), lease)
    deadline = guaranteed if guaranteed is not None else fixed.first_deadline
    slack = None
    if deadline is not None:
        slack = deadline - (finish if finish is not None else now + remaining)
    return JobRow(
        id=job_id,
        tenant=fixed.tenant,
        state="running" if running else "pending",
        kind=_kind(fixed, guaranteed is not None),
        gpus=gpus,
        decision=fixed.decision,
        reason=fixed.reason,
        guaranteed_at=guaranteed,
        first_deadline=fixed.first_deadline,
        planned_start=start,
        planned_finish=finish,
        slack=slack,
        estimate=estimate if known else None,
        low=None,
        high=None,
        phase="estimated" if known else ("measuring" if running else "unknown"),
        preemptions=preempted,
        placement=placement,
        leases=leases,
        progress=min(service / estimate, 1.0) if estimate else None,
    )


def _fixed(row: Mapping[str, Any]) -> Fixed:
    spec = row["spec"]
    admission = row["admission"]
    deadlines = tuple(float(d["at"]) for d in spec.get("deadlines") or ())
    return Fixed(
        tenant=row["tenant"],
        submit=row["submit"],
        gpus=int(spec.get("gpus") or 0),
        first_deadline=row["first_deadline"],
        deadlines=deadlines,
        decision=str(admission.get("decision", "")),
        reason=str(admission.get("reason", "")),
        elastic=spec.get("elastic") is not None,
    )


def _kind(fixed: Fixed, guaranteed: bool) -> str:
    if fixed.elastic:
        return "elastic"
    if guaranteed:
        return "guaranteed"
    return "pool" if fixed.deadlines else "best_effort"


def _lease_seconds(service) -> float | None:
    """The lease length of the Chronus policy in force (None for policies without leases)."""
    if service.settings.policy != "chronus":
        return None
    from chronus_py.selector import ChronusSettings

    return ChronusSettings.from_mapping(service.settings.options).lease


def _hived(scheduler) -> tuple[dict[str, int], dict[str, str]]:
    """Under a HiveD config: each tenant's promised GPUs (its virtual cells), and the nodes of
    cells pinned to a tenant. Empty otherwise."""
    config = rounds.allocator_config(scheduler)
    if config is None or not hasattr(config, "virtual_clusters"):
        return {}, {}
    quotas = {
        name: sum(c.count * config.leaf_count(c.cell_type) for c in vc.cells)
        for name, vc in config.virtual_clusters.items()
    }
    pinned = {p: name for name, vc in config.virtual_clusters.items() for p in vc.pinned}
    cells: dict[str, str] = {}

    def walk(spec, owner: str | None) -> None:
        owner = pinned.get(spec.pinned, owner) if spec.pinned else owner
        if config.cell_types.get(spec.cell_type) and config.cell_types[spec.cell_type].node_level:
            if owner is not None:
                cells[spec.address] = owner
            return
        for child in spec.children:
            walk(child, owner)

    for top in config.physical_cells:
        walk(top, None)
    for name, vc in config.virtual_clusters.items():
        quotas[name] += sum(
            config.leaf_count(s.cell_type) for s in _pinned_specs(config, vc.pinned)
        )
    return quotas, cells


def _pinned_specs(config, pinned: tuple[str, ...]):
    want = set(pinned)
    stack = list(config.physical_cells)
    while stack:
        spec = stack.pop()
        if spec.pinned in want:
            yield spec
        else:
            stack.extend(spec.children)
