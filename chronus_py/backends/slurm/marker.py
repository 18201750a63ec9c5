"""The chronus marker: what a Slurm user writes in ``sbatch --comment`` to hand a held job to
chronus, and the few fields chronus adds to it once it has taken the job.

    sbatch --hold --gres=gpu:2 --comment 'chronus: estimate=20m deadline=+1h' train.sh
    sbatch --hold --gres=gpu:4 --comment 'chronus: estimate=3600 deadline=+2h:1,+4h:0.4' train.sh

Grammar: ``chronus:`` then space-separated ``key=value`` pairs.

- ``estimate`` (required): the work, in seconds at the requested GPU count; a number with an
  optional unit ``s``, ``m``, ``h``, ``d``, or several (``1h30m``).
- ``deadline``: a comma-separated list of ``TIME[:VALUE]`` options, tightest first. TIME is
  ``+DURATION`` (after the job's submission) or an ISO-8601 time (``2026-11-24T08:00:00Z``; no
  zone means UTC); VALUE defaults to 1. None: best-effort; one: a strict deadline; several: a
  soft deadline whose value falls with lateness.
- ``iterations`` (optional, integer): lets ``POST /v1/jobs/{id}/progress`` re-estimate.
- ``model`` (optional): informative.
- ``id``: written by chronus only, for jobs submitted through its API (``chronus submit``); a
  user's job is always ``slurm-<jobid>`` in chronus.

Chronus appends its own fields after `` |`` (``accepted``, ``done=SECONDS@START``), so what users
read back with ``scontrol show job`` says what chronus made of their job. A job whose comment does
not start with ``chronus:`` is not chronus's and is never touched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from chronus_py.service.jobspec import STORED_ID

PREFIX = "chronus:"
REFUSED = "chronus refused:"
SEPARATOR = " |"
USER_KEYS = ("estimate", "deadline", "iterations", "model", "id")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)"
_DURATION = re.compile(rf"{_NUMBER}|(?:{_NUMBER}[smhd])+")
_PART = re.compile(rf"({_NUMBER})([smhd]?)")
_ITERATIONS = re.compile(r"[0-9]{1,18}")  # ASCII: "²" is a digit to str.isdigit, not to int


class MarkerError(ValueError):
    """A marker that cannot be read; the message names the key and says what was expected."""


@dataclass(frozen=True, slots=True)
class Marker:
    """A parsed comment: the user's fields, and chronus's own (``accepted``, ``done``)."""

    user: dict[str, str]
    accepted: bool = False
    done: float = 0.0  # seconds of work in runs that ended, counted up to...
    done_run: float = 0.0  # ...the run that started at this Slurm start_time


def is_marked(comment: str) -> bool:
    return comment.strip().lower().startswith(PREFIX)


def parse(comment: str) -> Marker:
    """The marker in a job's comment; :class:`MarkerError` if it is malformed."""
    text = comment.strip()
    if not text.lower().startswith(PREFIX):
        raise MarkerError(f"a chronus job's comment starts with {PREFIX!r}")
    user_part, _, ours = text[len(PREFIX) :].partition(SEPARATOR)
    user: dict[str, str] = {}
    for item in user_part.split():
        key, eq, value = item.partition("=")
        if not eq or not value:
            raise MarkerError(f"{item!r}: expected key=value")
        if key not in USER_KEYS:
            raise MarkerError(f"{key}: unknown key (expected one of: {', '.join(USER_KEYS)})")
        if key in user:
            raise MarkerError(f"{key}: given twice")
        user[key] = value
    accepted, done, done_run = False, 0.0, 0.0
    for item in ours.split():
        if item == "accepted":
            accepted = True
        elif item.startswith("done="):
            amount, _, run = item[5:].partition("@")
            try:
                done, done_run = float(amount), float(run or 0)
            except ValueError:
                raise MarkerError(f"{item!r}: chronus's own field is damaged") from None
    return Marker(user, accepted, done, done_run)


