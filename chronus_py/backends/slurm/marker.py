"""The chronus marker: what a Slurm user writes in ``sbatch --comment`` to hand a held job to
chronus, and the few fields chronus adds to it once it has taken the job.

    sbatch --hold --gres=gpu:2 --comment 'chronus: estimate=20m deadline=+1h' train.sh
    sbatch --hold --gres=gpu:4 --comment 'chronus: estimate=3600 deadline=+2h:1,+4h:0.4' train.sh

Grammar: ``chronus:`` then space-separated ``key=value`` pairs.

- ``estimate`` (required): the work, in seconds at the requested GPU count; a number with an
  optional unit ``s``, ``m``, ``h``, ``d``, or several (``1h30m``).
- ``deadline``: a comma-separated list of ``TIME[:VALUE]`` options, tightest first. TIME is
  ``+DURATION`` (after the job's submission) or an ISO-8601 time (``2026-11-24T08:00:00Z``,
  ``2026-11-24T13:30:00+05:30``; no zone means UTC), read whole before any ``:VALUE``; VALUE
  defaults to 1; at most 16 options, none over 366 days ahead (the planning horizon). None:
  best-effort; one: a strict deadline; several: a soft deadline whose value falls with lateness.
- ``iterations`` (optional, integer): lets ``POST /v1/jobs/{id}/progress`` re-estimate.
- ``model`` (optional): informative.
- ``id``: written by chronus only, for jobs submitted through its API (``chronus submit``); a
  user's job is ``slurm-<jobid>-<submit>`` in chronus (:func:`job_id`).

Chronus appends its own fields after `` |`` (``accepted``, ``submit=UNIX``,
``done=SECONDS@START``), so what users read back with ``scontrol show job`` says what chronus made
of their job. A job whose comment does not start with ``chronus:`` is not chronus's and is never
touched.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from chronus_py.jobs.model import shown_seconds
from chronus_py.service.jobspec import MAX_DEADLINES, MAX_MODEL, STORED_ID, shown
from chronus_py.service.rounds import HORIZON

PREFIX = "chronus:"
REFUSED = "chronus refused:"
SEPARATOR = " |"
USER_KEYS = ("estimate", "deadline", "iterations", "model", "id")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)"
_DURATION = re.compile(rf"{_NUMBER}|(?:{_NUMBER}[smhd])+")
_PART = re.compile(rf"({_NUMBER})([smhd]?)")
_ITERATIONS = re.compile(r"[0-9]{1,18}")  # ASCII: "²" is a digit to str.isdigit, not to int
_VALUE = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")
COMMENT_BYTES = 1024
"""The longest comment slurmctld takes, in bytes, at submission and on every update
(``_test_job_desc_fields`` in ``src/slurmctld/job_mgr.c``, 22.05 to 24.11): a longer one is
refused as ``Pathname of a file, directory or other parameter too long``."""
_OURS = " | accepted submit=9999999999 done=99999999999.9@9999999999"
"""The most chronus appends to a user's marker (``render``): an accepted marker must leave room."""


class MarkerError(ValueError):
    """A marker that cannot be read; the message names the key and says what was expected.
    From :func:`parse`: ``accepted``, whether chronus had taken the job (a user edited the
    comment since), ``job_id``, its ``id=`` if it has one, and ``submit``, chronus's record of
    its submit time (0 if none): with its Slurm id, they name the job (:func:`job_id`)."""

    accepted: bool = False
    job_id: str | None = None
    submit: float = 0.0


def fitted(text: str) -> str:
    """``text`` cut to the :data:`COMMENT_BYTES` Slurm keeps (a refusal quotes the user's
    comment after its reason: the reason stays whole, the quote loses its end)."""
    data = text.encode()
    if len(data) <= COMMENT_BYTES:
        return text
    return data[: COMMENT_BYTES - 4].decode(errors="ignore") + "...]"


