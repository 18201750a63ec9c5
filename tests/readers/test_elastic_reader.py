"""Traces read as elastic jobs: the formats, detection, --columns and --time-unit of a rigid replay;
ElasticFlow's Philly trace format as a preset."""

from __future__ import annotations

import pytest

from chronus_py.errors import InputError
from chronus_py.jobs.model import JobKind
from chronus_py.jobs.throughputs import read_throughputs
from chronus_py.readers import read_trace, traces_dir
from chronus_py.readers.elastic import read_elastic_trace

A100 = read_throughputs(traces_dir() / "elasticflow" / "throughputs_A100")
PHILLY_HEADER = (
    "job_id,submit_time,real_iteration,model_name,ddl,batch_size,num_gpu,real_duration,"
    "duration,iteration"
)
# ElasticFlow's Philly format: ddl absolute, seconds; real_* are not read (set apart here so a
# reader that took them would be caught)
PHILLY = f"{PHILLY_HEADER}\n0,100,1,bert,900,64,4,1,400,1000\n1,150,1,gpt2,5000,128,1,1,2000,3000\n"
RENAMED = "jid,t,iters,net,due,bs,g,secs\na,2,1000,bert,12,64,4,5\nb,3,3000,gpt2,60,128,1,30\n"
RENAMED_COLUMNS = (
    "id=jid,submit=t,iterations=iters,model=net,deadline=due,batch=bs,gpus=g,duration=secs"
)


def test_elasticflow_philly_is_detected_as_its_preset_not_as_plain(write):
    trace = read_trace(write(PHILLY))
    assert trace.format == "elasticflow-philly"
    a, b = trace.jobs
    assert (a.submit, a.duration, a.gpus, a.iterations, a.model) == (100, 400, 4, 1000, "bert")
    assert a.kind is JobKind.STRICT_SLO and a.deadlines[0].at == 900  # absolute, not shifted
    assert b.deadlines[0].at == 5000 and b.iterations == 3000
    assert "deadline=ddl" in trace.detected and "shifted" not in trace.detected


def test_elasticflow_philly_reads_as_elastic_jobs(write):
    trace = read_elastic_trace(write(PHILLY), A100, cluster_gpus=64)
    assert trace.format == "elasticflow-philly"
    a, b = trace.jobs
    assert (a.submit, a.first_deadline, a.iterations, a.batch, a.gpus) == (100, 900, 1000, 64, 4)
    assert a.sizes == (1, 2, 4, 8) and a.rates == tuple(A100.curve("bert", 64)[n] for n in a.sizes)
    assert (b.model, b.batch, b.first_deadline, b.iterations) == ("gpt2", 128, 5000, 3000)


def test_bundled_elasticflow_philly_trace_reads_every_row_both_ways():
    rigid = read_trace("elasticflow-philly")
    elastic = read_elastic_trace("elasticflow-philly", A100, cluster_gpus=256)
    assert len(rigid.jobs) == len(elastic.jobs) == 876 and not rigid.dropped
    assert rigid.format == elastic.format == "elasticflow-philly"
    assert all(not j.rigid for j in elastic.jobs)  # every (model, batch) has a curve


def test_renamed_columns_read_through_columns_and_time_unit(write):
    trace = read_elastic_trace(
        write(RENAMED), A100, cluster_gpus=64, columns=RENAMED_COLUMNS, time_unit="min"
    )
    assert trace.format == "plain" and "iterations=iters" in trace.detected
    a, b = trace.jobs
    # minutes to seconds, then shifted so the first submission is t=0
    assert (a.id, a.submit, a.first_deadline, a.iterations, a.batch) == ("a", 0, 600, 1000, 64)
    assert (b.submit, b.first_deadline, b.model) == (60, 3480, "gpt2")
    assert "shifted" in trace.detected


@pytest.mark.parametrize(
    "columns, message",
    [
        (RENAMED_COLUMNS.replace("t,", "time,"), ":1: column time: missing from header"),
        ("id=jid,submit=t,deadline=due,gpus=g,duration=secs", ":1: iterations: elastic replay"),
        ("batches=bs", "--columns: unknown field 'batches'"),
    ],
)
def test_a_wrong_mapping_is_one_line_naming_file_and_column(write, columns, message):
    path = write(RENAMED)
    with pytest.raises(InputError) as err:
        read_elastic_trace(path, A100, cluster_gpus=64, columns=columns)
    assert message in str(err.value) and "\n" not in str(err.value)
    if message.startswith(":1:"):
        assert str(err.value).startswith(f"{path}:1: ")


def test_formats_without_elastic_fields_and_columns_on_itp_are_refused(write):
    chronus = write(
        "job_id,user,num_gpu,submit_time,iterations,model_name,duration,interval,"
        "expect_time_list,expect_value_list,best_effort,job_type\n0,u,1,1,1,m,5,1,30,10,0,strict\n"
    )
    with pytest.raises(InputError, match="format chronus has no batch size"):
        read_elastic_trace(chronus, A100, cluster_gpus=64)
    with pytest.raises(InputError, match="--columns/--time-unit: apply to plain traces"):
        read_elastic_trace("itp-cluster10", A100, cluster_gpus=64, time_unit="min")
