"""Field traces as they are published: any job table whose columns are mapped onto a job's fields.

Clusters publish their own schemas (Philly job lists, Helios ``cluster_log.csv``, Alibaba PAI task
tables, the PAI-2023 ``openb`` pod list), with dates or epoch times in various units and sometimes
no job id. A :class:`FieldFormat` maps columns to fields:

    id        job id; ``a+b`` joins columns (PAI: job_name+task_name); absent: the file line number
    submit    submission time (absent: start)
    duration  run time (absent: end - start)
    start/end when the job ran (start defaults to submit)
    gpus      GPU count (``gpu_scale`` converts e.g. PAI's percent of a GPU; rounded up)
    instances multiplies gpus (PAI's inst_num)
    tenant, deadline (absolute, like submit), model
    iterations  training iterations (carried on the job; elastic replay progresses by them)
    batch     global batch size (elastic replay: picks the throughput curve)
    elastic   0 makes a job rigid in elastic replay (default 1)

Times are numbers in ``time_unit`` or dates (``2020-04-01 00:00:05``, ISO 8601; no zone means UTC),
and are shifted so that the first submission is t=0: epoch times become a replay that starts at
once. Durations are numbers in ``time_unit``. Rows asking for no GPUs are dropped and counted.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, replace

import numpy as np

from chronus_py.errors import InputError
from chronus_py.jobs.model import DeadlineOption, Job, JobKind
from chronus_py.readers.table import HEADER_LINE, Table
from placement.limits import MAX_GPUS, MAX_JOB_SECONDS, MAX_SECONDS, too_large

FIELDS = (
    "id",
    "submit",
    "duration",
    "start",
    "end",
    "gpus",
    "instances",
    "tenant",
    "deadline",
    "model",
    "iterations",
    "batch",
    "elastic",
)
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9, "min": 60.0, "h": 3600.0, "d": 86400.0}


@dataclass(frozen=True)
class FieldFormat:
    """A column mapping. ``required`` columns identify the format when detecting it; ``optional``
    ones are used when the header has them."""

    name: str
    required: dict[str, str]
    optional: dict[str, str] = field(default_factory=dict)
    gpu_scale: float = 1.0
    time_unit: str = "s"
    note: str = ""
    shift: bool = True  # shift times so the first submission is t=0 (False: as published)

    @property
    def COLUMNS(self) -> tuple[str, ...]:  # noqa: N802 -- the attribute every format module has
        return tuple(c for spec in self.required.values() for c in spec.split("+"))

    def with_columns(self, given: dict[str, str], time_unit: str | None) -> FieldFormat:
        """This mapping with ``--columns`` overriding it (every given column becomes required)."""
        optional = {k: v for k, v in self.optional.items() if k not in given}
        required = {k: v for k, v in self.required.items() if k not in given} | given
        return replace(
            self, required=required, optional=optional, time_unit=time_unit or self.time_unit
        )

    def mapping(self, header: list[str]) -> dict[str, str]:
        present = set(header)
        out = dict(self.required)
        out.update(
            {
                k: v
                for k, v in self.optional.items()
                if k not in out and all(c in present for c in v.split("+"))
            }
        )
        return out

    def describe(self, header: list[str]) -> str:
        columns = ", ".join(f"{k}={v}" for k, v in self.mapping(header).items())
        ids = "" if "id" in self.mapping(header) else "; ids are line numbers"
        return f"{columns}; numeric times in {self.time_unit}{ids}"

    def read(self, table: Table, skip_bad_rows: bool) -> list[Job]:
        return _read(self, table, skip_bad_rows)


PRESETS: dict[str, FieldFormat] = {
    "elasticflow-philly": FieldFormat(
        "elasticflow-philly",
        {
            "id": "job_id",
            "submit": "submit_time",
            "iterations": "iteration",
            "model": "model_name",
            "deadline": "ddl",
            "batch": "batch_size",
            "gpus": "num_gpu",
            "duration": "duration",
        },
        {},
        note="ElasticFlow's Philly trace (traces_for_ElasticFlow/philly_103959.csv): seconds, "
        "ddl absolute; real_iteration and real_duration are not read (ElasticFlow's simulator "
        "does not read them either)",
        shift=False,
    ),
    "philly": FieldFormat(
        "philly",
        {"submit": "timestamp", "duration": "duration", "gpus": "num_gpus"},
        {"tenant": "cluster", "id": "jobid"},
        note="Philly job list (timestamp,duration,num_gpus[,gpu_time,cluster]); seconds",
    ),
    "helios": FieldFormat(
        "helios",
        {"id": "job_id", "submit": "submit_time", "duration": "duration", "gpus": "gpu_num"},
        {"tenant": "vc"},
        note="Helios cluster_log.csv: dates, duration in seconds, tenant = VC",
    ),
    "pai": FieldFormat(
        "pai",
        {
            "id": "job_name+task_name",
            "start": "start_time",
            "end": "end_time",
            "gpus": "plan_gpu",
            "instances": "inst_num",
        },
        {},
        gpu_scale=0.01,
        note="Alibaba PAI 2020 pai_task_table: plan_gpu in percent of a GPU per instance; "
        "submitted when started",
    ),
    "openb": FieldFormat(
        "openb",
        {
            "id": "name",
            "submit": "creation_time",
            "start": "scheduled_time",
            "end": "deletion_time",
            "gpus": "num_gpu",
        },
        {},
        note="Alibaba PAI 2023 openb pod list; seconds",
    ),
}
PLAIN_MAPPING = FieldFormat(
    "plain",
    {"id": "job_id", "submit": "submit_time", "duration": "duration", "gpus": "num_gpu"},
    {"tenant": "tenant", "deadline": "deadline", "model": "model_name"},
)


def parse_columns(text: str) -> dict[str, str]:
    """``NAME=COLUMN,...`` -> {field: column}; unknown fields, and fields given twice, are refused
    by name."""
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, eq, column = part.partition("=")
        name, column = name.strip(), column.strip()
        if not eq or not column:
            raise InputError("--columns", f"expected NAME=COLUMN, got {part[:40]!r}")
        if name not in FIELDS:
            raise InputError(
                "--columns", f"unknown field {name[:40]!r} (have: {', '.join(FIELDS)})"
            )
        if name in out:  # the last one used to win without a word
            raise InputError("--columns", f"field {name!r} is mapped twice")
        out[name] = column
    if not out:
        raise InputError("--columns", "expected NAME=COLUMN,...")
    return out


def check_time_unit(unit: str | None) -> str | None:
    if unit is not None and unit not in TIME_UNITS:
        raise InputError(
            "--time-unit", f"unknown unit {unit[:20]!r} (have: {', '.join(TIME_UNITS)})"
        )
    return unit


def _read(fmt: FieldFormat, table: Table, skip_bad_rows: bool) -> list[Job]:
    header = list(table.df.columns)
    cols = fmt.mapping(header)
    if "submit" not in cols and "start" not in cols:
        raise InputError(
            table.path,
            "map submit (or start) to a column with --columns",
            line=HEADER_LINE,
            field="submit",
        )
    if "gpus" not in cols:
        raise InputError(
            table.path, "map gpus to a column with --columns", line=HEADER_LINE, field="gpus"
        )
    if "duration" not in cols and "end" not in cols:
        raise InputError(
            table.path,
            "map duration (or end) to a column with --columns",
            line=HEADER_LINE,
            field="duration",
        )
    unit = TIME_UNITS[fmt.time_unit]
    n = len(table)
    start = read_times(table, cols["start"], unit, optional=True) if "start" in cols else None
    submit = read_times(table, cols["submit"], unit) if "submit" in cols else start
    if "duration" in cols:
        duration = table.number(cols["duration"], minimum=0, scale=unit, maximum=MAX_JOB_SECONDS)
    else:
        end = read_times(table, cols["end"], unit, optional=True)
        begin = submit if start is None else start
        duration = end - begin
        table.flag(duration < 0, f"column {cols['end']}", "is before the start")
        table.flag(
            duration > MAX_JOB_SECONDS,
            f"column {cols['end']}",
            f"the job would run longer than {MAX_JOB_SECONDS:,.0f} seconds",
        )
        table.drop(np.isnan(duration), "never ran (no start or end time)")
    gpus = _gpus(table, fmt, cols)
    deadline = (
        read_times(table, cols["deadline"], unit, optional=True)
        if "deadline" in cols
        else np.full(n, np.nan)
    )
    table.flag(deadline < submit, f"column {cols.get('deadline')}", "is before the submission")
    table.drop(gpus == 0, "no GPUs")
    ids = read_ids(table, cols.get("id"))
    tenants = _text(table, cols.get("tenant"), n)
    models = _text(table, cols.get("model"), n)
    iterations = (
        table.number(cols["iterations"], integer=True, minimum=0, optional=True)
        if "iterations" in cols
        else np.full(n, np.nan)
    )
    keep = table.keep(skip_bad_rows)
    origin = float(np.min(submit[keep])) if len(keep) and fmt.shift else 0.0
    jobs = []
    for row in keep:
        slo = not np.isnan(deadline[row])
        jobs.append(
            Job(
                id=ids[row],
                tenant=tenants[row] or "default",
                gpus=int(gpus[row]),
                submit=float(submit[row] - origin),
                kind=JobKind.STRICT_SLO if slo else JobKind.BEST_EFFORT,
                deadlines=(DeadlineOption(float(deadline[row] - origin), 1.0),) if slo else (),
                duration=float(duration[row]),
                iterations=None if np.isnan(iterations[row]) else int(iterations[row]),
                model=models[row] or None,
            )
        )
    table.origin = origin
    return jobs


def read_times(table: Table, column: str, unit: float, *, optional: bool = False) -> np.ndarray:
    """Seconds: numbers in ``unit``, or dates (as seconds since the epoch, UTC)."""
    import pandas as pd  # here, not at import: see table.py

    raw = table.text(column)
    values = pd.to_numeric(pd.Series(raw), errors="coerce").to_numpy(dtype=float)
    with np.errstate(over="ignore", invalid="ignore"):
        values = values * unit
    words = np.isnan(values) & (raw != "")
    if words.any():
        values[words] = _dates(raw[words])
    empty = raw == ""
    where = f"column {column}"
    table.flag(
        np.isnan(values) & ~(empty & optional),
        where,
        "not a number or date:",
        lambda row: repr(str(raw[row])[:40]),
    )
    table.flag(
        ~np.isnan(values) & ~(np.abs(values) <= MAX_SECONDS),
        where,
        too_large(0, MAX_SECONDS) + " seconds",
    )
    table.flag(values < 0, where, "must be >= 0")
    return values


def _dates(raw: np.ndarray) -> np.ndarray:
    """Seconds since the epoch; NaN where a cell is not a date pandas can represent. ISO 8601
    cells are read as such, and the others all in the one format guessed from the first of them
    that has one: guessed cell by cell, ``01/02/2020`` was read month-first and ``13/02/2020``
    day-first in the same column, and the jobs came out of order without a word."""
    seconds = _parse_dates(raw, "ISO8601")
    rest = np.flatnonzero(np.isnan(seconds))
    if len(rest):
        seconds[rest] = _parse_dates(raw[rest], _guess_format(raw[rest]))
    return seconds


def _guess_format(raw: np.ndarray, tries: int = 1000) -> str | None:
    """The date format of the first of ``raw``'s first ``tries`` cells that has one."""
    from pandas.tseries.api import guess_datetime_format

    with warnings.catch_warnings():  # it warns when it guesses day-first, which is the point
        warnings.simplefilter("ignore")
        return next(filter(None, (guess_datetime_format(str(c)) for c in raw[:tries])), None)


