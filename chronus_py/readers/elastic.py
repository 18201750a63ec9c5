"""A trace read as elastic jobs: the same formats, detection, ``--columns`` and ``--time-unit`` as
a rigid replay, plus what an elastic job needs beyond a rigid one (iterations, global batch size).

Every format is read through a column mapping (:class:`~chronus_py.readers.field_csv.FieldFormat`):
the ITP traces through :data:`ITP`, ElasticFlow's Philly trace through its preset, a plain trace
through ``--columns``. A job may run on any power-of-two size its throughput curve allows
(:func:`chronus_py.jobs.sizes.make_job`); a row whose ``elastic`` column is 0, or whose
(model, batch size) has no curve, is rigid.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from chronus_py.errors import InputError
from chronus_py.inputs import read_text
from chronus_py.jobs.model import Job
from chronus_py.jobs.sizes import make_job
from chronus_py.jobs.throughputs import ThroughputTable
from chronus_py.readers import Chosen, TraceRead, choose_format, describe, trace_path
from chronus_py.readers.field_csv import TIME_UNITS, FieldFormat, read_ids, read_times
from chronus_py.readers.table import HEADER_LINE, Table, read_header
from placement.limits import MAX_GPUS, MAX_JOB_SECONDS

# The ITP traces' columns as a mapping; times as published (ElasticFlow's runs start from them).
ITP = FieldFormat(
    "elasticflow",
    {
        "id": "job_id",
        "submit": "submission_time",
        "iterations": "num_iteration",
        "model": "model_name",
        "deadline": "deadline",
        "batch": "batch_size",
        "gpus": "num_gpu",
        "duration": "duration",
    },
    {"elastic": "elastic"},
    shift=False,
)
NEEDED = ("submit", "deadline", "iterations", "model", "batch", "gpus", "duration")


def read_elastic_trace(
    trace: str | Path,
    throughputs: ThroughputTable,
    *,
    cluster_gpus: int,
    format: str | None = None,
    columns: str | None = None,
    time_unit: str | None = None,
    skip_bad_rows: bool = False,
) -> TraceRead:
    """Read a trace as elastic jobs for a cluster of ``cluster_gpus`` (a job never grows past it;
    rows asking for more are dropped and counted)."""
    name, path = trace_path(trace)
    text = read_text(path, what="trace")
    header = read_header(path, text)
    chosen = choose_format(path, header, format=format, columns=columns, time_unit=time_unit)
    mapping = elastic_mapping(path, chosen)
    table = Table(path, mapping.COLUMNS, text)
    jobs = _read(mapping, table, throughputs, cluster_gpus, skip_bad_rows)
    if not jobs:
        raise InputError(path, "no job left to replay")
    return TraceRead(
        name=name,
        format=chosen.name,
        jobs=tuple(jobs),
        dropped=table.dropped,
        detected=describe(Chosen(chosen.name, chosen.why, mapping), header, table),
    )


def elastic_mapping(path: Path, chosen: Chosen) -> FieldFormat:
    """The mapping an elastic replay reads the chosen format through; one line if it cannot."""
    if chosen.name == "elasticflow":
        return ITP
    if chosen.mapping is None:
        raise InputError(
            path,
            f"format {chosen.name} has no batch size or iteration count for elastic replay; "
            "map them with --columns (iterations=COLUMN,batch=COLUMN,...)",
            line=HEADER_LINE,
        )
    return chosen.mapping


def _read(
    fmt: FieldFormat,
    table: Table,
    throughputs: ThroughputTable,
    cluster_gpus: int,
    skip_bad_rows: bool,
) -> list[Job]:
    cols = fmt.mapping(list(table.df.columns))
    for name in NEEDED:
        if name not in cols:
            raise InputError(
                table.path,
                f"elastic replay needs {name} mapped to a column: --columns {name}=COLUMN",
                line=HEADER_LINE,
                field=name,
            )
    unit = TIME_UNITS[fmt.time_unit]
    ids = read_ids(table, cols.get("id"))
    submit = read_times(table, cols["submit"], unit)
    iterations = table.number(cols["iterations"], minimum=0)
    batch = table.number(cols["batch"], integer=True, minimum=1)
    gpus = table.number(cols["gpus"], integer=True, minimum=0, maximum=MAX_GPUS)
    duration = table.number(cols["duration"], minimum=0, scale=unit, maximum=MAX_JOB_SECONDS)
    deadline = read_times(table, cols["deadline"], unit)
    elastic = table.number(cols["elastic"], integer=True, minimum=0) if "elastic" in cols else None
    models = table.text(cols["model"])
    table.flag(models == "", f"column {cols['model']}", "empty")
    table.flag(deadline < submit, f"column {cols['deadline']}", f"is before {cols['submit']}")
    table.drop(gpus == 0, f"{cols['gpus']} is 0")
    table.drop(
        (iterations == 0) | (duration == 0),
        f"no work ({cols['iterations']} or {cols['duration']} is 0)",
    )
    table.drop(gpus > cluster_gpus, f"{cols['gpus']} exceeds the cluster")
    keep = table.keep(skip_bad_rows)
    origin = float(np.min(submit[keep])) if len(keep) and fmt.shift else 0.0
    table.origin = origin
    jobs = [
        make_job(
            str(ids[r]),
            float(submit[r] - origin),
            float(deadline[r] - origin),
            float(iterations[r]),
            str(models[r]),
            int(batch[r]),
            int(gpus[r]),
            float(duration[r]),
            throughputs,
            elastic=elastic is None or bool(elastic[r]),
            limit=cluster_gpus,
        )
        for r in keep
    ]
    jobs.sort(key=lambda j: (j.submit, j.id))
    return jobs