def room(user: dict[str, str]) -> None:
    """MarkerError if the marker leaves no room in Slurm's comment for chronus's own fields
    (``| accepted done=...``): every update chronus made of the job would then be refused."""
    size = len(render(user, accepted=False).encode())
    if size + len(_OURS) > COMMENT_BYTES:
        raise MarkerError(
            f"comment: {size} bytes; chronus appends up to {len(_OURS)} of its own and Slurm "
            f"keeps {COMMENT_BYTES}: shorten it to {COMMENT_BYTES - len(_OURS)}"
        )


@dataclass(frozen=True, slots=True)
class Marker:
    """A parsed comment: the user's fields, and chronus's own (``accepted``, ``submit``,
    ``done``)."""

    user: dict[str, str]
    accepted: bool = False
    done: float = 0.0  # seconds of work in runs that ended, counted up to...
    done_run: float = 0.0  # ...the run that started at this Slurm start_time
    # Slurm's submit time when chronus accepted the job (0: accepted before chronus recorded
    # it, or never): Slurm stamps a new one on every requeue, and a controller that lost its
    # state gives its ids out again, so this and the Slurm id name the job (``job_id``)
    submit: float = 0.0


def is_marked(comment: str) -> bool:
    return comment.strip().lower().startswith(PREFIX)


def parse(comment: str) -> Marker:
    """The marker in a job's comment; :class:`MarkerError` if it is malformed, saying whether
    chronus had accepted the job (its own ``accepted`` survives a user's edit of their fields)
    and the job's chronus id."""
    text = comment.strip()
    if not text.lower().startswith(PREFIX):
        raise MarkerError(f"a chronus job's comment starts with {PREFIX!r}")
    user_part, _, ours = text[len(PREFIX) :].partition(SEPARATOR)
    accepted = "accepted" in ours.split()
    named = re.search(r"(?:^|\s)id=(\S+)", user_part)
    job_id = named.group(1) if named else None
    try:
        return _parse(user_part, ours, accepted)
    except MarkerError as exc:
        exc.accepted, exc.job_id = accepted, job_id
        recorded = re.search(r"(?:^|\s)submit=([0-9]{1,10})(?:\s|$)", ours)
        exc.submit = float(recorded.group(1)) if recorded else 0.0
        raise


def _parse(user_part: str, ours: str, accepted: bool) -> Marker:
    user: dict[str, str] = {}
    for item in user_part.split():
        key, eq, value = item.partition("=")
        if not eq or not value:
            raise MarkerError(f"{shown(item)}: expected key=value")
        if key not in USER_KEYS:
            name = key if re.fullmatch(r"[A-Za-z0-9_.-]{1,40}", key) else shown(key)
            raise MarkerError(f"{name}: unknown key (expected one of: {', '.join(USER_KEYS)})")
        if key in user:
            raise MarkerError(f"{key}: given twice")
        user[key] = value
    done, done_run, submit = 0.0, 0.0, 0.0
    for item in ours.split():
        if item.startswith("submit="):
            submit = float(item[7:]) if re.fullmatch(r"[0-9]{1,10}", item[7:]) else math.nan
            if math.isnan(submit):
                raise MarkerError(f"{shown(item)}: chronus's own field is damaged")
        if item.startswith("done="):
            amount, _, run = item[5:].partition("@")
            try:
                done, done_run = float(amount), float(run or 0)
            except ValueError:
                done = math.nan
            if not (0 <= done < math.inf and 0 <= done_run < math.inf):  # "nan", "inf", "-1"
                raise MarkerError(f"{shown(item)}: chronus's own field is damaged")
    return Marker(user, accepted, done, done_run, submit)


def duration(text: str, key: str) -> float:
    if not _DURATION.fullmatch(text):
        raise MarkerError(
            f"{key}: expected a duration like 600, 90s, 20m, 2h, 1h30m, got {shown(text)}"
        )
    seconds = sum(float(n) * _UNITS[u or "s"] for n, u in _PART.findall(text))
    if seconds <= 0:
        raise MarkerError(f"{key}: must be > 0, got {shown(text)}")
    return seconds


