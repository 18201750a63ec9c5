"""The library's argument checks, at its boundary: what a cluster manager hands the
:class:`~chronus_py.scheduler.Scheduler` and :func:`~chronus_py.round.run_round` directly, in
Python, without a state file or a request whose reader would have checked it.

A bad argument is one :class:`ArgumentError` naming the argument (or the job's field) and what
is wrong with its value, raised before anything is changed, never a TypeError or KeyError from
deep inside a round, nor a schedule silently built on a NaN. A job id the scheduler does not
hold (never submitted, or already finished) is a :class:`JobIdError`. Both are
:class:`~chronus_py.errors.InputError` s, and also the built-in errors the same calls raised
before (ValueError, KeyError), so a caller's ``except`` keeps working.

The checks run once per call (a submission, a report, a round), never inside a round's per-job
loops; a valid argument passes in a few type tests.
"""

from __future__ import annotations

import math
import operator
from dataclasses import replace
from numbers import Integral, Real
from typing import Any

from chronus_py.errors import ArgumentError
from chronus_py.jobs.model import Cluster, DeadlineOption, Job, JobKind, Node
from placement.limits import MAX_GPUS, MAX_SECONDS
from placement.loading import show


def number(value: Any, source: str, field: str, *, minimum: float | None = 0.0) -> float:
    """``value`` as a float: a finite real number (int, float, numpy scalar; not a bool, str,
    Decimal or None) no less than ``minimum`` (None: any) and at most ``MAX_SECONDS``."""
    if type(value) is not float:
        if isinstance(value, bool) or not isinstance(value, Real):
            raise ArgumentError(source, f"expected a number, got {show(value)}", field=field)
        value = float(value)
    if not math.isfinite(value):
        raise ArgumentError(source, f"expected a finite number, got {value!r}", field=field)
    if minimum is not None and value < minimum:
        raise ArgumentError(source, f"must be >= {minimum:g}, got {value!r}", field=field)
    if abs(value) > MAX_SECONDS:
        raise ArgumentError(
            source, f"must be <= {MAX_SECONDS:g} in size, got {value!r}", field=field
        )
    return value


def integer(value: Any, source: str, field: str, *, minimum: int = 1) -> int:
    """``value`` as an int: an integer (int or numpy integer; not a bool or a float) in
    ``minimum``..``MAX_GPUS``."""
    if type(value) is not int:
        if isinstance(value, bool) or not isinstance(value, Integral):
            raise ArgumentError(source, f"expected an integer, got {show(value)}", field=field)
        value = operator.index(value)
    if value < minimum:
        raise ArgumentError(source, f"must be >= {minimum}, got {value}", field=field)
    if value > MAX_GPUS:
        raise ArgumentError(source, f"must be <= {MAX_GPUS:,}, got {value}", field=field)
    return value


