"""The scheduling round, in one place: every entry point runs these steps in this order.

    scheduler = build_scheduler(state)     # the jobs on their GPUs, with progress and guarantees
    plan = run_round(scheduler, now)       # select -> place -> host configs -> decisions

1. **select** (:meth:`Scheduler.select`): the policy sees the jobs that arrived; Chronus admits
   SLO jobs against its lease plan (the MILP in ``solvers``), re-plans at a lease boundary and
   re-orders whoever changed.
2. **place** (:meth:`Scheduler.place`): the order is walked against the allocator from
   ``placement``; jobs that fit start, running jobs that fell out of the fitting set are preempted.
3. **host configs** (:func:`host_configs`): an ``scx_layered`` config for every host that runs an
   opted-in job, protecting its latency-critical threads.
4. **decisions** (:func:`assemble`): per job start / continue / preempt / wait, with placement,
   guarantee, deadline and reason, plus the lease plan: the :class:`~chronus_py.plan.Plan`.

``chronus plan`` runs all four once from a state file, the service once per wake-up, and replay
runs the first two (:func:`advance`) at every event of a trace: it acts on the moves directly and
needs no decisions.

The round asks the policy only through its interface (``chronus_py/policies/base.py``), never
its class: a waiting job that may run at several sizes gets the one ``Policy.size`` picks
(:func:`choose_size`), and the guarantees, refusals and re-plans the service needs are hooks
too. :func:`new_scheduler` and :func:`restore` are the service's as well as ``chronus plan``'s.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Callable, Collection, Mapping

from chronus_py.errors import ArgumentError, InputError
from chronus_py.estimates import Estimator, Fixed
from chronus_py.estimates.in_place import MEASURE_WINDOW
from chronus_py.estimates.report import describe
from chronus_py.jobs.checks import check_job, number
from chronus_py.jobs.model import Cluster, DeadlineOption, Job, shown_seconds
from chronus_py.jobs.overhead import restart_overhead
from chronus_py.jobs.state import JobState, Status
from chronus_py.layers import (
    HostLayers,
    HostTopology,
    LayerSpec,
    emit_host_layers,
    resolve_thread_names,
)
from chronus_py.plan import Action, JobDecision, Plan
from chronus_py.policies import make_policy
from chronus_py.policies.base import Policy, Sizes
from chronus_py.scheduler import Moves, Scheduler
from chronus_py.state_file import JobEntry, State
from placement import CellAllocator, ConsolidatedAllocator
from placement.loading import show


def new_scheduler(
    cluster: Cluster,
    policy: Policy,
    *,
    allocator=None,
    estimator: Estimator | None = None,
    even_gangs: bool = False,
    whole_pods: bool = False,
    start_latency: Callable[[], float] | None = None,
) -> Scheduler:
    """An empty scheduler for rounds: the one place ``chronus plan`` and the service make one.
    ``start_latency`` is the cluster manager's measured time from a start decision to the job's
    work beginning: every start the plan charges then costs it on top of the restart overhead,
    so a guarantee includes it. ``even_gangs`` and ``whole_pods`` as the cluster manager needs (see
    :class:`~chronus_py.scheduler.Scheduler`)."""
    overhead = restart_overhead
    if start_latency is not None:

        def overhead(gpus: int) -> float:
            return restart_overhead(gpus) + start_latency()

    return Scheduler(
        cluster,
        policy,
        allocator=allocator,
        estimator=estimator,
        even_gangs=even_gangs,
        whole_pods=whole_pods,
        overhead=overhead,
    )


def build_scheduler(state: State) -> Scheduler:
    """A :class:`Scheduler` holding the state's jobs: running ones on their GPUs, with their
    progress and guarantees. The allocator's objections (e.g. a GPU outside the job's virtual
    cluster) come back as InputError naming the job's placement key."""
    policy = make_policy(state.policy, state.policy_options, source=state.source)
    allocator = None if state.hived is None else CellAllocator(state.hived)
    estimator = Fixed(
        {
            entry.job.id: MEASURE_WINDOW if entry.estimate is None else entry.estimate
            for entry in state.jobs
        },
        bands={entry.job.id: entry.band for entry in state.jobs if entry.band},
    )
    scheduler = new_scheduler(state.cluster, policy, allocator=allocator, estimator=estimator)
    waiting_elastic = [e for e in state.jobs if e.elastic and e.placement is None]
    for entry in state.jobs:
        if entry not in waiting_elastic:
            _restore_entry(scheduler, state, entry, entry.job)
    if waiting_elastic:
        # Sized one by one against what the others leave (their admission first), by the
        # policy: with a lease plan, its smallest size the plan can still guarantee.
        scheduler.select(state.now)
        for entry in waiting_elastic:
            size = choose_size(scheduler, entry.job, state.now, done=entry.work_done)
            estimator.seconds[entry.job.id] = entry.job.seconds(size)
            _restore_entry(scheduler, state, entry, replace(entry.job, gpus=size))
    return scheduler


