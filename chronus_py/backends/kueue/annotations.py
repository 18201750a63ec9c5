"""The chronus annotations a Kubernetes user puts on a Job (or on its Workload) to hand it to
chronus, read into the fields of ``POST /v1/jobs``.

    metadata:
      labels:
        kueue.x-k8s.io/queue-name: team-a          # a LocalQueue of a chronus ClusterQueue
      annotations:
        chronus.io/estimate: 2h                    # required (or chronus.io/iterations)
        chronus.io/deadline: +6h                   # strict; or "+4h:1,+8h:0.4" (soft), or
                                                   #   "2026-11-27T08:00:00Z" (RFC 3339)
        chronus.io/iterations: "40000"             # optional: progress reports re-estimate
        chronus.io/model: resnet50                 # optional, informative

The values follow the grammar of the Slurm marker (``chronus_py/backends/slurm/marker.py``), whose
parsers are reused here: a duration is ``600``, ``90s``, ``20m``, ``2h`` or ``1h30m``; a deadline
is a comma-separated list of ``TIME[:VALUE]`` options, tightest first, TIME being ``+DURATION``
after the Job's creation or an RFC 3339 time. Every problem is an :class:`AnnotationError` whose
message starts with the annotation's name, which chronus writes into the Workload's admission
check (``Rejected``), so ``kubectl describe workload`` tells the user what to fix.

Every value is read here to the end, so a value no check foresaw (``iterations: "²"``, a digit
to ``str.isdigit`` but not to ``int``) is one Workload's refusal, not an exception out of every
round (it was: no Workload of any queue started until that Job was deleted). What the service's
own rules refuse (``jobspec``, ``rounds``: the planning horizon) comes back through the backend's
``refuse_arrival`` with the field at fault, named here by its annotation (``FIELD_KEYS``).
A value is quoted at most 40 characters long (a
100 KB one was copied whole into the message and the refusal record).
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone
from typing import Any, Mapping

from chronus_py.backends.kueue.names import GPU
from chronus_py.backends.slurm import marker
from chronus_py.service.jobspec import MAX_DEADLINES, MAX_MODEL, shown
from chronus_py.service.rounds import HORIZON
from placement.limits import MAX_SECONDS

PREFIX = "chronus.io/"
ESTIMATE, DEADLINE = PREFIX + "estimate", PREFIX + "deadline"
ITERATIONS, MODEL = PREFIX + "iterations", PREFIX + "model"
USER_KEYS = (ESTIMATE, DEADLINE, ITERATIONS, MODEL)
RECORD_KEYS = ("job", "guarantee", "work-done", "placement", "refused", "deadline-passed")
"""Annotations chronus writes itself on the Workload (``workloads.py``), passed over here."""
MAX_VALUE = 1024
"""Characters an annotation's value may have: 16 deadline options of an ISO time with its zone
and a value fit in 700."""
_VALUE = re.compile(r"\d+(?:\.\d*)?|\.\d+")
_INTEGER = re.compile(r"[0-9]{1,16}")
FIELD_KEYS = {
    "estimate_seconds": ESTIMATE,
    "deadlines": DEADLINE,
    "iterations": ITERATIONS,
    "model": MODEL,
    "gpus": "resources",
    "id": "the Workload's name",
    "tenant": "namespace",  # the Workload's namespace is its tenant
}
"""The annotation a field of ``POST /v1/jobs`` comes from, to name it in a refusal."""
NO_PODS = "resources: the Workload has no pods (the Job's parallelism is 0); nothing to run"


class AnnotationError(ValueError):
    """An annotation chronus cannot read; the message names it and says what was expected."""


def _duration(text: str, key: str, *, horizon: bool = True) -> float:
    """Seconds > 0 and finite (within the planning horizon if ``horizon``), in the Slurm
    marker's grammar."""
    try:
        seconds = marker.duration(text, key)
    except marker.MarkerError:
        raise AnnotationError(
            f"{key}: expected a duration like 600, 90s, 20m, 2h, 1h30m, got {shown(text)}"
        ) from None
    if horizon and not seconds <= HORIZON:  # inf too: 400 nines are a float's infinity
        raise AnnotationError(
            f"{key}: {shown(text)} is more than {HORIZON / 86400:g} days (the planning horizon)"
        )
    return seconds


