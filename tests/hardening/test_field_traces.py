"""Trace format detection says what it detected and refuses near-misses; field traces (Philly job
lists, Helios, Alibaba PAI) read as published, with --columns and --time-unit."""

from __future__ import annotations

import json

import pytest

from chronus_py.cli import main
from chronus_py.errors import InputError
from chronus_py.readers import read_trace
from tests.conftest import CHRONUS_HEADER

CHRONUS_ROW = "1,vc_a,2,0,100,vgg16,30,1,60,10,0,strict\n"


def test_a_near_miss_of_the_chronus_header_is_refused(write):
    path = write(CHRONUS_HEADER.replace("iterations", "Iterations") + "\n" + CHRONUS_ROW)
    with pytest.raises(InputError) as info:
        read_trace(path)
    message = str(info.value)
    assert ":1: column Iterations: looks like a chronus trace" in message
    assert "'iterations'" in message


def test_detection_says_what_it_detected(write):
    assert (
        read_trace(write(CHRONUS_HEADER + "\n" + CHRONUS_ROW)).detected
        == "format chronus (the header has all 12 chronus columns)"
    )


def test_a_philly_job_list_replays_in_one_command(write, capsys):
    path = write(
        "timestamp,duration,num_gpus\n1506000000,600,1\n1506000100,3600,8\n1506000050,100,2\n",
        "philly.csv",
    )
    assert main(["replay", "--trace", str(path), "--nodes", "2", "--json"]) == 0
    out, err = capsys.readouterr()
    metrics = json.loads(out)
    assert metrics["jobs"] == 3 and metrics["be_jobs"] == 3
    assert "format philly" in err and "ids are line numbers" in err
    assert "first submission (1,506,000,000 s (2017-09-21 13:20:00 UTC)) is t=0" in err
    trace = read_trace(path)
    assert [(j.id, j.submit, j.gpus) for j in trace.jobs] == [
        ("2", 0.0, 1),
        ("4", 50.0, 2),
        ("3", 100.0, 8),
    ]


def test_helios_dates_and_vcs(write):
    path = write(
        "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,"
        "duration,queue\n"
        "7,u,vcA,8,16,1,COMPLETED,2020-04-01 00:00:05,2020-04-01 00:01:00,"
        "2020-04-01 01:00:00,3540,55\n"
        "8,u,vcB,0,4,1,FAILED,2020-04-01 00:10:00,2020-04-01 00:10:01,"
        "2020-04-01 00:20:00,599,1\n"
        "9,u,vcB,2,4,1,COMPLETED,2020-04-01 01:00:05,2020-04-01 01:00:05,"
        "2020-04-01 01:01:05,60,0\n"
    )
    trace = read_trace(path)
    assert trace.format == "helios" and dict(trace.dropped) == {"no GPUs": 1}
    assert [(j.id, j.tenant, j.gpus, j.submit, j.duration) for j in trace.jobs] == [
        ("7", "vcA", 8, 0.0, 3540.0),
        ("9", "vcB", 2, 3600.0, 60.0),
    ]


def test_pai_task_table_percent_gpus_and_instances(write):
    path = write(
        "job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,"
        "plan_gpu,gpu_type\n"
        "j1,worker,4,Terminated,100,700,600,29,50,V100\n"
        "j1,ps,1,Terminated,100,700,600,29,,\n"
        "j2,worker,1,Waiting,,,600,29,100,V100\n"
    )
    trace = read_trace(path)
    assert [(j.id, j.gpus, j.submit, j.duration) for j in trace.jobs] == [
        ("j1/worker", 2, 0.0, 600.0)
    ]
    assert dict(trace.dropped) == {"no GPUs": 1, "never ran (no start or end time)": 1}


def test_columns_and_time_unit_map_any_table(write):
    path = write(
        "jid,when,mins,g,queue\na,2020-01-01T00:00:00,10,1,q1\nb,2020-01-01T00:10:00,20,2,q2\n"
    )
    trace = read_trace(
        path, columns="id=jid,submit=when,duration=mins,gpus=g,tenant=queue", time_unit="min"
    )
    assert [(j.id, j.tenant, j.submit, j.duration) for j in trace.jobs] == [
        ("a", "q1", 0.0, 600.0),
        ("b", "q2", 600.0, 1200.0),
    ]
    assert "format plain (--columns)" in trace.detected


def test_epoch_milliseconds_with_time_unit(write):
    path = write(
        "job_id,submit_time,duration,num_gpu\na,1700000000000,60000,1\nb,1700000060000,1000,1\n"
    )
    trace = read_trace(path, time_unit="ms")
    assert [(j.submit, j.duration) for j in trace.jobs] == [(0.0, 60.0), (60.0, 1.0)]


@pytest.mark.parametrize(
    "columns,why",
    [
        ("nope=x", "unknown field 'nope'"),
        ("id", "expected NAME=COLUMN"),
        ("submit=missing", "column missing: missing from header"),
    ],
)
def test_bad_column_mappings(write, columns, why):
    path = write("job_id,submit_time,duration,num_gpu\na,0,10,1\n")
    with pytest.raises(InputError, match=why):
        read_trace(path, columns=columns)


def test_times_overflowing_after_the_unit_are_refused(write):
    path = write(CHRONUS_HEADER + "\n" + CHRONUS_ROW.replace(",0,100,", ",1e308,100,"))
    with pytest.raises(InputError, match="column submit_time: must be <= 1e"):
        read_trace(path)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_non_finite_deadline_values_are_refused(write, value):
    path = write(CHRONUS_HEADER + "\n" + CHRONUS_ROW.replace(",60,10,", f",60,{value},"))
    with pytest.raises(InputError, match="expect_value_list: not a '-'-joined list of finite"):
        read_trace(path)


def test_time_unit_is_refused_for_formats_with_fixed_units(write):
    with pytest.raises(InputError, match="apply to plain traces and presets"):
        read_trace(write(CHRONUS_HEADER + "\n" + CHRONUS_ROW), time_unit="ms")


def test_job_durations_are_bounded(write):
    """A 1e9-minute job meant 5e7 lease rounds (found by benchmarks/fuzz.py)."""
    path = write(CHRONUS_HEADER + "\n" + CHRONUS_ROW.replace(",vgg16,30,", ",vgg16,1e9,"))
    with pytest.raises(InputError, match="column duration: must be <= 3.16224e"):
        read_trace(path)


def test_zero_deadline_value_is_refused(write):
    """slo_value_ratio divided by a job's zero value (found by benchmarks/fuzz.py)."""
    path = write(CHRONUS_HEADER + "\n" + CHRONUS_ROW.replace(",60,10,", ",60,0,"))
    with pytest.raises(InputError, match="expect_value_list: values must be > 0"):
        read_trace(path)
