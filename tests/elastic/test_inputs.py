"""Throughput tables and ITP traces in, with one-line errors for bad input; the CLI end to end."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from chronus_py.errors import InputError
from chronus_py.jobs.sizes import elastic_sizes
from chronus_py.jobs.throughputs import read_throughputs
from chronus_py.readers import traces_dir
from chronus_py.readers.elastic import read_elastic_trace

A100 = traces_dir() / "elasticflow" / "throughputs_A100"


def test_bundled_a100_tables_give_elasticflows_per_job_caps():
    table = read_throughputs(A100)
    caps = {key: elastic_sizes(curve, key[1], 512)[-1] for key, curve in table.rates.items()}
    assert caps[("bert", 64)] == 8 and caps[("bert", 128)] == 16
    assert caps[("gpt2", 128)] == 16 and caps[("gpt2", 256)] == 32
    assert caps[("inception3", 64)] == 16 and caps[("inception3", 128)] == 32
    assert caps[("resnet50", 64)] == 32 and caps[("vgg16", 64)] == 32
    assert caps[("deepspeech2", 32)] == 32 and caps[("vgg16", 256)] == 64
    assert 64 not in table.curve("deepspeech2", 32)  # the one unmeasured cell


@pytest.mark.parametrize(
    "text, where",
    [
        ("global_batch_size,1,2\n64,1.0,abc\n", "bert.csv:2: column 2: not a number: 'abc'"),
        ("global_batch_size,1,two\n64,1.0,2.0\n", "bert.csv:1: column 'two'"),
        ("batch,1,2\n64,1.0,2.0\n", "bert.csv:1: column batch: first column must be"),
        ("global_batch_size,1,2\n64,1.0,-2\n", "bert.csv:2: column 2: throughput must be positive"),
        ("global_batch_size,1,2\n64,1.0\n", "bert.csv:2: 2 fields, the header has 3"),
    ],
)
def test_bad_throughput_tables_name_file_line_and_column(tmp_path, text, where):
    (tmp_path / "bert.csv").write_text(text)
    with pytest.raises(InputError, match=None) as err:
        read_throughputs(tmp_path)
    assert where in str(err.value)


def test_missing_directory_and_empty_directory(tmp_path):
    with pytest.raises(InputError, match="no such throughput directory"):
        read_throughputs(tmp_path / "nope")
    with pytest.raises(InputError, match="no <model>.csv"):
        read_throughputs(tmp_path)


def test_trace_rows_become_elastic_or_rigid_jobs(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text(
        "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,duration,elastic\n"
        "a,0,1000,bert,5000,64,4,100,1\n"
        "b,10,1000,bert,5000,64,4,100,0\n"
        "c,20,1000,unknown,5000,64,2,500,1\n"
    )
    a, b, c = read_elastic_trace(trace, read_throughputs(A100), cluster_gpus=512).jobs
    assert a.sizes == (1, 2, 4, 8) and not a.rigid
    assert b.sizes == (4,) and b.rates == (read_throughputs(A100).curve("bert", 64)[4],)
    assert c.sizes == (2,) and c.rates == (2.0,)  # no curve: num_iteration / duration


def test_bad_trace_row_is_a_one_line_error(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text(
        "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,"
        "duration\na,0,1000,bert,soon,64,4,100\n"
    )
    with pytest.raises(InputError, match=r"t.csv:2: column deadline: not a number"):
        read_elastic_trace(trace, read_throughputs(A100), cluster_gpus=512)


def test_cli_elastic_replay_prints_replay_keys_and_elastic_keys():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "chronus_py",
            "replay",
            "--trace",
            "itp-cluster10",
            "--elastic",
            "--nodes",
            "32",
            "--gpus-per-node",
            "8",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    metrics = json.loads(out.stdout)
    assert metrics["policy"] == "elastic-chronus" and metrics["jobs"] == 260
    for key in (
        "slo_deadline_ratio",
        "guaranteed_miss_ratio",
        "gpu_utilization",
        "resizes",
        "resize_overhead_share",
        "elastic_ceiling",
    ):
        assert key in metrics
    assert metrics["slo_deadline_ratio"] >= metrics["elastic_ceiling"] - 0.02


def test_cli_bad_throughputs_dir_exits_2_with_one_line(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "chronus_py",
            "replay",
            "--trace",
            "itp-cluster10",
            "--elastic",
            "--throughputs",
            str(tmp_path / "none"),
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    assert "no such throughput directory" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize(
    "name, rows",
    [
        ("itp-cluster01", 1595),
        ("itp-cluster02", 5778),
        ("itp-cluster03", 3011),
        ("itp-cluster05", 3629),
        ("itp-cluster10", 260),
    ],
)
def test_bundled_itp_traces_read_as_elasticflow_rows(name, rows):
    from chronus_py.readers import read_trace

    trace = read_trace(name)
    assert trace.format == "elasticflow" and len(trace.jobs) == rows and not trace.dropped


def test_load_compresses_arrivals_and_keeps_each_deadlines_offset():
    from chronus_py.engine.elastic_setup import scale_load
    from tests.elastic.helpers import job

    a, b = scale_load([job("a", 0, 100, 10), job("b", 60, 160, 10)], 2.0)
    assert (a.submit, a.first_deadline) == (0, 100) and (b.submit, b.first_deadline) == (30, 130)