def _parse_dates(raw: np.ndarray, format: str | None) -> np.ndarray:
    """``raw`` in ``format`` as seconds since the epoch (UTC without a zone); NaN where a cell is
    not in it or beyond pandas' dates."""
    import pandas as pd

    if format is None:
        return np.full(len(raw), np.nan)
    try:
        parsed = pd.to_datetime(
            pd.Series(raw, dtype=object), errors="coerce", format=format, utc=True
        )
        seconds = (parsed - pd.Timestamp(0, tz="UTC")).dt.total_seconds()
        return seconds.to_numpy(dtype=float, copy=True)
    except (ValueError, OverflowError, TypeError):  # pandas raises for some out-of-range dates
        return np.full(len(raw), np.nan)


def _gpus(table: Table, fmt: FieldFormat, cols: dict[str, str]) -> np.ndarray:
    scaled = fmt.gpu_scale != 1.0
    gpus = table.number(
        cols["gpus"],
        minimum=0,
        integer=not scaled,
        maximum=MAX_GPUS / fmt.gpu_scale,
        optional=scaled,
    )
    gpus = np.nan_to_num(gpus * fmt.gpu_scale, nan=0.0)
    if "instances" in cols:
        count = table.number(cols["instances"], minimum=0, integer=True, maximum=MAX_GPUS)
        gpus = gpus * np.nan_to_num(count)
    gpus = np.ceil(gpus - 1e-9)
    table.flag(gpus > MAX_GPUS, f"column {cols['gpus']}", too_large(0, MAX_GPUS) + " GPUs")
    return np.minimum(gpus, MAX_GPUS)