def _within_horizon(text: str, key: str) -> float:
    """A duration chronus can plan: at most the planning horizon (400 nines are a float's
    infinity, which the service refuses with a line that names none of the marker's keys)."""
    seconds = duration(text, key)
    if seconds > HORIZON:
        raise MarkerError(f"{key}: more than {HORIZON / 86400:g} days, got {shown(text)}")
    return seconds


def iso(text: str) -> float | None:
    """An ISO time's Unix seconds (no zone: UTC), or None if ``text`` is not one; a time a
    float's seconds cannot hold (year 1 or 9999 shifted by its zone) is infinitely far. The
    Kueue backend's annotations read deadlines by it too."""
    try:
        at = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if at.tzinfo is None:
        at = at.replace(tzinfo=timezone.utc)
    try:
        return at.timestamp()
    except (OverflowError, ValueError):
        return math.inf


def _option(option: str, submit: float) -> tuple[float, float]:
    """One deadline option, ``TIME[:VALUE]``: (Unix seconds, value). A relative TIME has no
    colon of its own, so its VALUE follows the first; an ISO time has colons of its own, even
    in its zone (``+05:30``), so a whole option that is an ISO time has no VALUE, and otherwise
    VALUE follows the last colon (``2026-11-24T08:00:00+05:30:0.5``)."""
    if option.startswith("+"):
        at_text, sep, value_text = option.partition(":")
        at = submit + _within_horizon(at_text[1:], "deadline")
    else:
        whole = iso(option)
        at_text, sep, value_text = (option, "", "") if whole is not None else option.rpartition(":")
        at = whole if whole is not None else iso(at_text) if sep else None
        if at is None:
            raise MarkerError(
                f"deadline: expected +DURATION or an ISO time such as 2026-11-24T08:00:00Z, "
                f"got {shown(option)}"
            )
    if not sep:
        return at, 1.0
    if not _VALUE.fullmatch(value_text) or not 0 < float(value_text) < math.inf:
        raise MarkerError(
            f"deadline: the value after ':' must be a number > 0, got {shown(option)}"
        )
    return at, float(value_text)


def deadlines(text: str, submit: float) -> list[dict[str, float]]:
    """``+1h:1,+2h:0.5`` -> [{at, value}, ...] in absolute Unix seconds."""
    options = text.split(",")
    if len(options) > MAX_DEADLINES:
        raise MarkerError(f"deadline: at most {MAX_DEADLINES} options, got {len(options)}")
    out = []
    for option in options:
        at, value = _option(option, submit)
        out.append({"at": at, "value": value})
    for a, b in zip(out, out[1:]):
        if b["at"] <= a["at"]:
            raise MarkerError(f"deadline: options must be tightest first, got {shown(text)}")
    return out


def job_id(marker: Marker, slurm_id: int, submitted: float) -> str:
    """A marked job's chronus id: its ``id=`` (chronus's API jobs), else
    ``slurm-<jobid>-<submit>``, the submit time (Unix seconds) chronus recorded when it accepted
    the job or, before that, Slurm's (``submitted``). A controller that lost its state (its
    StateSaveLocation wiped, or a new one) numbers jobs from ``FirstJobId`` again, and Slurm
    wraps its ids at ``MaxJobId``: a bare ``slurm-<jobid>`` named a job chronus had already
    taken, the new job was refused as a taken id in every round, and the old one never ended.
    A job accepted before chronus recorded submit times keeps the ``slurm-<jobid>`` it had."""
    if "id" in marker.user:
        return marker.user["id"]
    if not marker.accepted:
        return f"slurm-{slurm_id}-{submitted:.0f}"
    if not marker.submit:
        return f"slurm-{slurm_id}"
    return f"slurm-{slurm_id}-{marker.submit:.0f}"