def _restore_entry(scheduler: Scheduler, state: State, entry: JobEntry, job: Job) -> None:
    try:
        restore(
            scheduler,
            job,
            state.now,
            work_done=job.seconds(job.gpus, entry.work_done),
            guaranteed=entry.guaranteed,
            placement=entry.placement,
            known=entry.estimate is not None,
        )
    except ValueError as exc:
        why = exc.why if isinstance(exc, InputError) else str(exc)
        raise InputError(state.source, why, field=f"{entry.key}.placement") from None


def restore(
    scheduler: Scheduler,
    job: Job,
    now: float,
    *,
    work_done: float = 0.0,
    guaranteed: DeadlineOption | None = None,
    placement: Mapping[str, tuple[int, ...]] | None = None,
    known: bool = True,
    starts: int = 0,
) -> JobState:
    """Load a job a cluster manager tracks (a state file's, or the service's after a restart or
    a resync): running on ``placement`` or pending, ``work_done`` seconds of its work behind
    it, its guarantee, whether its runtime is ``known`` yet, and its run count when the cluster
    manager keeps one (``starts``: each run after the first has paid a restart). The allocator's
    objection to ``placement`` is a ValueError, nothing loaded."""
    state = scheduler.restore(
        job, now, work_done=work_done, guaranteed=guaranteed, placement=placement
    )
    state.known = known
    if placement is not None and starts > 1:
        state.service += (starts - 1) * state.overhead
        state.starts = starts
    state.preemptions = max(starts - 1, 0)
    return state


def sizes(scheduler: Scheduler, job: Job, done: float = 0.0) -> Sizes:
    """A job's record at each of its sizes, as the scheduler would hold it there (in seconds at
    that size), with ``done`` of its work (in its unit) behind it."""
    return Sizes(
        job,
        {
            n: JobState(
                job=replace(job, gpus=n),
                seq=-1,
                estimate=job.seconds(n),
                overhead=scheduler.overhead(n),
                service=job.seconds(n, done),
            )
            for n in job.sizes
        },
    )


def choose_size(scheduler: Scheduler, job: Job, now: float, *, done: float = 0.0) -> int:
    """The size a waiting job gets this round: the policy's choice (``Policy.size``) among its
    sizes, against the plan as the last ``select`` left it. A job no size of which fits the
    cluster, or with a bad field or throughput curve, is an ArgumentError naming it."""
    job = check_job(job, "choose_size")
    done = number(done, f"job {show(job.id)}", "done")
    if job.min_size > scheduler.total_gpus:
        raise ArgumentError(
            f"job {show(job.id)}",
            f"its smallest size, {job.min_size}, is more than the cluster's "
            f"{scheduler.total_gpus} GPUs",
            field="sizes",
        )
    return scheduler.policy.size(sizes(scheduler, job, done), scheduler.view(now))


def advance(scheduler: Scheduler, now: float) -> Moves:
    """Steps 1 and 2: select, then place. What replay runs at every event."""
    scheduler.select(now)
    return scheduler.place(now)


def run_round(
    scheduler: Scheduler,
    now: float,
    *,
    hosts: Mapping[str, HostTopology] | None = None,
    layers: Mapping[str, LayerSpec] | None = None,
) -> Plan:
    """The whole round: select, place, host configs (for nodes in ``hosts``, with each job's
    ``layers`` wishes, default ones for jobs not listed), and the decisions.

    Time goes forward: a ``now`` that is no finite number, or is before the last round's, the
    latest report to the scheduler (a finish, progress, a restore) or a held job's submit time,
    is an ArgumentError, as are ``hosts`` and ``layers`` that are not what they say; all are
    raised before the round changes anything."""
    now = _round_time(scheduler, now)
    if hosts or layers:
        _check_layer_inputs(scheduler, hosts or {}, layers or {})
    if getattr(scheduler, "in_round", False):
        raise ArgumentError(
            "run_round",
            "another round of this scheduler is running (from another thread?): a Scheduler "
            "takes one call at a time",
        )
    started = time.perf_counter()
    scheduler.in_round = True
    try:
        moves = advance(scheduler, now)
        scheduler.last_round = now
        host_layers = host_configs(scheduler, hosts or {}, layers or {})
        return assemble(
            scheduler,
            moves,
            host_layers=host_layers,
            timings={"round_s": time.perf_counter() - started},
        )
    finally:
        scheduler.in_round = False


