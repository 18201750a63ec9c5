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
"""

from __future__ import annotations

from typing import Any, Mapping

from chronus_py.backends.slurm import marker

PREFIX = "chronus.io/"
ESTIMATE, DEADLINE = PREFIX + "estimate", PREFIX + "deadline"
ITERATIONS, MODEL = PREFIX + "iterations", PREFIX + "model"
USER_KEYS = (ESTIMATE, DEADLINE, ITERATIONS, MODEL)
RECORD_KEYS = ("job", "guarantee", "work-done", "placement", "refused")
"""Annotations chronus writes itself on the Workload (``workloads.py``); a user's are refused."""


class AnnotationError(ValueError):
    """An annotation chronus cannot read; the message names it and says what was expected."""


def job_fields(
    annotations: Mapping[str, str], *, job_id: str, gpus: int, submit: float, tenant: str
) -> dict[str, Any]:
    """The ``POST /v1/jobs`` fields of a Workload of ``gpus`` GPUs created at ``submit``."""
    mine = {k: v for k, v in annotations.items() if k.startswith(PREFIX)}
    for key in mine:
        if key not in USER_KEYS and key[len(PREFIX) :] not in RECORD_KEYS:
            raise AnnotationError(f"{key}: unknown annotation (expected: {', '.join(USER_KEYS)})")
    if gpus < 1:
        raise AnnotationError(
            "resources: the Job's pods request no GPU (limits nvidia.com/gpu); chronus "
            "schedules GPU jobs only"
        )
    fields: dict[str, Any] = {"id": job_id, "gpus": gpus, "tenant": tenant, "submit": submit}
    try:
        if ESTIMATE in mine:
            fields["estimate_seconds"] = marker.duration(mine[ESTIMATE].strip(), ESTIMATE)
        if DEADLINE in mine:
            fields["deadlines"] = marker.deadlines(mine[DEADLINE].replace(" ", ""), submit)
    except marker.MarkerError as exc:
        text = str(exc)
        raise AnnotationError(text if text.startswith(PREFIX) else PREFIX + text) from None
    if ITERATIONS in mine:
        text = mine[ITERATIONS].strip()
        if not text.isdigit() or int(text) < 1:
            raise AnnotationError(f"{ITERATIONS}: expected an integer >= 1, got {text!r}")
        fields["iterations"] = int(text)
    if MODEL in mine:
        model = mine[MODEL].strip()
        if not 0 < len(model) <= 128:
            raise AnnotationError(f"{MODEL}: expected 1-128 characters")
        fields["model"] = model
    if "estimate_seconds" not in fields and "iterations" not in fields:
        raise AnnotationError(
            f"{ESTIMATE}: required (e.g. {ESTIMATE}: 2h), unless {ITERATIONS} is given"
        )
    return fields