def text(value: Any, source: str, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise ArgumentError(source, f"expected a non-empty string, got {show(value)}", field=field)
    return value


def job_id(value: Any, source: str) -> str:
    """A job id argument: a non-empty string."""
    return text(value, source, "job_id")


def check_job(job: Any, source: str = "Scheduler.submit") -> Job:
    """``job`` as the scheduler may hold it, or an ArgumentError naming the job and its field.

    Numbers of another numeric type (numpy scalars) and a kind given as its string are taken as
    the int, float and :class:`JobKind` they stand for: the job returned is then a copy holding
    those (equal to ``job``); otherwise it is ``job`` itself."""
    if _plainly_valid(job):
        return job
    if not isinstance(job, Job):
        raise ArgumentError(source, f"expected a Job, got {show(job)}", field="job")
    where = f"job {show(job.id)}"
    text(job.id, where, "id")
    text(job.tenant, where, "tenant")
    fixed: dict[str, Any] = {}
    gpus = integer(job.gpus, where, "gpus")
    if gpus is not job.gpus:
        fixed["gpus"] = gpus
    submit = number(job.submit, where, "submit", minimum=None)
    if submit is not job.submit:
        fixed["submit"] = submit
    kind = job.kind
    if type(kind) is not JobKind:
        try:
            kind = fixed["kind"] = JobKind(kind)
        except ValueError:
            have = ", ".join(str(k) for k in JobKind)
            raise ArgumentError(
                where, f"expected a JobKind ({have}), got {show(job.kind)}", field="kind"
            ) from None
    deadlines = _deadlines(job, where, submit)
    if deadlines is not job.deadlines:
        fixed["deadlines"] = deadlines
    if kind is JobKind.BEST_EFFORT and deadlines:
        raise ArgumentError(where, "a best-effort job has no deadlines", field="deadlines")
    if kind is not JobKind.BEST_EFFORT and not deadlines:
        raise ArgumentError(
            where, f"a {kind} job needs at least one deadline (tightest first)", field="deadlines"
        )
    for name in ("duration", "iterations"):
        value = getattr(job, name)
        if value is not None:
            checked = number(value, where, name)
            if checked is not value:
                fixed[name] = checked
    if job.rates:
        _curve(job, where, gpus)
    if job.pod_gpus is not None:
        _pods(job, where, gpus)
    return replace(job, **fixed) if fixed else job


def _pods(job: Job, where: str, gpus: int) -> None:
    """A job of fixed pods: a whole number of them, of a rigid size (an elastic job's sizes are
    the scheduler's to choose, which fixed pods are not)."""
    size = integer(job.pod_gpus, where, "pod_gpus")
    if job.rates or gpus % size:
        raise ArgumentError(
            where,
            f"pods of {size} GPUs must make up the job's {gpus} (a rigid job)",
            field="pod_gpus",
        )


def _plainly_valid(job: Any) -> bool:
    """The common case at the speed of a few type tests (a replay submits every job of its
    trace): a rigid job of plain ints and floats, in range. False sends it through the checks
    that say what is wrong, or convert what is only of another type."""
    if (
        type(job) is not Job
        or job.rates
        or type(job.id) is not str
        or not job.id
        or type(job.tenant) is not str
        or not job.tenant
        or type(job.gpus) is not int
        or not 0 < job.gpus <= MAX_GPUS
        or type(job.submit) is not float
        or not -MAX_SECONDS <= job.submit <= MAX_SECONDS
        or type(job.deadlines) is not tuple
        or type(job.kind) is not JobKind
        or (job.kind is JobKind.BEST_EFFORT) is bool(job.deadlines)
        or job.pod_gpus is not None
    ):
        return False
    duration, iterations = job.duration, job.iterations
    if duration is not None and (type(duration) is not float or not 0.0 <= duration <= MAX_SECONDS):
        return False
    # a trace's iteration counts are ints (the Chronus traces give every job one)
    if iterations is not None and (
        type(iterations) not in (int, float) or not 0 <= iterations <= MAX_SECONDS
    ):
        return False
    last = job.submit
    for option in job.deadlines:
        if (
            type(option) is not DeadlineOption
            or type(option.at) is not float
            or not last <= option.at <= MAX_SECONDS
            or type(option.value) is not float
            or not 0.0 <= option.value <= MAX_SECONDS
        ):
            return False
        last = option.at
    return True


def _deadlines(job: Job, where: str, submit: float) -> tuple[DeadlineOption, ...]:
    options = job.deadlines
    if not isinstance(options, (tuple, list)):
        raise ArgumentError(
            where, f"expected a tuple of DeadlineOption, got {show(options)}", field="deadlines"
        )
    out, changed = [], not isinstance(options, tuple)
    for i, option in enumerate(options):
        field = f"deadlines[{i}]"
        if not isinstance(option, DeadlineOption):
            raise ArgumentError(
                where, f"expected a DeadlineOption, got {show(option)}", field=field
            )
        at = number(option.at, where, f"{field}.at", minimum=submit)
        value = number(option.value, where, f"{field}.value")
        if out and at < out[-1].at:
            raise ArgumentError(
                where, f"must not be before deadlines[{i - 1}].at (tightest first)", field=field
            )
        if at is not option.at or value is not option.value:
            option, changed = DeadlineOption(at, value), True
        out.append(option)
    return tuple(out) if changed else options


def _curve(job: Job, where: str, gpus: int) -> None:
    """An elastic job's sizes (ascending) and their positive rates; ``gpus`` one of them."""
    sizes = [integer(n, where, f"sizes[{i}]") for i, n in enumerate(job.sizes)]
    if any(b <= a for a, b in zip(sizes, sizes[1:])):
        raise ArgumentError(where, f"must be ascending, got {list(sizes)}", field="sizes")
    for i, rate in enumerate(job.rates):
        if number(rate, where, f"rates[{i}]") == 0:
            raise ArgumentError(where, "must be > 0", field=f"rates[{i}]")
    if gpus not in sizes:
        raise ArgumentError(where, f"{gpus} is not one of its sizes {sizes}", field="gpus")
    if job.iterations is None:
        raise ArgumentError(
            where, "an elastic job (with rates) needs its iterations", field="iterations"
        )


def check_cluster(cluster: Any, source: str = "Scheduler") -> Cluster:
    """A cluster the scheduler can run: at least one node, each a distinct name with an integer
    count of GPUs (0 allowed: a cluster manager may list a node without GPUs). Returns
    ``cluster``, or a copy holding a numpy GPU count as the int it stands for."""
    if not isinstance(cluster, Cluster):
        raise ArgumentError(source, f"expected a Cluster, got {show(cluster)}", field="cluster")
    nodes = cluster.nodes
    if not isinstance(nodes, tuple):
        raise ArgumentError(
            source, f"expected a tuple of Node, got {show(nodes)}", field="cluster.nodes"
        )
    if not nodes:
        raise ArgumentError(source, "has no nodes", field="cluster.nodes")
    seen: set[str] = set()
    fixed = []
    for i, node in enumerate(nodes):
        where = f"cluster.nodes[{i}]"
        if not isinstance(node, Node):
            raise ArgumentError(source, f"expected a Node, got {show(node)}", field=where)
        name = text(node.name, source, f"{where}.name")
        if name in seen:
            raise ArgumentError(source, f"node {show(name)} appears twice", field=f"{where}.name")
        seen.add(name)
        gpus = integer(node.gpus, source, f"{where}.gpus", minimum=0)
        fixed.append(node if gpus is node.gpus else Node(name, gpus))
    if any(a is not b for a, b in zip(fixed, nodes)):
        return Cluster(tuple(fixed))
    return cluster
