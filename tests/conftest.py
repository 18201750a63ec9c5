"""Shared helpers: write small trace files for tests; how xdist groups the suite."""

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


@pytest.hookimpl(optionalhook=True)  # an xdist hook: only called when xdist distributes
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` with the daemon tests grouped by directory (``daemon_groups``)."""
    if config.getvalue("dist") == "loadgroup":
        from daemon_groups import DaemonGroupScheduling

        return DaemonGroupScheduling(config, log)
    return None