def _round_time(scheduler: Scheduler, now: float) -> float:
    """``now`` for a round: a finite number, no earlier than the last round's or the latest
    report (time does not go back; a plan for a past instant would start jobs on GPUs since
    given away) nor than a job's submission (a job submitted ahead of time would start before
    it arrives)."""
    if not isinstance(scheduler, Scheduler):
        raise ArgumentError(
            "run_round", f"expected a Scheduler, got {show(scheduler)}", field="scheduler"
        )
    now = number(now, "run_round", "now", minimum=None)
    last = getattr(scheduler, "last_round", None)
    if last is not None and now < last:
        raise ArgumentError(
            "run_round",
            f"{shown_seconds(now)} is before the last round's now ({shown_seconds(last)})",
            field="now",
        )
    at, what, job_id = getattr(scheduler, "latest_report", (-math.inf, "", ""))
    if now < at:
        raise ArgumentError(
            "run_round",
            f"{shown_seconds(now)} is before job {show(job_id)} was {what} "
            f"(at {shown_seconds(at)}): time does not go back",
            field="now",
        )
    latest = getattr(scheduler, "latest_submit", -math.inf)
    if now < latest:
        early = next(s.id for s in scheduler.jobs.values() if s.job.submit == latest)
        raise ArgumentError(
            "run_round",
            f"{shown_seconds(now)} is before job {show(early)}'s submit time "
            f"({shown_seconds(latest)}): submit a job when it arrives",
            field="now",
        )
    return now


def _check_layer_inputs(
    scheduler: Scheduler, hosts: Mapping[str, HostTopology], layers: Mapping[str, LayerSpec]
) -> None:
    """``run_round``'s ``hosts`` and ``layers``, checked before the round changes anything: a
    mistake found while emitting a host's config would come after jobs were started and
    stopped, with no plan to say so. Every host is a node of the cluster, modelled with all of
    the node's GPUs; every wish a LayerSpec with a known preset and thread names."""
    for name, value, kind in (("hosts", hosts, "node"), ("layers", layers, "job id")):
        if not isinstance(value, Mapping):
            raise ArgumentError(
                "run_round", f"expected a mapping of {kind} -> ..., got {show(value)}", field=name
            )
    node_gpus = {n.name: n.gpus for n in scheduler.cluster.nodes}
    for node, host in hosts.items():
        where = f"hosts[{node!r}]"
        if node not in node_gpus:
            raise ArgumentError("run_round", f"{show(node)} is no node of the cluster", field=where)
        if not isinstance(host, HostTopology):
            raise ArgumentError(
                "run_round",
                f"expected a HostTopology (HostTopology.from_yaml(PATH)), got {show(host)}",
                field=where,
            )
        have = {gpu.index for gpu in host.gpus}
        missing = [i for i in range(node_gpus[node]) if i not in have]
        if missing and isinstance(scheduler.allocator, ConsolidatedAllocator):  # GPUs 0..n-1
            raise ArgumentError(
                "run_round",
                f"host {host.name} models no GPU {missing[0]}, and the node has "
                f"{node_gpus[node]} GPUs",
                field=where,
            )
    plain: set[str] = set()  # presets met without overrides, resolved once (a state file
    # gives every job a spec, most of them alike: 6,480 resolutions were 10% of a plan's round)
    for job_id, spec in layers.items():
        where = f"layers[{job_id!r}]"
        if not isinstance(spec, LayerSpec):
            raise ArgumentError("run_round", f"expected a LayerSpec, got {show(spec)}", field=where)
        alike = not spec.thread_names and isinstance(spec.preset, str)
        if alike and spec.preset in plain:
            continue
        try:
            resolve_thread_names(spec.preset, spec.thread_names)
        except (TypeError, ValueError, AttributeError) as exc:
            raise ArgumentError("run_round", str(exc), field=where) from None
        if alike:
            plain.add(spec.preset)


def host_configs(
    scheduler: Scheduler, hosts: Mapping[str, HostTopology], layers: Mapping[str, LayerSpec]
) -> dict[str, HostLayers]:
    """Step 3: node -> its scx_layered config, for every node with a host model and at least one
    opted-in job running there after the round. Others get nothing: they keep their default CPU
    scheduler, so a fleet can opt in host by host and job by job."""
    if not hosts:
        return {}
    default = LayerSpec()
    per_node: dict[str, list] = {}
    for job_id, state in scheduler.running.items():
        spec = layers.get(job_id, default)
        for node, gpus in state.placement.items():
            if node in hosts:
                per_node.setdefault(node, []).append(spec.on(job_id, tuple(gpus)))
    out = {}
    for node in sorted(per_node):
        emitted = emit_host_layers(hosts[node], per_node[node])
        if emitted is not None:
            out[node] = emitted
    return out


