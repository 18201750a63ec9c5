"""Traces in, jobs out: one module per format, the format detected from the header.

``read_trace(path_or_name)`` accepts a file path or the name of a bundled trace
(``philly-slo``, ``philly-mix1``, ``philly-mix2``, and the ITP traces ``itp-cluster01``..``-10``).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from chronus_py.errors import InputError
from chronus_py.model import Job
from chronus_py.readers import chronus_csv, elasticflow_csv, plain_csv
from chronus_py.readers.table import HEADER_LINE, Table, read_header

FORMATS: dict[str, ModuleType] = {
    "chronus": chronus_csv,
    "elasticflow": elasticflow_csv,
    "plain": plain_csv,
}

BUNDLED = {
    "philly-slo": "chronus/trace_job_Philly_SLO.csv",
    "philly-mix1": "chronus/trace_job_Philly_MIX1.csv",
    "philly-mix2": "chronus/trace_job_Philly_MIX2.csv",
    **{f"itp-{c}": f"elasticflow/{c}.csv" for c in ("cluster01", "cluster02", "cluster03",
                                                     "cluster05", "cluster10")},
}
DEFAULT_TRACE = "philly-slo"


@dataclass(frozen=True)
class TraceRead:
    """Jobs read from a trace, in submission order, and the rows that were not."""

    name: str
    format: str
    jobs: tuple[Job, ...]
    dropped: Counter

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


def detect(path: Path) -> str:
    """The format whose required columns the header has (Chronus first: it is the superset)."""
    header = set(read_header(path))
    for name, module in FORMATS.items():
        if header.issuperset(module.COLUMNS):
            return name
    closest = max(reversed(FORMATS), key=lambda n: len(header & set(FORMATS[n].COLUMNS)) / len(FORMATS[n].COLUMNS))
    missing = [c for c in FORMATS[closest].COLUMNS if c not in header]
    raise InputError(path, f"missing from header (closest format: {closest}, "
                     f"which also needs {', '.join(missing)})", line=HEADER_LINE, field=f"column {missing[0]}")


def read_trace(trace: str | Path, *, format: str | None = None, skip_bad_rows: bool = False) -> TraceRead:
    path = Path(trace)
    name = path.name
    if not path.exists() and str(trace) in BUNDLED:
        name, path = str(trace), bundled(str(trace))
    if not path.is_file():
        raise InputError(trace, "no such trace file or bundled trace name")
    if format is not None and format not in FORMATS:
        raise InputError(trace, f"unknown format {format!r} (have: {', '.join(FORMATS)})")
    fmt = format or detect(path)
    module = FORMATS[fmt]
    table = Table(path, module.COLUMNS)
    jobs = sorted(module.read(table, skip_bad_rows), key=lambda j: j.submit)
    return TraceRead(name=name, format=fmt, jobs=tuple(jobs), dropped=table.dropped)
