"""A plain jobs CSV for Philly/Helios/Tiresias-style traces.

Required ``job_id,submit_time,duration,num_gpu``; optional ``tenant``, ``deadline`` (absolute),
``model_name``. Times are **seconds**, or dates (``2020-04-01 00:00:05``, ISO 8601; no zone means
UTC) read as seconds since the epoch, as ``--columns`` reads them: a file must not read with
``--time-unit s`` and be refused without it. Times are kept as published (no shift). An empty or
absent deadline marks a best-effort job.
"""

from __future__ import annotations

import numpy as np

from chronus_py.jobs.model import DeadlineOption, Job, JobKind
from chronus_py.readers.field_csv import read_times
from chronus_py.readers.table import Table
from placement.limits import MAX_GPUS, MAX_JOB_SECONDS

COLUMNS = ("job_id", "submit_time", "duration", "num_gpu")


def read(table: Table, skip_bad_rows: bool) -> list[Job]:
    ids = table.unique("job_id")
    submit = read_times(table, "submit_time", 1.0)
    duration = table.number("duration", minimum=0, maximum=MAX_JOB_SECONDS)
    gpus = table.number("num_gpu", integer=True, minimum=0, maximum=MAX_GPUS)
    n = len(table)
    deadline = (
        read_times(table, "deadline", 1.0, optional=True)
        if table.has("deadline")
        else np.full(n, np.nan)
    )
    table.flag(deadline < submit, "column deadline", "is before submit_time")
    table.drop(gpus == 0, "num_gpu is 0")
    tenants = table.text("tenant") if table.has("tenant") else np.full(n, "", dtype=object)
    models = table.text("model_name") if table.has("model_name") else np.full(n, "", dtype=object)
    return [
        Job(
            id=ids[row],
            tenant=tenants[row] or "default",
            gpus=int(gpus[row]),
            submit=float(submit[row]),
            kind=JobKind.BEST_EFFORT if np.isnan(deadline[row]) else JobKind.STRICT_SLO,
            deadlines=(
                () if np.isnan(deadline[row]) else (DeadlineOption(float(deadline[row]), 1.0),)
            ),
            duration=float(duration[row]),
            model=models[row] or None,
        )
        for row in table.keep(skip_bad_rows)
    ]
