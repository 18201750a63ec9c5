"""A submitted job's fields, checked at the edge: the body of ``POST /v1/jobs``, or a job that
entered through the backend (a trace arrival), both become a :class:`JobSpec` here and nowhere
else. Every problem is a :class:`FieldError` naming the field, which the API answers as a 422.

Fields (the job fields of the state file, ``chronus_py/state_file.py``)::

    id: j1                      # optional: 1-128 of [A-Za-z0-9._:-]; the server picks one if absent
    gpus: 8                     # integer >= 1
    estimate_seconds: 7200      # > 0: the work the scheduler plans with; leave it out when
                                #   nobody knows (iterations then required): the job is measured
                                #   in place from its progress reports (chronus_py/estimates)
    deadlines: [{at: 9000, value: 1}]   # absolute seconds on the backend's clock, tightest first;
                                #   value defaults to 1; none = best-effort, several = soft SLO
    duration_seconds: 7000      # sim backend only: the true work (default: the estimate)
    iterations: 40000           # optional: lets POST /v1/jobs/{id}/progress re-estimate
    model: resnet50             # optional, informative
    tenant: team-a              # admin tokens only (a tenant token's own tenant otherwise)
    cgroup: training.slice/j1.scope     # optional: the job's cgroup, for host layer configs
"""

from __future__ import annotations

import math
import re
import uuid
from dataclasses import dataclass
from typing import Any, Mapping

from chronus_py.model import DeadlineOption, Job, JobKind

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
)
_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
MAX_DEADLINES = 16


class FieldError(ValueError):
    """A field of a request is wrong: ``field`` names it (dotted path), ``why`` says how."""

    def __init__(self, field: str, why: str):
        super().__init__(f"{field}: {why}")
        self.field = field
        self.why = why


@dataclass(frozen=True, slots=True)
class JobSpec:
    """A checked submission: the job (``duration`` is the true work the sim backend runs), its
    estimate (None: unknown, to be measured in place), and the fields as given (what the
    database and the backend keep)."""

    job: Job
    estimate: float | None
    fields: Mapping[str, Any]


def parse_job(
    body: Any, *, now: float, tenant: str, may_set_tenant: bool = False, submit: float | None = None
) -> JobSpec:
    """Check ``body``; the job is submitted at ``submit`` (default ``now``) for ``tenant``
    (``body['tenant']`` instead when ``may_set_tenant``)."""
    if not isinstance(body, dict):
        raise FieldError("body", "expected a JSON object")
    allowed = FIELDS + (("submit",) if submit is not None else ())
    for name in body:
        if name not in allowed:
            raise FieldError(str(name), f"unknown field (expected one of: {', '.join(FIELDS)})")
    job_id = body.get("id")
    if job_id is None:
        job_id = uuid.uuid4().hex[:16]
    elif (
        isinstance(job_id, bool)
        or not isinstance(job_id, (str, int))
        or not _ID.fullmatch(str(job_id))
    ):
        raise FieldError("id", f"expected 1-128 characters of A-Z a-z 0-9 . _ : -, got {job_id!r}")
    gpus = body.get("gpus")
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise FieldError(
            "gpus", f"expected an integer >= 1, got {gpus!r}" if "gpus" in body else "required"
        )
    estimate = _number(body, "estimate_seconds")
    duration = _number(body, "duration_seconds")
    iterations = body.get("iterations")
    if iterations is not None and (
        isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1
    ):
        raise FieldError("iterations", f"expected an integer >= 1, got {iterations!r}")
    if estimate is None and iterations is None:
        raise FieldError(
            "estimate_seconds",
            "required, unless iterations is given: the job is then measured in place from its "
            "progress reports",
        )
    model = body.get("model")
    if model is not None and (not isinstance(model, str) or not 0 < len(model) <= 128):
        raise FieldError("model", "expected a string of 1-128 characters")
    cgroup = body.get("cgroup")
    if cgroup is not None and (
        not isinstance(cgroup, str) or not 0 < len(cgroup) <= 512 or ".." in cgroup.split("/")
    ):
        raise FieldError("cgroup", "expected a cgroup path of 1-512 characters without '..'")
    if "tenant" in body:
        if not may_set_tenant:
            raise FieldError("tenant", "set by your token; only an admin token may name a tenant")
        tenant = body["tenant"]
        if not isinstance(tenant, str) or not _ID.fullmatch(tenant):
            raise FieldError(
                "tenant", f"expected 1-128 characters of A-Z a-z 0-9 . _ : -, got {tenant!r}"
            )
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
        duration=duration if duration is not None else estimate,
        iterations=iterations,
        model=model,
    )
    fields = {**{k: v for k, v in body.items() if k != "submit"}, "id": job.id, "tenant": tenant}
    return JobSpec(job, estimate, fields)


def _number(body: Mapping[str, Any], name: str) -> float | None:
    """An optional positive number (None when absent)."""
    value = body.get(name)
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise FieldError(name, f"expected a number > 0, got {value!r}")
    return float(value)


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
        at = item.get("at")
        if isinstance(at, bool) or not isinstance(at, (int, float)) or not math.isfinite(at):
            raise FieldError(
                f"{where}.at", f"expected a number, got {at!r}" if "at" in item else "required"
            )
        value = item.get("value", 1)
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value < 0
        ):
            raise FieldError(f"{where}.value", f"expected a number >= 0, got {value!r}")
        if out and at <= out[-1].at:
            raise FieldError(f"{where}.at", "deadlines must be in increasing order")
        out.append(DeadlineOption(float(at), float(value)))
    return tuple(out)
