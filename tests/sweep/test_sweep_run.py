from pathlib import Path

import numpy as np
import pytest

from chronus_py.engine.setup import scale_load
from chronus_py.jobs.model import DeadlineOption, Job, JobKind
from chronus_py.sweep import RunConfig, run, safe_run, same_metrics
from chronus_py.sweep.store import COLUMNS


def config(trace: Path, **kw) -> RunConfig:
    return RunConfig(trace=str(trace), **{"policy": "srtf", "nodes": 2, **kw})


def test_scale_load_compresses_submits_and_keeps_relative_deadlines():
    job = Job(
        "a",
        "t",
        1,
        1000.0,
        JobKind.SOFT_SLO,
        (DeadlineOption(1500.0, 2), DeadlineOption(3000.0, 1)),
        100.0,
    )
    (fast,) = scale_load([job], 2.0)
    assert fast.submit == 500.0
    assert [d.at - fast.submit for d in fast.deadlines] == [500.0, 2000.0]
    assert [d.value for d in fast.deadlines] == [2, 1] and fast.duration == 100.0
    assert scale_load([job], 1.0) == (job,)


def test_row_has_every_column_and_the_run_parameters(tiny_trace):
    result = run(config(tiny_trace, load=1.5))
    assert set(result.row) == set(COLUMNS)
    assert result.row["load"] == 1.5 and result.row["error"] == "" and result.row["jobs"] == 120
    assert not result.failed


def test_higher_load_shortens_the_trace(tiny_trace):
    slow, fast = run(config(tiny_trace, load=0.5)).row, run(config(tiny_trace, load=2.0)).row
    assert fast["makespan"] < slow["makespan"]
    assert fast["gpu_utilization"] > slow["gpu_utilization"]


def test_hourly_utilisation_accounts_for_every_busy_gpu_second(tiny_trace):
    """Exact, not approximated: the hourly series sums to the busy GPU time of the run,
    preemptions included (srtf preempts on this trace)."""
    result = run(config(tiny_trace, policy="srtf"))
    row, hourly = result.row, np.asarray(result.series["hourly_utilization"])
    assert row["preemptions_per_job"] > 0
    busy = row["gpu_utilization"] * row["gpus"] * row["makespan"]
    assert hourly.sum() * row["gpus"] * 3600 == pytest.approx(busy, rel=1e-4)
    assert hourly.max() <= 1.0 + 1e-9 and hourly.min() >= 0


def test_series_agree_with_the_metrics(tiny_trace):
    result = run(config(tiny_trace, policy="edf"))
    row, series = result.row, result.series
    pct = series["be_jct_percentiles"]
    assert len(pct) == 101 and pct[50] == pytest.approx(row["be_p50_jct"], abs=1e-3)
    days = series["daily_deadline_ratio"]
    assert sum(n for _, _, n in days) == row["slo_jobs"]
    assert sum(r * n for _, r, n in days) / row["slo_jobs"] == pytest.approx(
        row["slo_deadline_ratio"]
    )
    counts = series["preemption_counts"]
    assert sum(counts) == row["jobs"]
    assert sum(k * n for k, n in enumerate(counts)) / row["jobs"] == pytest.approx(
        row["preemptions_per_job"]
    )


def test_estimation_error_depends_on_sigma_and_seed_only(tiny_trace):
    base = run(config(tiny_trace)).row
    a = run(config(tiny_trace, sigma=0.5, seed=1)).row
    again = run(config(tiny_trace, sigma=0.5, seed=1)).row
    other = run(config(tiny_trace, sigma=0.5, seed=2)).row
    assert same_metrics(a, again)
    assert a["avg_jct"] != base["avg_jct"] and a["avg_jct"] != other["avg_jct"]


def test_chronus_lease_reaches_the_policy(tiny_trace):
    rows = [
        run(config(tiny_trace, policy="chronus", lease_min=m, options='{"backend": "greedy"}')).row
        for m in (5.0, 60.0)
    ]
    assert rows[0]["guaranteed_jobs"] > 0
    assert not same_metrics(
        {**rows[0], "run": "", "lease_min": 0}, {**rows[1], "run": "", "lease_min": 0}
    )


def test_a_failing_run_becomes_an_error_row(tmp_path):
    result = safe_run(config(tmp_path / "missing.csv"))
    assert result.failed and "no such trace file" in result.row["error"]
    assert result.row["slo_deadline_ratio"] is None and result.row["trace"].endswith("missing.csv")
    assert "\n" not in result.row["error"]
