"""ElasticFlow / Microsoft ITP trace CSV.

Times are **seconds** and ``deadline`` is **absolute**. An empty deadline marks a best-effort job.
The last row may lack its newline (the CSV reader copes).
"""

from __future__ import annotations

import numpy as np

from chronus_py.jobs.model import DeadlineOption, Job, JobKind
from chronus_py.readers.table import Table
from placement.limits import MAX_GPUS, MAX_JOB_SECONDS

COLUMNS = (
    "job_id",
    "submission_time",
    "num_iteration",
    "model_name",
    "deadline",
    "batch_size",
    "num_gpu",
    "duration",
)


def read(table: Table, skip_bad_rows: bool) -> list[Job]:
    ids = table.unique("job_id")
    submit = table.number("submission_time", minimum=0)
    iterations = table.number("num_iteration", integer=True, minimum=0, optional=True)
    table.number("batch_size", integer=True, minimum=0, optional=True)
    gpus = table.number("num_gpu", integer=True, minimum=0, maximum=MAX_GPUS)
    duration = table.number("duration", minimum=0, maximum=MAX_JOB_SECONDS)
    deadline = table.number("deadline", optional=True)
    table.flag(deadline < submit, "column deadline", "is before submission_time")
    table.drop(gpus == 0, "num_gpu is 0")
    models = table.text("model_name")
    return [
        Job(
            id=ids[row],
            tenant="default",
            gpus=int(gpus[row]),
            submit=float(submit[row]),
            kind=JobKind.BEST_EFFORT if np.isnan(deadline[row]) else JobKind.STRICT_SLO,
            deadlines=(
                () if np.isnan(deadline[row]) else (DeadlineOption(float(deadline[row]), 1.0),)
            ),
            duration=float(duration[row]),
            iterations=None if np.isnan(iterations[row]) else int(iterations[row]),
            model=models[row] or None,
        )
        for row in table.keep(skip_bad_rows)
    ]
