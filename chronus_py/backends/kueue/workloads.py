"""Reading a Kueue Workload (a plain dict of API ``kueue.x-k8s.io/v1beta2`` or ``v1beta1``,
which spell what chronus reads the same: ``kube.KueueApi``) and the records chronus keeps on
it; pure functions, so the backend's decisions can be read without a cluster.

Chronus's records are annotations it owns (server-side apply, its own field manager)::

    chronus.io/job        the accepted job's fields (POST /v1/jobs), absolute deadlines: accepted
    chronus.io/guarantee  {"at": T, "value": V}: the promise, before any message shows it
    chronus.io/work-done  {"seconds": S, "runs": N}: work and run count of the runs that ended
                          (+ "resized": [FROM, TO]: GPUs, once Kueue reserved another count)
    chronus.io/placement  {"nodes": {node: [gpu, ...]}, "since": T}: the current run's GPUs
    chronus.io/refused    why chronus will not run it (a bad annotation): never looked at again
    chronus.io/deadline-passed  T: the last deadline, passed before Kueue reserved quota for it
                          (it runs best-effort; the check's message says why)

so a controller that starts with an empty database rebuilds every job, run and promise from the
API server alone. Times are on the backend's clock (``KueueBackend.now``).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction
from typing import Any, Mapping

from chronus_py.backends.kueue.annotations import PREFIX, rfc3339
from chronus_py.jobs.model import DeadlineOption
from chronus_py.service.jobspec import finite

JOB, GUARANTEE = PREFIX + "job", PREFIX + "guarantee"
WORK_DONE, PLACEMENT, REFUSED = PREFIX + "work-done", PREFIX + "placement", PREFIX + "refused"
PASSED, FAILED_STARTS = PREFIX + "deadline-passed", PREFIX + "failed-starts"
RECORDS = (JOB, GUARANTEE, WORK_DONE, PLACEMENT, REFUSED, PASSED, FAILED_STARTS)
HOSTNAME = "kubernetes.io/hostname"
DEFAULT_GRACE = 30.0  # seconds: a pod's terminationGracePeriodSeconds when it sets none


def unix(text: str | None) -> float | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def job_id(namespace: str, name: str) -> str:
    """The chronus id of a Workload: ``namespace.name`` (a namespace has no dot), or a hashed
    tail when that passes the 128 characters chronus ids may have."""
    full = f"{namespace}.{name}"
    if len(full) <= 128:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:12]
    return f"{full[:115]}-{digest}"


def meta(wl: Mapping[str, Any]) -> Mapping[str, Any]:
    return wl.get("metadata") or {}


def key(wl: Mapping[str, Any]) -> tuple[str, str]:
    m = meta(wl)
    return m.get("namespace", ""), m.get("name", "")


def annotations(wl: Mapping[str, Any]) -> dict[str, str]:
    return dict(meta(wl).get("annotations") or {})


def records(wl: Mapping[str, Any]) -> dict[str, str]:
    """Chronus's own annotations on the Workload."""
    return {k: v for k, v in annotations(wl).items() if k in RECORDS}


def failed_starts(records: Mapping[str, str]) -> int:
    """The starts in a row kube-scheduler did not bind, as chronus's ``chronus.io/failed-starts``
    record counts them; a record that is no count (edited by hand) is none."""
    try:
        return max(int(records.get(FAILED_STARTS, "")), 0)
    except ValueError:  # also digits past int's 4,300 ("²" passes str.isdigit, not int)
        return 0


def with_records(wl: Mapping[str, Any], mine: Mapping[str, str]) -> dict:
    """``wl`` as it will be once chronus's records are ``mine`` (a copy; a write of them is
    queued): the round reads what chronus decided, not what the API server has so far."""
    kept = {k: v for k, v in annotations(wl).items() if k not in RECORDS}
    return {**wl, "metadata": {**meta(wl), "annotations": {**kept, **mine}}}