def job_fields(
    marker: Marker,
    *,
    job_id: str,
    gpus: int,
    submit: float,
    tenant: str,
    now: float | None = None,
) -> dict[str, Any]:
    """The fields of ``POST /v1/jobs`` for a marked Slurm job, ``job_id`` (:func:`job_id`),
    submitted at ``submit``.
    With ``now`` (an arrival), what the service would refuse at ``now`` is refused here too,
    named by the marker's key: a deadline passed or beyond the planning horizon."""
    u = marker.user
    if "estimate" not in u:
        raise MarkerError("estimate: required (e.g. estimate=30m)")
    fields: dict[str, Any] = {
        "id": job_id,
        "gpus": gpus,
        "tenant": tenant,
        "submit": submit,
        "estimate_seconds": _within_horizon(u["estimate"], "estimate"),
        "deadlines": deadlines(u["deadline"], submit) if "deadline" in u else [],
    }
    if not STORED_ID.fullmatch(fields["id"]):  # chronus's own: a user's is refused (``jobs``)
        raise MarkerError(
            f"id: expected 1-257 characters of A-Z a-z 0-9 . _ : -, got {shown(u['id'])}"
        )
    if "iterations" in u:
        if not _ITERATIONS.fullmatch(u["iterations"]) or int(u["iterations"]) < 1:
            raise MarkerError(f"iterations: expected an integer >= 1, got {shown(u['iterations'])}")
        fields["iterations"] = int(u["iterations"])
    if "model" in u:
        if len(u["model"]) > MAX_MODEL:
            raise MarkerError(f"model: at most {MAX_MODEL} characters, got {len(u['model'])}")
        fields["model"] = u["model"]
    if now is not None and fields["deadlines"]:
        last = fields["deadlines"][-1]["at"]
        if last <= now:  # the service refuses it: say which of the user's times it is
            raise MarkerError(
                f"deadline: {_utc(last)} is not after the job's submission ({_utc(submit)})"
                if last <= submit
                else f"deadline: {_utc(last)} has passed (it is {_utc(math.floor(now))})"
            )
        if last > now + HORIZON:
            raise MarkerError(f"deadline: {_utc(last)} is more than {HORIZON / 86400:g} days ahead")
    if gpus < 1:
        raise MarkerError("the job requests no GPU (submit it with --gres=gpu:N)")
    return fields


def _utc(at: float) -> str:
    """A time as a marker or its refusal writes it: ISO in UTC, to the microsecond when it has a
    fraction (whole seconds read an API job's deadline at 08:00:00.7 back 0.7 s early), or the
    seconds themselves for one no date can hold."""
    try:
        t = datetime.fromtimestamp(at, timezone.utc)
    except (OverflowError, OSError, ValueError):
        return shown_seconds(at)
    fraction = f".{t.microsecond:06d}".rstrip("0") if t.microsecond else ""
    return f"{t:%Y-%m-%dT%H:%M:%S}{fraction}Z"


def render(
    user: dict[str, str],
    *,
    accepted: bool,
    done: float = 0.0,
    done_run: float = 0.0,
    submit: float = 0.0,
) -> str:
    """The comment for these fields (the inverse of :func:`parse`)."""
    text = PREFIX + " " + " ".join(f"{k}={v}" for k, v in user.items())
    ours = (
        (["accepted"] if accepted else [])
        + ([f"submit={submit:.0f}"] if submit else [])
        + ([f"done={done:.1f}@{done_run:.0f}"] if done or done_run else [])
    )
    return text + (SEPARATOR + " " + " ".join(ours) if ours else "")


def for_api_job(spec: dict[str, Any]) -> dict[str, str]:
    """Marker fields for a job submitted through the API (deadlines already absolute)."""
    user = {"id": str(spec["id"]), "estimate": shown_seconds(float(spec["estimate_seconds"]))}
    options = spec.get("deadlines") or []
    if options:
        user["deadline"] = ",".join(
            f"{_utc(float(d['at']))}:{shown_seconds(float(d.get('value', 1)))}" for d in options
        )
    for key in ("iterations", "model"):
        if spec.get(key) is not None:
            user[key] = str(spec[key])
    return user