def duration(text: str, key: str) -> float:
    if not _DURATION.fullmatch(text):
        raise MarkerError(f"{key}: expected a duration like 600, 90s, 20m, 2h, 1h30m, got {text!r}")
    seconds = sum(float(n) * _UNITS[u or "s"] for n, u in _PART.findall(text))
    if seconds <= 0:
        raise MarkerError(f"{key}: must be > 0, got {text!r}")
    return seconds


def _time(text: str, submit: float) -> float:
    if text.startswith("+"):
        return submit + duration(text[1:], "deadline")
    try:
        at = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise MarkerError(f"deadline: expected +DURATION or an ISO time, got {text!r}") from None
    if at.tzinfo is None:
        at = at.replace(tzinfo=timezone.utc)
    return at.timestamp()


def deadlines(text: str, submit: float) -> list[dict[str, float]]:
    """``+1h:1,+2h:0.5`` -> [{at, value}, ...] in absolute Unix seconds."""
    out = []
    for option in text.split(","):
        # an ISO time has colons of its own: the value is after the last colon only if numeric
        head, sep, tail = option.rpartition(":")
        if sep and re.fullmatch(r"\d+(?:\.\d*)?|\.\d+", tail) and head:
            at_text, value = head, float(tail)
        else:
            at_text, value = option, 1.0
        if value <= 0:
            raise MarkerError(f"deadline: value must be > 0 in {option!r}")
        out.append({"at": _time(at_text, submit), "value": value})
    for a, b in zip(out, out[1:]):
        if b["at"] <= a["at"]:
            raise MarkerError(f"deadline: options must be tightest first, got {text!r}")
    return out


def job_fields(
    marker: Marker, *, slurm_id: int, gpus: int, submit: float, tenant: str
) -> dict[str, Any]:
    """The fields of ``POST /v1/jobs`` for a marked Slurm job (``submit`` its submission time)."""
    u = marker.user
    if "estimate" not in u:
        raise MarkerError("estimate: required (e.g. estimate=30m)")
    fields: dict[str, Any] = {
        "id": u.get("id", f"slurm-{slurm_id}"),
        "gpus": gpus,
        "tenant": tenant,
        "submit": submit,
        "estimate_seconds": duration(u["estimate"], "estimate"),
        "deadlines": deadlines(u["deadline"], submit) if "deadline" in u else [],
    }
    if not STORED_ID.fullmatch(fields["id"]):  # chronus's own: a user's is refused (``jobs``)
        raise MarkerError(f"id: expected 1-257 characters of A-Z a-z 0-9 . _ : -, got {u['id']!r}")
    if "iterations" in u:
        if not _ITERATIONS.fullmatch(u["iterations"]) or int(u["iterations"]) < 1:
            raise MarkerError(f"iterations: expected an integer >= 1, got {u['iterations']!r}")
        fields["iterations"] = int(u["iterations"])
    if "model" in u:
        fields["model"] = u["model"]
    if gpus < 1:
        raise MarkerError("the job requests no GPU (submit it with --gres=gpu:N)")
    return fields


def render(
    user: dict[str, str], *, accepted: bool, done: float = 0.0, done_run: float = 0.0
) -> str:
    """The comment for these fields (the inverse of :func:`parse`)."""
    text = PREFIX + " " + " ".join(f"{k}={v}" for k, v in user.items())
    ours = (["accepted"] if accepted else []) + (
        [f"done={done:.1f}@{done_run:.0f}"] if done or done_run else []
    )
    return text + (SEPARATOR + " " + " ".join(ours) if ours else "")


def for_api_job(spec: dict[str, Any]) -> dict[str, str]:
    """Marker fields for a job submitted through the API (deadlines already absolute)."""
    user = {"id": str(spec["id"]), "estimate": f"{float(spec['estimate_seconds']):g}"}
    options = spec.get("deadlines") or []
    if options:
        user["deadline"] = ",".join(
            datetime.fromtimestamp(float(d["at"]), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            + f":{float(d.get('value', 1)):g}"
            for d in options
        )
    for key in ("iterations", "model"):
        if spec.get(key) is not None:
            user[key] = str(spec[key])
    return user
