from __future__ import annotations

import pytest

from chronus_py.errors import InputError
from chronus_py.jobs.model import JobKind
from chronus_py.readers import BUNDLED, read_trace
from tests.conftest import CHRONUS_HEADER, ELASTICFLOW_HEADER


def test_chronus_units_relative_deadlines_and_kinds(write):
    path = write(f"""{CHRONUS_HEADER}
0,vc_a,2,10,100,vgg16,30,5,45,10,0,strict
1,vc_b,1,12,100,alexnet,20,5,20-30-40-50,10-8-5-2,0,soft
2,vc_a,1,14,100,resnet101,5,5,14,10,1,best
3,vc_a,0,15,100,resnet101,5,5,14,10,0,strict
""")
    trace = read_trace(path)
    assert trace.format == "chronus"
    strict, soft, best = trace.jobs
    assert (strict.submit, strict.duration, strict.gpus, strict.tenant) == (
        600.0,
        1800.0,
        2,
        "vc_a",
    )
    assert strict.kind is JobKind.STRICT_SLO and strict.deadlines[0].at == 600 + 45 * 60
    assert soft.kind is JobKind.SOFT_SLO
    assert [d.at for d in soft.deadlines] == [720 + m * 60 for m in (20, 30, 40, 50)]
    assert [d.value for d in soft.deadlines] == [10, 8, 5, 2]
    assert best.kind is JobKind.BEST_EFFORT and best.deadlines == ()
    assert trace.dropped == {"num_gpu is 0": 1}


def test_elasticflow_seconds_absolute_and_no_final_newline(write):
    path = write(f"{ELASTICFLOW_HEADER}\n7,100,50,resnet50,400,32,4,250\n8,150,50,bert,,32,1,60")
    trace = read_trace(path)
    assert trace.format == "elasticflow"
    slo, best = trace.jobs
    assert (slo.submit, slo.duration, slo.gpus, slo.deadlines[0].at) == (100, 250, 4, 400)
    assert best.kind is JobKind.BEST_EFFORT and best.id == "8"


def test_plain_with_optional_columns_and_tiresias_extras(write):
    path = write(
        "job_id,submit_time,duration,num_gpu,tenant,deadline,iterations\na,0,60,1,t1,100,5\nb,5,60,8,,,5\n"
    )
    trace = read_trace(path)
    assert trace.format == "plain"
    a, b = trace.jobs
    assert a.tenant == "t1" and a.deadlines[0].at == 100 and a.kind is JobKind.STRICT_SLO
    assert b.tenant == "default" and b.kind is JobKind.BEST_EFFORT


def test_forced_format_reads_a_superset_header_as_plain(write):
    path = write(f"{CHRONUS_HEADER}\n0,vc_a,2,10,100,vgg16,30,5,45,10,0,strict\n")
    job = read_trace(path, format="plain").jobs[0]
    assert job.submit == 10 and job.kind is JobKind.BEST_EFFORT


@pytest.mark.parametrize("name", sorted(n for n in BUNDLED if n.startswith("philly-")))
def test_bundled_traces_load(name):
    trace = read_trace(name)
    assert len(trace.jobs) + trace.dropped_rows == 30940
    assert set(trace.dropped) == {"num_gpu is 0"}


BAD = [
    ("job_id,submit_time,duration\n1,0,5\n", 1, "column num_gpu: missing from header"),
    (
        "job_id,submit_time,duration,num_gpu\n1,0,5,1\n2,x,5,1\n",
        3,
        "column submit_time: not a number or date: 'x'",
    ),
    ("job_id,submit_time,duration,num_gpu\n1,0,5,1.5\n", 2, "column num_gpu: not a whole number"),
    ("job_id,submit_time,duration,num_gpu\n1,0,-5,1\n", 2, "column duration: must be >= 0"),
    (
        "job_id,submit_time,duration,num_gpu,deadline\n1,50,5,1,40\n",
        2,
        "column deadline: is before submit_time",
    ),
    (
        "job_id,submit_time,duration,num_gpu\n1,0,5,1\n1,3,5,1\n",
        3,
        "column job_id: duplicate id '1' (first on line 2)",
    ),
    (
        f"{ELASTICFLOW_HEADER}\n1,100,5,m,50,1,1,5\n",
        2,
        "column deadline: is before submission_time",
    ),
    (
        "job_id,submit_time,duration,num_gpu\n1,0,5,1\n2,0,5,1,9,9\n",
        3,
        "6 fields, the header has 4",
    ),
    ("job_id,submit_time,duration,num_gpu\n1,0,inf,1\n", 2, "column duration: must be finite"),
    (
        f"{CHRONUS_HEADER}\n0,u,1,1,1,m,5,1,30-20,10-8,0,soft\n",
        2,
        "column expect_time_list: deadlines must be",
    ),
    (
        f"{CHRONUS_HEADER}\n0,u,1,1,1,m,5,1,30-40,10,0,soft\n",
        2,
        "column expect_value_list: 1 values for 2 deadlines",
    ),
    (
        f"{CHRONUS_HEADER}\n0,u,1,1,1,m,5,1,abc,10,0,strict\n",
        2,
        "column expect_time_list: not a '-'-joined",
    ),
    (
        f"{CHRONUS_HEADER}\n0,u,1,1,1,m,5,1,30,10,2,strict\n",
        2,
        "column best_effort: must be 0 or 1",
    ),
]


@pytest.mark.parametrize("text,line,message", BAD)
def test_malformed_rows_give_file_line_column(write, text, line, message):
    path = write(text)
    with pytest.raises(InputError) as err:
        read_trace(path)
    assert str(err.value).startswith(f"{path}:{line}: {message}")


def test_empty_file_and_header_only(write):
    with pytest.raises(InputError, match=r":1: empty file"):
        read_trace(write("", "empty.csv"))
    with pytest.raises(InputError, match=r":2: no job rows"):
        read_trace(write("job_id,submit_time,duration,num_gpu\n", "header.csv"))


def test_unknown_header_and_missing_file(write, tmp_path):
    with pytest.raises(InputError, match="missing from header .closest format: plain"):
        read_trace(write("a,b\n1,2\n"))
    with pytest.raises(InputError, match="no such trace file"):
        read_trace(tmp_path / "nope.csv")


def test_skip_bad_rows_counts_per_reason(write):
    path = write(
        "job_id,submit_time,duration,num_gpu\n1,0,5,1\n2,x,5,1\n3,y,5,1\n4,0,-1,1\n5,0,5,0\n1,0,5,1\n"
    )
    trace = read_trace(path, skip_bad_rows=True)
    assert [j.id for j in trace.jobs] == ["1"]
    assert trace.dropped == {
        "column submit_time: not a number or date:": 2,
        "column duration: must be >= 0": 1,
        "num_gpu is 0": 1,
        "column job_id: duplicate id": 1,
    }