def _option(option: str, submit: float) -> dict[str, float]:
    """One deadline option, ``TIME[:VALUE]``, as {at, value}.

    Read as a whole ISO time first, and only else as ``TIME:VALUE``: an ISO time has colons of
    its own, and splitting at the last one read ``...T10:00:00+05:30`` as value 30 at ``+05``
    (half an hour early, and a soft deadline), and ``...+01:00`` or a zoneless ``...T08:00:00``
    as value 0 (refused: "value must be > 0")."""
    at, at_text, value = marker.iso(option), option, 1.0
    if at is None:
        head, sep, tail = option.rpartition(":")
        if sep and head and _VALUE.fullmatch(tail):
            at_text, value = head, float(tail)
        elif sep and head.startswith("+"):  # "+8h:-0.4", "+8h:": not a duration's fault
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            raise AnnotationError(
                f"{DEADLINE}: the value after ':' must be a number > 0, in {shown(option)}"
            )
        if not at_text.startswith("+"):
            at = marker.iso(at_text)
            if at is None:
                raise AnnotationError(
                    f"{DEADLINE}: expected +DURATION or an ISO time (e.g. +6h, "
                    f"2026-11-27T08:00:00Z), got {shown(at_text)}"
                )
    if at is None:
        seconds = submit + _duration(at_text[1:], DEADLINE, horizon=False)
    else:
        seconds = at
        if seconds <= submit:
            raise AnnotationError(
                f"{DEADLINE}: {shown(at_text)} is before the Job was created ({rfc3339(submit)})"
            )
    if not seconds - submit <= HORIZON:
        raise AnnotationError(
            f"{DEADLINE}: {shown(at_text)} is more than {HORIZON / 86400:g} days after the Job "
            "was created (the planning horizon)"
        )
    return {"at": seconds, "value": value}


def deadlines(text: str, submit: float) -> list[dict[str, float]]:
    """``+1h:1,+2h:0.5`` -> [{at, value}, ...] in absolute seconds, tightest first."""
    options = text.split(",")
    if len(options) > MAX_DEADLINES:
        raise AnnotationError(f"{DEADLINE}: at most {MAX_DEADLINES} options, got {len(options)}")
    out = [_option(option, submit) for option in options]
    for a, b in zip(out, out[1:]):
        if b["at"] <= a["at"]:
            raise AnnotationError(f"{DEADLINE}: options must be tightest first, got {shown(text)}")
    return out


def rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def job_fields(
    annotations: Mapping[str, str],
    *,
    job_id: str,
    gpus: int,
    submit: float,
    tenant: str,
    pods: int | None = None,
    resource: str = GPU,
) -> dict[str, Any]:
    """The ``POST /v1/jobs`` fields of a Workload of ``gpus`` GPUs (``resource``) in ``pods``
    pods, created at ``submit``: every problem is an :class:`AnnotationError` naming the
    annotation."""
    mine = {k: v for k, v in annotations.items() if k.startswith(PREFIX)}
    for key in mine:
        if key not in USER_KEYS and key[len(PREFIX) :] not in RECORD_KEYS:
            raise AnnotationError(f"{key}: unknown annotation (expected: {', '.join(USER_KEYS)})")
    for key in USER_KEYS:
        if len(mine.get(key, "")) > MAX_VALUE:
            raise AnnotationError(
                f"{key}: {len(mine[key])} characters, expected at most {MAX_VALUE}"
            )
    if pods == 0:  # not "its pods request no GPU": they may, there are none
        raise AnnotationError(NO_PODS)
    if gpus < 1:
        raise AnnotationError(
            f"resources: the Job's pods request no GPU (limits {resource}); chronus "
            "schedules GPU jobs only"
        )
    fields: dict[str, Any] = {"id": job_id, "gpus": gpus, "tenant": tenant, "submit": submit}
    if ESTIMATE in mine:
        fields["estimate_seconds"] = _duration(mine[ESTIMATE].strip(), ESTIMATE)
    if DEADLINE in mine:
        fields["deadlines"] = deadlines("".join(mine[DEADLINE].split()), submit)
    if ITERATIONS in mine:
        text = mine[ITERATIONS].strip()
        if not _INTEGER.fullmatch(text) or not 1 <= int(text) <= MAX_SECONDS:
            raise AnnotationError(
                f"{ITERATIONS}: expected an integer from 1 to 10^15 (the most the scheduler "
                f"takes), got {shown(text)}"
            )
        fields["iterations"] = int(text)
    if MODEL in mine:
        model = mine[MODEL].strip()
        if not 0 < len(model) <= MAX_MODEL:
            raise AnnotationError(f"{MODEL}: expected 1-{MAX_MODEL} characters, got {len(model)}")
        fields["model"] = model
    if "estimate_seconds" not in fields and "iterations" not in fields:
        raise AnnotationError(
            f"{ESTIMATE}: required (e.g. {ESTIMATE}: 2h), unless {ITERATIONS} is given"
        )
    return fields