def read_ids(table: Table, spec: str | None) -> np.ndarray:
    if spec is None:
        return np.array([str(table.line(r)) for r in range(len(table))], dtype=object)
    parts = [table.text(c) for c in spec.split("+")]
    ids = (
        parts[0] if len(parts) == 1 else np.array(["/".join(p) for p in zip(*parts)], dtype=object)
    )
    where = f"column {spec}"
    table.flag(ids == "", where, "empty")
    first_seen: dict[str, int] = {}
    for row, value in enumerate(ids):
        if value in first_seen:
            table.flag_row(
                row,
                where,
                "duplicate id",
                f"{value[:40]!r} (first on line {table.line(first_seen[value])})",
            )
        else:
            first_seen[value] = row
    return ids


def _text(table: Table, column: str | None, n: int) -> np.ndarray:
    return table.text(column) if column is not None else np.full(n, "", dtype=object)


def describe_origin(origin: float) -> str:
    """How the times were shifted, in words (empty when they start at 0)."""
    if origin == 0 or not math.isfinite(origin):
        return ""
    import pandas as pd

    try:
        when = pd.Timestamp(origin, unit="s", tz="UTC") if origin > 86400 * 365 else None
    except (ValueError, OverflowError):  # beyond pandas' dates (year 2262)
        when = None
    at = f"{origin:,.0f} s" + (f" ({when:%Y-%m-%d %H:%M:%S} UTC)" if when is not None else "")
    return f"times shifted so the first submission ({at}) is t=0"
