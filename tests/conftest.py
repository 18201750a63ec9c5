"""Shared helpers: write small trace files for tests."""

from __future__ import annotations

from pathlib import Path

import pytest

CHRONUS_HEADER = (
    "job_id,user,num_gpu,submit_time,iterations,model_name,duration,interval,"
    "expect_time_list,expect_value_list,best_effort,job_type"
)
ELASTICFLOW_HEADER = (
    "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,duration"
)


@pytest.fixture
def write(tmp_path: Path):
    def _write(text: str, name: str = "trace.csv") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return _write
