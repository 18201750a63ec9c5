"""A submitted job's fields, checked at the edge: the body of ``POST /v1/jobs``, or a job that
entered through the backend (a trace arrival), both become a :class:`JobSpec` here and nowhere
else. Every problem is a :class:`FieldError` naming the field, which the API answers as a 422.

Fields (the job fields of the state file, ``chronus_py/state_file.py``)::

    id: j1                      # optional: 1-128 of [A-Za-z0-9._:-]; the server picks one if absent
    gpus: 8                     # integer >= 1
    estimate_seconds: 7200      # > 0: the work the scheduler plans with; leave it out when
                                #   nobody knows (iterations then required): the job is measured
                                #   in place from its progress reports (chronus_py/estimates)
    deadlines: [{at: 9000, value: 1}]   # absolute seconds on the backend's clock, in any order
                                #   (kept tightest first; one instant given twice keeps its
                                #   best value); value defaults to 1; none = best-effort,
                                #   several = soft SLO
    duration_seconds: 7000      # sim backend only: the true work (default: the estimate)
    iterations: 40000           # optional: lets POST /v1/jobs/{id}/progress re-estimate
    model: resnet50             # optional, informative
    tenant: team-a              # admin tokens only (a tenant token's own tenant otherwise)
    cgroup: training.slice/j1.scope     # optional: the job's cgroup, for host layer configs
    pod_gpus: 2                 # a backend's records only (Kueue): the GPUs of each of the
                                #   job's fixed pods, which must make up its gpus (Job.pod_gpus)
    elastic: {min_gpus: 1, max_gpus: 16, batch: 256, iterations: 40000}
                                # an elastic job (model required, no gpus, no estimate_seconds):
                                #   admission gives it its smallest size that still meets its
                                #   deadline (chronus_py/jobs/sizing.py); its work is the
                                #   iterations at the --throughputs curve of (model, batch)
"""

from __future__ import annotations

import math
import re
import uuid
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

from chronus_py.jobs.model import DeadlineOption, Job, JobKind
from chronus_py.jobs.sizing import curve_sizes
from chronus_py.jobs.throughputs import ThroughputTable
from placement.limits import MAX_SECONDS

FIELDS = (
    "id",
    "gpus",
    "estimate_seconds",
    "deadlines",
    "duration_seconds",
    "iterations",
    "model",
    "tenant",
    "cgroup",
    "elastic",
)
RECORD_FIELDS = ("submit", "pod_gpus")
"""Fields only a record (``Origin.record``) gives: set by the backend, never over the API."""
ELASTIC_FIELDS = ("min_gpus", "max_gpus", "batch", "iterations")
_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
STORED_ID = re.compile(r"[A-Za-z0-9._:-]{1,257}")
"""A record's id (a database row's, a backend's): a tenant's job is kept as ``TENANT:ID``, up to
128 + 1 + 128 characters. Checked by the request's rule, a tenant's 128-character id was
accepted and then refused when ``chronus serve`` read it back at its next start, which it could
no longer make."""
PATH_SEGMENTS = (".", "..")
"""Ids a job cannot have: in ``/v1/jobs/{id}`` HTTP clients resolve them away (curl and httpx
asked for ``/v1/`` instead), so the job could be neither read nor cancelled."""
TENANT = re.compile(r"[A-Za-z0-9._-]{1,128}")
"""A tenant's name (a token's, one an admin gives a job, one a listing asks for): the
characters of an id but ``:``. A tenant's job is ``TENANT:ID`` in the service, and ids may
hold ``:``, so tenants ``a`` and ``a:b`` would name one job ``a:b:x`` (tenant ``a``'s id
``b:x``, tenant ``a:b``'s ``x``): the second to choose it got a 409, telling that the
other's job exists."""
TENANT_RULE = (
    "expected 1-128 characters of A-Z a-z 0-9 . _ - (no ':', which ends a tenant in a job's id)"
)
_CGROUP_PART = r"[A-Za-z0-9_@:+=,\\-][A-Za-z0-9._@:+=,\\-]*"
CGROUP = re.compile(f"/?{_CGROUP_PART}(/{_CGROUP_PART})*")
"""A cgroup path: no component starts with a dot, so none is '..' (nor hidden)."""
MAX_DEADLINES = 16
MAX_MODEL = 128  # characters of a model's name


class FieldError(ValueError):
    """A field of a request is wrong: ``field`` names it (dotted path), ``why`` says how."""

    def __init__(self, field: str, why: str):
        super().__init__(f"{field}: {why}")
        self.field = field
        self.why = why


class Forbidden(FieldError):
    """A field the caller's token may not set as given (403)."""