def decide(scheduler: Scheduler, moves: Moves) -> tuple[JobDecision, ...]:
    """Every active job's decision after ``moves`` (preempted jobs are pending again, so they are
    among them), by submission order, each with its estimate state (what is known of its runtime
    and what is promised: ``chronus_py.estimates.report``). Reads the scheduler; changes
    nothing."""
    started = {s.id for s in moves.started}
    preempted = {s.id for s in moves.preempted}
    free = scheduler.allocator.free_gpus()
    out = []
    for state in sorted(scheduler.active.values(), key=lambda s: s.seq):
        if state.status is Status.RUNNING:
            action = Action.START if state.id in started else Action.CONTINUE
        else:
            action = Action.PREEMPT if state.id in preempted else Action.WAIT
        out.append(
            JobDecision(
                job_id=state.id,
                action=action,
                gpus=state.job.gpus,
                placement=dict(state.placement) if state.status is Status.RUNNING else {},
                guaranteed=state.guaranteed is not None,
                deadline=_deadline(state),
                reason=reason(scheduler, state, action, free),
                estimate=describe(state, moves.now, MEASURE_WINDOW),
            )
        )
    return tuple(out)


def _deadline(state: JobState) -> float | None:
    if state.guaranteed is not None:
        return state.guaranteed.at
    return state.job.deadlines[0].at if state.job.deadlines else None


def reason(scheduler: Scheduler, state: JobState, action: Action, free: int) -> str:
    """Why ``state`` gets ``action``: its standing in the policy's order, and the GPUs."""
    vcs = virtual_clusters(scheduler) if action is Action.WAIT else None
    if vcs is not None and state.job.tenant not in vcs:
        where = (
            f"its tenant {state.job.tenant!r} is no virtual cluster of the cell allocator (have: "
            f"{', '.join(sorted(vcs))}), so it can never be placed"
        )
    elif action is Action.WAIT:
        where = (
            f"needs {state.gpus} GPUs, {free} free after this round"
            if state.gpus > free
            else f"{free} GPUs free, but no placement holds its gang (e.g. its tenant's cells are "
            f"full)"
        )
    elif action is Action.PREEMPT:
        where = f"its GPUs go to jobs ahead in {scheduler.policy.name} order"
    else:
        where = f"fits, in {scheduler.policy.name} order"
    standing = (
        scheduler.policy.standing(state.id)
        if state.known
        else f"runtime unknown: ranked by a {MEASURE_WINDOW:g} s probe while measured in place, "
        "admission decided on its first estimate"
    )
    return f"{standing}; {where}" if standing else where


def virtual_clusters(scheduler: Scheduler) -> Collection[str] | None:
    """The virtual clusters of a cell allocator (HiveD), None for an allocator without them."""
    return getattr(getattr(scheduler.allocator, "config", None), "virtual_clusters", None)


def _next_decision(wakeup: float | None, decisions: tuple[JobDecision, ...]) -> float | None:
    """The scheduler's own next wake-up, or earlier when a job being measured will have its
    first estimate: its admission is decided then, so the manager should ask again."""
    times = [d.estimate.answer_by for d in decisions if d.estimate and d.estimate.answer_by]
    if wakeup is not None:
        times.append(wakeup)
    return min(times, default=None)


def assemble(
    scheduler: Scheduler,
    moves: Moves,
    *,
    host_layers: Mapping[str, HostLayers] | None = None,
    timings: Mapping[str, float] | None = None,
) -> Plan:
    """Step 4: the :class:`Plan` of a round: decisions, plus the lease plan and solver statistics
    when the policy keeps a lease plan."""
    report = scheduler.policy.lease_report()
    timings = dict(timings or {})
    lease_plan: dict[str, tuple[float, ...]] = {}
    if report is not None:
        order = sorted(report.lease_plan, key=lambda j: scheduler.jobs[j].seq)
        lease_plan = {j: report.lease_plan[j] for j in order}
        timings = {"solve_s": report.solve_seconds, **timings}
    decisions = decide(scheduler, moves)
    return Plan(
        now=moves.now,
        policy=scheduler.policy.name,
        lease_end=None if report is None else report.lease_end,
        next_decision=_next_decision(scheduler.next_wakeup(moves.now), decisions),
        decisions=decisions,
        lease_plan=lease_plan,
        solver=None if report is None else dict(report.solver),
        timings=timings,
        host_layers=dict(host_layers or {}),
    )
