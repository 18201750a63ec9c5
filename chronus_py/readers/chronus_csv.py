"""The Chronus artifact's trace CSV (Philly SLO / MIX1 / MIX2).

Times are **minutes**; ``expect_time_list`` holds deadlines **relative** to submission, '-'-joined
and tightest first, with one value each in ``expect_value_list`` (e.g. ``10-8-5-2``). Best-effort
rows carry a placeholder deadline, which is ignored. Rows asking for 0 GPUs cannot run and are
dropped and counted, as the artifact skips them.
"""

from __future__ import annotations

import math

import numpy as np

from chronus_py.inputs import show
from chronus_py.jobs.model import DeadlineOption, Job, JobKind
from chronus_py.readers.table import Table
from placement.limits import MAX_GPUS, MAX_JOB_SECONDS, MAX_SECONDS

COLUMNS = (
    "job_id",
    "user",
    "num_gpu",
    "submit_time",
    "iterations",
    "model_name",
    "duration",
    "interval",
    "expect_time_list",
    "expect_value_list",
    "best_effort",
    "job_type",
)
MINUTE = 60.0


def _options(table: Table, submit: np.ndarray, slo: np.ndarray) -> list[tuple[DeadlineOption, ...]]:
    times = table.text("expect_time_list")
    values = table.text("expect_value_list")
    out: list[tuple[DeadlineOption, ...]] = [()] * len(table)
    for row in np.flatnonzero(slo).tolist():
        if row in table.problems:
            continue
        column, why, rel, worth = _parse_options(times[row], values[row])
        if why:
            table.flag_row(row, column, why)
            continue
        at = float(submit[row])
        out[row] = tuple(DeadlineOption(float(at + t * MINUTE), v) for t, v in zip(rel, worth))
    return out


def _numbers(parts: list[str]) -> list[float] | None:
    """The parts as finite numbers of at most ``MAX_SECONDS`` in minutes, or None."""
    numbers = []
    for part in parts:
        try:
            number = float(part)
        except ValueError:
            return None
        if not math.isfinite(number) or abs(number) * MINUTE > MAX_SECONDS:
            return None
        numbers.append(number)
    return numbers


def _parse_options(times: str, values: str) -> tuple[str, str, list[float], list[float]]:
    """(column, problem, relative deadlines, values) for a row's deadline lists, each number
    parsed once (30,000 rows a Philly trace); the problem is "" when they are well formed."""
    parsed = []
    for column, text in (
        ("column expect_time_list", times),
        ("column expect_value_list", values),
    ):
        parts = text.split("-")
        numbers = _numbers(parts)
        if numbers is None:
            why = f"not a '-'-joined list of finite numbers: {show('-'.join(parts))}"
            return column, why, [], []
        parsed.append(numbers)
    rel, worth = parsed
    if any(v <= 0 for v in worth):  # a value-0 option made slo_value_ratio divide by 0
        return "column expect_value_list", f"values must be > 0: {show(values)}", [], []
    if len(rel) != len(worth):
        return "column expect_value_list", f"{len(worth)} values for {len(rel)} deadlines", [], []
    if any(b <= a for a, b in zip(rel, rel[1:])):
        return (
            "column expect_time_list",
            "deadlines must be listed tightest first, strictly increasing",
            [],
            [],
        )
    return "", "", rel, worth


def read(table: Table, skip_bad_rows: bool) -> list[Job]:
    ids = table.unique("job_id")
    gpus = table.number("num_gpu", integer=True, minimum=0, maximum=MAX_GPUS)
    submit = table.number("submit_time", minimum=0, scale=MINUTE)
    duration = table.number("duration", minimum=0, scale=MINUTE, maximum=MAX_JOB_SECONDS)
    iterations = table.number("iterations", integer=True, minimum=0, optional=True)
    best = table.number("best_effort", integer=True, minimum=0)
    table.flag(best > 1, "column best_effort", "must be 0 or 1")
    options = _options(table, submit, best == 0)
    table.drop(gpus == 0, "num_gpu is 0")
    users, models, job_types = table.text("user"), table.text("model_name"), table.text("job_type")
    jobs = []
    for row in table.keep(skip_bad_rows):
        if best[row] == 1:
            kind = JobKind.BEST_EFFORT
        elif len(options[row]) > 1 or job_types[row] == "soft":
            kind = JobKind.SOFT_SLO
        else:
            kind = JobKind.STRICT_SLO
        jobs.append(
            Job(
                id=ids[row],
                tenant=users[row] or "default",
                gpus=int(gpus[row]),
                submit=float(submit[row]),
                kind=kind,
                deadlines=options[row],
                duration=float(duration[row]),
                iterations=None if np.isnan(iterations[row]) else int(iterations[row]),
                model=models[row] or None,
            )
        )
    return jobs
