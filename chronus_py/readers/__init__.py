"""Traces in, jobs out: one module per format, the format detected from the header.

``read_trace(path_or_name)`` accepts a file path or the name of a bundled trace
(``philly-slo``, ``philly-mix1``, ``philly-mix2``, the ITP traces ``itp-cluster01``..``-10`` and
ElasticFlow's Philly trace ``elasticflow-philly``).
Field traces (Philly job lists, Helios, Alibaba PAI) are read through column mappings
(``field_csv``); ``TraceRead.detected`` says which format was used and why.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from chronus_py.errors import InputError
from chronus_py.inputs import read_text
from chronus_py.jobs.model import Job
from chronus_py.readers import chronus_csv, elasticflow_csv, plain_csv
from chronus_py.readers.detect import detect_format
from chronus_py.readers.field_csv import (
    PLAIN_MAPPING,
    PRESETS,
    FieldFormat,
    check_time_unit,
    describe_origin,
    parse_columns,
)
from chronus_py.readers.table import Table, read_header

# Detection order: the first format whose columns the header has wins (Chronus and ElasticFlow's
# Philly trace first: their headers are supersets of plain), and a near-miss of an earlier format
# is refused (readers/detect.py).
FORMATS: dict[str, ModuleType | FieldFormat] = {
    "chronus": chronus_csv,
    "elasticflow": elasticflow_csv,
    "elasticflow-philly": PRESETS["elasticflow-philly"],
    "plain": plain_csv,
    **PRESETS,
}

BUNDLED = {
    "philly-slo": "chronus/trace_job_Philly_SLO.csv",
    "philly-mix1": "chronus/trace_job_Philly_MIX1.csv",
    "philly-mix2": "chronus/trace_job_Philly_MIX2.csv",
    **{
        f"itp-{c}": f"elasticflow/{c}.csv"
        for c in ("cluster01", "cluster02", "cluster03", "cluster05", "cluster10")
    },
    "elasticflow-philly": "elasticflow/philly/philly_103959.csv",
}
DEFAULT_TRACE = "philly-slo"


@dataclass(frozen=True)
class TraceRead:
    """Jobs read from a trace, in submission order, and the rows that were not (elastic jobs when
    read by :func:`chronus_py.readers.elastic.read_elastic_trace`)."""

    name: str
    format: str
    jobs: tuple[Job, ...]
    dropped: Counter
    detected: str = ""  # how the format was chosen and how columns and times were read

    @property
    def dropped_rows(self) -> int:
        return sum(self.dropped.values())


def traces_dir() -> Path:
    """Where the bundled traces are: inside an installed wheel, or ``traces/`` of a checkout."""
    installed = Path(__file__).resolve().parent.parent / "_traces"
    return installed if installed.is_dir() else Path(__file__).resolve().parents[2] / "traces"


def bundled(name: str) -> Path:
    if name not in BUNDLED:
        raise InputError(name, f"no bundled trace of that name (have: {', '.join(BUNDLED)})")
    return traces_dir() / BUNDLED[name]


def trace_path(trace: str | Path) -> tuple[str, Path]:
    """(name, file) of a trace file or bundled trace name; refuses anything else. A pipe is a
    file too (``--trace <(zcat t.csv.gz)``): the trace is read once, start to end."""
    path = Path(trace)
    if not path.exists() and str(trace) in BUNDLED:
        return str(trace), bundled(str(trace))
    if path.is_dir():
        raise InputError(trace, "is a directory, not a trace file")
    if not path.exists():
        raise InputError(trace, "no such trace file or bundled trace name")
    return path.name, path


def detect(path: Path) -> str:
    """The name of the format the header is in (see :func:`detect_format`)."""
    return detect_format(path, read_header(path), FORMATS).name


@dataclass(frozen=True)
class Chosen:
    """The format a trace is read in, why, and the column mapping when it is read through one."""

    name: str
    why: str
    mapping: FieldFormat | None


def choose_format(
    path: Path,
    header: list[str],
    *,
    format: str | None = None,
    columns: str | None = None,
    time_unit: str | None = None,
) -> Chosen:
    """``--format`` if given, else plain when ``--columns`` is, else the detected format; with
    ``--columns``/``--time-unit`` the plain mapping or the preset adjusted by them. One rule for
    rigid and elastic replay alike."""
    if format is not None and format not in FORMATS:
        raise InputError(path, f"unknown format {format[:40]!r} (have: {', '.join(FORMATS)})")
    check_time_unit(time_unit)
    if format is not None:
        name, why = format, "--format"
    elif columns is not None:
        name, why = "plain", "--columns"
    else:
        found = detect_format(path, header, FORMATS)
        name, why = found.name, found.why
    mapping = FORMATS[name] if isinstance(FORMATS[name], FieldFormat) else None
    if columns is not None or time_unit is not None:
        if name not in PRESETS and name != "plain":
            raise InputError(
                "--columns/--time-unit",
                f"apply to plain traces and presets ({', '.join(PRESETS)}), not {name}",
            )
        base = PRESETS.get(name, PLAIN_MAPPING)
        mapping = base.with_columns(parse_columns(columns) if columns else {}, time_unit)
    return Chosen(name, why, mapping)


def describe(chosen: Chosen, header: list[str], table: Table) -> str:
    """How the format was chosen and how columns and times were read, in words."""
    detected = f"format {chosen.name} ({chosen.why})"
    if chosen.mapping is not None:
        detected += f": {chosen.mapping.describe(header)}"
    if table.delimiter != ",":
        detected += f"; fields separated by {table.delimiter!r}"
    shift = describe_origin(table.origin)
    return f"{detected}; {shift}" if shift else detected


def read_trace(
    trace: str | Path,
    *,
    format: str | None = None,
    skip_bad_rows: bool = False,
    columns: str | None = None,
    time_unit: str | None = None,
) -> TraceRead:
    """Read a trace. ``columns`` (``NAME=COLUMN,...``) and ``time_unit`` read a plain trace, or
    adjust a preset, through a column mapping (:mod:`chronus_py.readers.field_csv`)."""
    name, path = trace_path(trace)
    text = read_text(path, what="trace")
    header = read_header(path, text)
    chosen = choose_format(path, header, format=format, columns=columns, time_unit=time_unit)
    module = chosen.mapping or FORMATS[chosen.name]
    table = Table(path, module.COLUMNS, text)
    jobs = sorted(module.read(table, skip_bad_rows), key=lambda j: j.submit)
    return TraceRead(
        name=name,
        format=chosen.name,
        jobs=tuple(jobs),
        dropped=table.dropped,
        detected=describe(chosen, header, table),
    )