class Unrunnable(FieldError):
    """A well-formed job this service cannot run (no size of an elastic range is measured):
    answered like an admission that rejects it, not as a malformed request."""


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a job's fields come from, which sets the rules they are read by.

    A request (``request``) is submitted now, for its token's tenant (an admin may name
    another), with ids scoped to that tenant unless an admin sent it. A record (``record``: a
    backend's arrival, a job recovered from the cluster, a row of the database) names its
    tenant and submission time itself, may give ids as numbers and fields as null."""

    tenant: str
    may_set_tenant: bool = False
    submit: float | None = None
    scoped: bool = False

    @classmethod
    def request(cls, tenant: str, *, admin: bool = False) -> Origin:
        return cls(tenant, may_set_tenant=admin, scoped=not admin)

    @classmethod
    def record(cls, tenant: str, submit: float) -> Origin:
        return cls(tenant, may_set_tenant=True, submit=submit)

    def scope(self, job_id: str) -> str:
        """The id a job has in the service: ``TENANT:ID`` for a tenant's request. Ids are scoped
        per tenant, so choosing an id that another tenant uses neither fails nor tells that it
        exists; an admin names every job by its full id."""
        return f"{self.tenant}:{job_id}" if self.scoped else job_id

    def shown(self, job_id: str) -> str:
        """A job's id as this origin names it (``scope`` undone)."""
        prefix = f"{self.tenant}:"
        return job_id[len(prefix) :] if self.scoped and job_id.startswith(prefix) else job_id


@dataclass(frozen=True, slots=True)
class JobSpec:
    """A checked submission: the job (``duration`` is the true work the sim backend runs; an
    elastic job's curve and iterations are its ``sizes``, ``rates`` and ``iterations``), its
    estimate (None: unknown, to be measured in place), and the fields as given (what the
    database and the backend keep)."""

    job: Job
    estimate: float | None
    fields: Mapping[str, Any]

    @property
    def needs_size(self) -> bool:
        """An elastic job not sized yet: admission picks its size (``sized``)."""
        return bool(self.job.rates) and "gpus" not in self.fields

    def renamed(self, job_id: str) -> JobSpec:
        """This job under ``job_id`` (a tenant's job gets its tenant-scoped id)."""
        return replace(self, job=replace(self.job, id=job_id), fields={**self.fields, "id": job_id})

    def sized(self, gpus: int) -> JobSpec:
        """This elastic job at ``gpus`` GPUs: its work and (sim) true work at that size, and the
        size in its fields, so a restarted service reads it back as decided."""
        seconds = self.job.seconds(gpus)
        duration = self.fields.get("duration_seconds") or seconds
        job = replace(self.job, gpus=gpus, duration=duration)
        fields = {**self.fields, "gpus": gpus, "estimate_seconds": seconds}
        return JobSpec(job, seconds, fields)


def read_job(
    body: Any,
    origin: Origin,
    *,
    now: float,
    throughputs: Callable[[], ThroughputTable] | None = None,
) -> JobSpec:
    """``body`` read by the rules of its ``origin`` (``parse_job``), under its service id."""
    spec = parse_job(
        body,
        now=now,
        tenant=origin.tenant,
        may_set_tenant=origin.may_set_tenant,
        submit=origin.submit,
        throughputs=throughputs,
    )
    return spec.renamed(origin.scope(spec.job.id)) if origin.scoped else spec


def parse_job(
    body: Any,
    *,
    now: float,
    tenant: str,
    may_set_tenant: bool = False,
    submit: float | None = None,
    throughputs: Callable[[], ThroughputTable] | None = None,
) -> JobSpec:
    """Check ``body``; the job is submitted at ``submit`` (default ``now``) for ``tenant``
    (``body['tenant']`` instead when ``may_set_tenant``). ``throughputs`` gives the tables an
    elastic job's curve comes from."""
    if not isinstance(body, dict):
        raise FieldError("body", "expected a JSON object")
    allowed = FIELDS + (RECORD_FIELDS if submit is not None else ())
    for name in body:
        if name not in allowed:
            raise FieldError(str(name), f"unknown field (expected one of: {', '.join(FIELDS)})")
        if body[name] is None and submit is None:
            # Over the API a field is given or left out (as its schema says); null is neither.
            raise FieldError(str(name), "expected a value, not null (leave the field out)")
    job_id = body.get("id")
    if job_id is None:
        job_id = uuid.uuid4().hex[:16]
    elif (
        isinstance(job_id, bool)
        or not isinstance(job_id, (str, int))
        or (submit is None and not isinstance(job_id, str))  # a trace's ids may be numbers
        or not (_ID if submit is None else STORED_ID).fullmatch(str(job_id))
    ):
        raise FieldError(
            "id", f"expected 1-128 characters of A-Z a-z 0-9 . _ : -, got {shown(job_id)}"
        )
    elif submit is None and job_id in PATH_SEGMENTS:
        raise FieldError("id", f"{job_id!r} cannot be an id: a URL's path would drop it")
    if body.get("elastic") is not None and submit is None:
        for name in ("gpus", "estimate_seconds"):
            if name in body:
                raise FieldError(name, "an elastic job's size and work are chosen by admission")
    elastic = None if body.get("elastic") is None else _elastic(body, throughputs)
    gpus = integer(body.get("gpus", elastic["sizes"][-1] if elastic is not None else None))
    if gpus is None or gpus < 1:
        raise FieldError(
            "gpus",
            f"expected an integer >= 1, got {shown(body['gpus'])}"
            if "gpus" in body
            else "required",
        )
    if elastic is not None and gpus not in elastic["sizes"]:
        raise FieldError(
            "gpus", f"{gpus} is not one of the elastic job's sizes {list(elastic['sizes'])}"
        )
    pod_gpus = body.get("pod_gpus")
    if pod_gpus is not None:
        pod_gpus = integer(pod_gpus)
        if pod_gpus is None or pod_gpus < 1 or gpus % pod_gpus or elastic is not None:
            raise FieldError(
                "pod_gpus",
                f"expected an integer >= 1 that divides gpus ({gpus}), of a rigid job, got "
                f"{shown(body['pod_gpus'])}",
            )
    estimate = _number(body, "estimate_seconds")
    duration = _number(body, "duration_seconds")
    iterations = body.get("iterations")
    if iterations is not None:
        iterations = integer(iterations)
        if iterations is None or not 1 <= iterations <= MAX_SECONDS:
            raise FieldError(
                "iterations",
                f"expected an integer >= 1 and <= {MAX_SECONDS:g}, got {shown(body['iterations'])}",
            )
    if estimate is None and iterations is None and elastic is None:
        raise FieldError(
            "estimate_seconds",
            "required, unless iterations is given: the job is then measured in place from its "
            "progress reports",
        )
    model = body.get("model")
    if model is not None and (not isinstance(model, str) or not 0 < len(model) <= MAX_MODEL):
        raise FieldError("model", f"expected a string of 1-{MAX_MODEL} characters")
    cgroup = body.get("cgroup")
    if cgroup is not None and (
        not isinstance(cgroup, str) or len(cgroup) > 512 or not CGROUP.fullmatch(cgroup)
    ):
        raise FieldError(
            "cgroup", "expected a cgroup path of 1-512 characters, no component starting with '.'"
        )
    if "tenant" in body:
        given = body["tenant"]
        if not isinstance(given, str) or not TENANT.fullmatch(given):
            raise FieldError("tenant", f"{TENANT_RULE}, got {shown(given)}")
        if not may_set_tenant and given != tenant:
            raise Forbidden("tenant", "set by your token; only an admin token names another")
        tenant = given
    deadlines = _deadlines(body.get("deadlines", []))
    kind = (
        JobKind.BEST_EFFORT
        if not deadlines
        else JobKind.STRICT_SLO
        if len(deadlines) == 1
        else JobKind.SOFT_SLO
    )
    at = now if submit is None else submit
    job = Job(
        id=str(job_id),
        tenant=tenant,
        gpus=gpus,
        submit=at,
        kind=kind,
        deadlines=deadlines,
        # the estimate stands in for an unknown true work; built with it, not replaced after
        # (a second Job per submission, ~9 us; issue 27)
        duration=estimate if duration is None and elastic is None else duration,
        model=model,
        pod_gpus=pod_gpus,
        **(elastic or {"iterations": iterations}),
    )
    if elastic is not None:  # its work is its iterations at its size
        estimate = job.seconds(gpus)
        if duration is None:
            job = replace(job, duration=estimate)
    fields = {**{k: v for k, v in body.items() if k != "submit"}, "id": job.id, "tenant": tenant}
    return JobSpec(job, estimate, fields)


def _elastic(body: Mapping[str, Any], throughputs) -> dict[str, Any]:
    """An elastic submission's curve and work, as the :class:`Job` fields ``sizes``, ``rates``,
    ``batch`` and ``iterations``; its work is iterations, so it takes no
    ``estimate_seconds`` (a restarted service reads back the one admission computed, with the
    size, and checks that it agrees)."""
    raw = body["elastic"]
    if not isinstance(raw, dict):
        raise FieldError("elastic", f"expected {{{', '.join(ELASTIC_FIELDS)}}}")
    for name in raw:
        if name not in ELASTIC_FIELDS:
            raise FieldError(
                f"elastic.{name}", f"unknown field (expected one of: {', '.join(ELASTIC_FIELDS)})"
            )
    if "estimate_seconds" in body and "gpus" not in body:
        raise FieldError("estimate_seconds", "an elastic job's work is elastic.iterations")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise FieldError("model", "required for an elastic job: its throughput curve's model")
    values = {}
    for name, default in (("min_gpus", 1), ("max_gpus", 64), ("batch", None)):
        given = raw.get(name, default)
        value = integer(given)
        if value is None or value < 1:
            raise FieldError(
                f"elastic.{name}",
                "required" if given is None else f"expected an integer >= 1, got {shown(given)}",
            )
        values[name] = value
    if values["min_gpus"] > values["max_gpus"]:
        raise Unrunnable("elastic.min_gpus", f"must be <= max_gpus ({values['max_gpus']})")
    iterations = _number(raw, "iterations", "elastic.")
    if iterations is None:
        raise FieldError("elastic.iterations", "required")
    if throughputs is None:
        raise FieldError("elastic", "this service has no throughput tables")
    table = throughputs()
    if table.curve(model, values["batch"]) is None:
        # Named by what the client can change, never by where the tables live on the server.
        models = sorted({m for m, _ in table.rates})
        if model not in models:
            raise FieldError(
                "model", f"no throughput curve for {shown(model)} (have: {', '.join(models)})"
            )
        batches = sorted(b for m, b in table.rates if m == model)
        raise FieldError(
            "elastic.batch",
            f"no {model} curve at global batch {values['batch']} (have: "
            f"{', '.join(map(str, batches))})",
        )
    try:
        sizes, rates = curve_sizes(
            table, model, values["batch"], values["min_gpus"], values["max_gpus"]
        )
    except ValueError as exc:
        raise Unrunnable("elastic", str(exc)) from None
    return {"sizes": sizes, "rates": rates, "batch": values["batch"], "iterations": iterations}


def _number(body: Mapping[str, Any], name: str, where: str = "") -> float | None:
    """An optional positive number (None when absent), at most the library's ``MAX_SECONDS``
    (a larger one passed here and was refused deep in ``Scheduler.submit``); ``where``: the
    object it is in, for the field's name (``elastic.``)."""
    value = body.get(name)
    if value is None:
        return None
    number = finite(value)
    if number is None or not 0 < number <= MAX_SECONDS:
        raise FieldError(
            where + name, f"expected a number > 0 and <= {MAX_SECONDS:g}, got {shown(value)}"
        )
    return number


def integer(value: Any) -> int | None:
    """``value`` as an int if it is a JSON integer, else None. JSON has one number type: 8.0
    is the integer 8 (as JSON Schema counts it), 8.5 and true are not integers."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    return value


def finite(value: Any) -> float | None:
    """``value`` as a float if it is a finite JSON number, else None: an integer too large for
    a float (10**400 is valid JSON) is refused like an infinite one, not an OverflowError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def in_terms(field: str | None, why: str, keys: Mapping[str, str]) -> str:
    """A refusal of ``field`` worded in a backend's terms, for the job's owner: the name
    ``keys`` gives the field's top level (``deadlines[0].at`` is ``deadlines``; a Slurm marker
    key, a Kueue annotation), else the field itself; no field: ``why`` alone."""
    if not field:
        return why
    top = field.split("[", 1)[0].split(".", 1)[0]
    return f"{keys.get(top, field)}: {why}"


def shown(value: Any, limit: int = 40) -> str:
    """A refused value as an error shows it: a huge number or string is cut short."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _deadlines(raw: Any) -> tuple[DeadlineOption, ...]:
    if not isinstance(raw, list):
        raise FieldError("deadlines", "expected a list of {at, value}")
    if len(raw) > MAX_DEADLINES:
        raise FieldError("deadlines", f"at most {MAX_DEADLINES} options")
    out = []
    for i, item in enumerate(raw):
        where = f"deadlines[{i}]"
        if not isinstance(item, dict):
            raise FieldError(where, "expected {at, value}")
        for name in item:
            if name not in ("at", "value"):
                raise FieldError(f"{where}.{name}", "unknown field (expected at, value)")
        at = finite(item.get("at"))
        if at is None:
            raise FieldError(
                f"{where}.at",
                f"expected a finite number, got {shown(item['at'])}"
                if "at" in item
                else "required",
            )
        value = finite(item.get("value", 1))
        if value is None or value < 0:
            raise FieldError(
                f"{where}.value", f"expected a number >= 0, got {shown(item.get('value'))}"
            )
        out.append(DeadlineOption(at, value))
    # Tightest first, one option per instant (the best value given for it).
    best: dict[float, float] = {}
    for option in out:
        best[option.at] = max(best.get(option.at, option.value), option.value)
    return tuple(DeadlineOption(at, value) for at, value in sorted(best.items()))