def condition(wl: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for c in (wl.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return c
    return None


def is_true(wl: Mapping[str, Any], kind: str) -> bool:
    c = condition(wl, kind)
    return c is not None and c.get("status") == "True"


def check_entry(wl: Mapping[str, Any], checks: frozenset[str]) -> Mapping[str, Any] | None:
    """The Workload's entry of one of chronus's admission checks (None: not chronus's)."""
    for entry in (wl.get("status") or {}).get("admissionChecks") or []:
        if entry.get("name") in checks:
            return entry
    return None


def reserved(wl: Mapping[str, Any]) -> bool:
    """Kueue holds quota for it (the only Workloads chronus may start) and has not evicted it."""
    return is_true(wl, "QuotaReserved") and not is_true(wl, "Evicted")


def active(wl: Mapping[str, Any]) -> bool:
    return (wl.get("spec") or {}).get("active", True) is not False


def owner_job(wl: Mapping[str, Any]) -> str | None:
    """The name of the ``batch/v1`` Job the Workload belongs to, if it is one's."""
    for ref in meta(wl).get("ownerReferences") or []:
        if ref.get("kind") == "Job" and str(ref.get("apiVersion", "")).startswith("batch/"):
            return ref.get("name")
    return None


def owner_job_uid(wl: Mapping[str, Any]) -> str | None:
    """The uid of the ``batch/v1`` Job the Workload belongs to (for an Event on it)."""
    for ref in meta(wl).get("ownerReferences") or []:
        if ref.get("kind") == "Job" and str(ref.get("apiVersion", "")).startswith("batch/"):
            return ref.get("uid")
    return None


_QUANTITY = re.compile(r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:[eE]([+-]?[0-9]+)|([a-zA-Z]*))")
MAX_COUNT = 10**6
"""The most GPUs a quantity is read as (a Node's are counted one by one)."""
_SUFFIXES = {
    "": 1,
    "m": Fraction(1, 1000),
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}


def _quantity(value: Any) -> int:
    """A Kubernetes quantity (``4``, ``1k``, ``2e3``, ``500m``) as a whole count, rounded down;
    0 if it is none (the API server checked it: an extended resource is a whole number, which
    ``1k`` is, and ``float('1k')`` failed)."""
    text = str(value).strip()
    m = _QUANTITY.fullmatch(text) if len(text) <= 64 else None  # the API server's are short
    if m is None or (m.group(3) or "") not in _SUFFIXES:
        return 0
    number = Fraction(m.group(1))
    if m.group(2):
        number *= Fraction(10) ** max(min(int(m.group(2)), 19), -19)  # 1e400: no huge power
    else:
        number *= _SUFFIXES[m.group(3) or ""]
    return min(max(math.floor(number), 0), MAX_COUNT)


def _asks(container: Mapping[str, Any], resource: str) -> int:
    res = container.get("resources") or {}
    amount = (res.get("limits") or {}).get(resource, (res.get("requests") or {}).get(resource))
    return 0 if amount is None else _quantity(amount)


def pod_gpus(template: Mapping[str, Any], resource: str) -> int:
    """GPUs one pod of a pod set asks, as Kubernetes and Kueue count a pod's request
    (``PodRequests``): its containers' limits (else requests) plus its sidecars' (init
    containers with ``restartPolicy: Always``), or an init container's plus the sidecars
    started before it, if more. Counting the containers alone, a Job whose init container
    takes 4 GPUs and whose trainer takes 1 was planned and placed as 1 GPU while Kueue
    reserved 4 and kube-scheduler needed 4 free on the node."""
    spec = template.get("spec") or {}
    running = sum(_asks(c, resource) for c in spec.get("containers") or [])
    sidecars = init = 0
    for c in spec.get("initContainers") or []:
        if c.get("restartPolicy") == "Always":
            sidecars += _asks(c, resource)
            init = max(init, sidecars)
        else:
            init = max(init, sidecars + _asks(c, resource))
    return max(running + sidecars, init)


@dataclass(frozen=True, slots=True)
class PodSet:
    name: str
    count: int
    gpus_per_pod: int


def pod_sets(wl: Mapping[str, Any], resource: str) -> list[PodSet]:
    """The pod sets, at the counts Kueue reserved (a partial admission reserves fewer)."""
    admitted = {
        a.get("name"): a.get("count")
        for a in ((wl.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []
    }
    out = []
    for ps in (wl.get("spec") or {}).get("podSets") or []:
        count = admitted.get(ps.get("name")) or ps.get("count", 1)
        out.append(PodSet(ps.get("name", "main"), int(count), pod_gpus(ps["template"], resource)))
    return out


def grace(wl: Mapping[str, Any]) -> float:
    """The longest termination grace of its pods, in seconds (their templates'
    ``terminationGracePeriodSeconds``; Kubernetes's default, :data:`DEFAULT_GRACE`, where one
    sets none or an unreadable one): how long a start that preempts its run may wait for
    the GPUs (``KueueBackend.start_latency``)."""
    longest = 0.0
    for ps in (wl.get("spec") or {}).get("podSets") or []:
        value = ((ps.get("template") or {}).get("spec") or {}).get("terminationGracePeriodSeconds")
        try:
            seconds = DEFAULT_GRACE if value is None else float(value)
        except (TypeError, ValueError):
            seconds = DEFAULT_GRACE
        longest = max(longest, seconds if 0 <= seconds < math.inf else DEFAULT_GRACE)
    return longest


def gpus(wl: Mapping[str, Any], resource: str) -> int:
    return sum(p.count * p.gpus_per_pod for p in pod_sets(wl, resource))


# -- chronus's records ---------------------------------------------------------------------------
def _json(wl: Mapping[str, Any], name: str) -> Any:
    text = annotations(wl).get(name)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def accepted(wl: Mapping[str, Any]) -> dict | None:
    """The job fields chronus accepted the Workload with (None: not accepted)."""
    value = _json(wl, JOB)
    return value if isinstance(value, dict) else None


def guarantee(wl: Mapping[str, Any], job: Mapping[str, Any] | None) -> DeadlineOption | None:
    """The promise chronus recorded (None: none, or a damaged record, which no round may take
    for a promise: ``'{"at": NaN}'`` is JSON to Python), if it is one of the deadline options
    of ``job`` (the fields it was accepted with, :func:`accepted`, which the caller has read
    already: a look read them twice per guaranteed Workload), the only promises chronus makes.
    Anyone who may patch Workloads can write this record: one naming no option of the job (a
    best-effort Job's, a time made up) made the rebuild fail, so ``chronus serve`` exited at
    start (``Scheduler.restore`` refuses it); one naming an option of the job cannot be told
    from chronus's own."""
    value = _json(wl, GUARANTEE)
    if not isinstance(value, dict):
        return None
    at, worth = finite(value.get("at")), finite(value.get("value", 1.0))
    if at is None or worth is None:
        return None
    options = (job or {}).get("deadlines")
    for option in options if isinstance(options, list) else []:
        if isinstance(option, dict) and (
            finite(option.get("at")),
            finite(option.get("value", 1.0)),
        ) == (at, worth):
            return DeadlineOption(at, worth)
    return None


def work_done(wl: Mapping[str, Any]) -> tuple[float, int]:
    """(seconds of work, runs) of the Workload's runs that ended; (0, 0) from a damaged record
    (less work credited, never more). Read every round: a record ``float`` or ``int`` could
    not read failed every round of the controller."""
    value = _json(wl, WORK_DONE)
    value = value if isinstance(value, dict) else {}
    seconds, runs = finite(value.get("seconds", 0.0)), finite(value.get("runs", 0))
    if seconds is None or runs is None or seconds < 0 or runs < 0:
        return 0.0, 0
    return seconds, int(runs)


def deadline_passed(wl: Mapping[str, Any]) -> float | None:
    """The last deadline the user gave, if it passed before Kueue reserved quota for the
    Workload (chronus then took it in best-effort)."""
    return finite(_json(wl, PASSED))


def resized(wl: Mapping[str, Any]) -> tuple[int, int] | None:
    """(GPUs before, GPUs after) of the last time Kueue reserved the Workload again at another
    pod count than chronus had accepted or last ran it at, as chronus recorded it."""
    value = _json(wl, WORK_DONE)
    value = value.get("resized") if isinstance(value, dict) else None
    if isinstance(value, list) and len(value) == 2:
        was, now = finite(value[0]), finite(value[1])
        if was is not None and now is not None:
            return int(was), int(now)
    return None


def done_record(wl: Mapping[str, Any], seconds: float, runs: int) -> dict:
    """The ``work-done`` record with these totals, keeping the note of a resize."""
    out: dict[str, Any] = {"seconds": round(seconds, 3), "runs": runs}
    note = resized(wl)
    return out if note is None else {**out, "resized": list(note)}


def resize(fields: Mapping[str, Any], done: float, was: int, now: int) -> tuple[dict, float]:
    """The accepted job's fields and its work done (seconds) at ``now`` GPUs instead of ``was``.

    A job's seconds are seconds at its size. Fewer GPUs: its estimate and the work behind it
    stretch by ``was / now`` (linear scaling, which a data-parallel job never beats when it
    shrinks, so the plan errs long); more GPUs: they stay as they were (no speed-up is
    assumed, so the plan again errs long). The fraction done is kept either way, and a
    promise re-planned on these numbers is one the job can keep."""
    factor = was / now if now < was else 1.0
    out = {**fields, "gpus": now}
    if "estimate_seconds" in out:
        out["estimate_seconds"] = round(float(out["estimate_seconds"]) * factor, 3)
    return out, done * factor


def placement(wl: Mapping[str, Any]) -> tuple[dict[str, tuple[int, ...]], float | None]:
    """The GPUs chronus started the current run on, and when; none from a damaged record."""
    value = _json(wl, PLACEMENT)
    value = value if isinstance(value, dict) else {}
    try:
        nodes = {str(n): tuple(int(g) for g in gs) for n, gs in (value.get("nodes") or {}).items()}
    except (AttributeError, TypeError, ValueError, OverflowError):
        return {}, None
    since = value.get("since")
    return nodes, None if since is None else finite(since)


def encode(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


# -- chronus's admission check entry ------------------------------------------------------------
def check_status(
    wl: Mapping[str, Any],
    check: str,
    state: str,
    message: str,
    *,
    now_wall: float,
    pod_set_updates: list[dict] | None = None,
) -> dict:
    """The status to apply for chronus's entry: ``state`` with ``message``; the transition time
    is kept unless the state changes (Kueue counts ``Retry`` back-off from it)."""
    old = check_entry(wl, frozenset({check})) or {}
    since = old.get("lastTransitionTime") if old.get("state") == state else None
    entry: dict[str, Any] = {
        "name": check,
        "state": state,
        "message": message[:32768],
        "lastTransitionTime": since or rfc3339(now_wall),
    }
    if pod_set_updates:
        entry["podSetUpdates"] = pod_set_updates
    return {"admissionChecks": [entry]}


def pin(sets: list[PodSet], selector: Mapping[str, str]) -> list[dict]:
    """podSetUpdates that add ``selector`` to every pod set's nodeSelector (Kueue merges them
    into the Job's pod template when it admits the Workload; additive only)."""
    return [{"name": p.name, "nodeSelector": dict(selector)} for p in sets]
