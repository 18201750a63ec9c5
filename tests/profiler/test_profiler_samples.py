"""Reading samples: formats, the artifact's names and node inference, model_info tables, and a
one-line InputError naming file and index for every kind of bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from chronus_py.errors import InputError
from chronus_py.samples import (
    Sample,
    Samples,
    from_relative_throughput,
    name_fields,
    packed,
    placement_counts,
    read_file,
    read_relative_throughput,
    read_samples,
    spread,
)

REPO = Path(__file__).resolve().parents[2]
TRACES = REPO / "traces" / "training_trace"


def write_npy(tmp_path: Path, name: str, values) -> Path:
    path = tmp_path / name
    np.save(path, np.asarray(values, dtype=float))
    return path


def test_artifact_names_give_model_and_gpus():
    assert name_fields(Path("imagenet_arch_resnet50_gpu_16.npy")) == ("resnet50", 16)
    assert name_fields(Path("gan_arch_Transformer_gpu_1.npy")) == ("Transformer", 1)
    assert name_fields(Path("bert_gpu_4.csv")) == ("bert", 4)
    assert name_fields(Path("bert.json")) == ("bert", None)


def test_node_counts_are_inferred_by_packing_eight_per_node():
    assert packed(8, 8) == (8,)
    assert packed(9, 8) == (8, 1)
    assert packed(16, 8) == (8, 8)
    assert packed(20, 8) == (8, 8, 4)
    assert spread(10, 4, 8) == (3, 3, 2, 2)
    assert placement_counts({"a": [0, 1], "b": 6}, 8) == (6, 2)


def test_shipped_artifact_files_read_with_warmup_dropped():
    path = TRACES / "stats" / "imagenet_arch_resnet50_gpu_16.npy"
    (sample,) = read_file(path)
    raw = np.load(path)
    assert sample.model == "resnet50" and sample.placement == (8, 8) and sample.nodes == 2
    assert np.array_equal(sample.seconds, raw[1:])
    assert np.median(sample.seconds) == pytest.approx(0.085, abs=5e-4)


def test_read_samples_takes_gpus_from_names_or_overrides(tmp_path):
    a = write_npy(tmp_path, "m_gpu_1.npy", [9, 1, 1])
    b = write_npy(tmp_path, "m_gpu_2.npy", [9, 2, 2])
    samples = read_samples([a, b], gpus=[4, 12])
    assert [s.placement for s in samples] == [(4,), (8, 4)]
    assert [s.gpus for s in read_samples([a, b], gpus=2)] == [2, 2]
    named = write_npy(tmp_path, "m_gpu_16.npy", [9, 2, 2])
    assert [s.placement for s in read_samples([a, b, named])] == [(1,), (2,), (8, 8)]
    assert read_samples([named]).items[0].placement == (8, 8)
    assert read_samples([named], gpus_per_node=4).items[0].placement == (4, 4, 4, 4)
    with pytest.raises(InputError, match="2 GPU counts for 1 files"):
        read_samples([named], gpus=[1, 2])


def test_json_and_csv_formats(tmp_path):
    bare = tmp_path / "m_gpu_8.json"
    bare.write_text(json.dumps([5.0, 1.0, 1.1]))
    assert read_file(bare)[0].seconds.tolist() == [1.0, 1.1]
    full = tmp_path / "runs.json"
    full.write_text(
        json.dumps(
            {
                "model": "bert",
                "samples": [
                    {"gpus": 16, "seconds": [3, 1, 1]},
                    {"gpus": 8, "nodes": 2, "seconds": [3, 1, 1]},
                    {"placement": {"n1": [0, 1, 2], "n2": [0]}, "seconds": [3, 1, 1]},
                ],
            }
        )
    )
    assert [(s.model, s.placement) for s in read_file(full)] == [
        ("bert", (8, 8)),
        ("bert", (4, 4)),
        ("bert", (3, 1)),
    ]
    table = tmp_path / "runs.csv"
    table.write_text(
        "model,gpus,nodes,seconds\nbert,1,,9\nbert,1,,1\nbert,16,,9\nbert,16,,2\n"
        "gpt,8,2,9\ngpt,8,2,3\n"
    )
    samples = read_file(table, model="bert")
    assert [(s.placement, s.seconds.tolist()) for s in samples] == [((1,), [1.0]), ((8, 8), [2.0])]
    assert {s.model for s in read_file(table)} == {"bert", "gpt"}


def test_model_info_table_becomes_relative_time_samples():
    table = json.loads((TRACES / "model_info.json").read_text())
    samples = from_relative_throughput(table, "alexnet")
    by_key = {(s.gpus, s.nodes): float(s.seconds[0]) for s in samples}
    assert by_key[(8, 1)] == 1.0
    assert by_key[(8, 4)] == pytest.approx(1 / 0.26836765904968457)
    assert {s.placement for s in samples if s.gpus == 8} == {(8,), (4, 4), (2, 2, 2, 2)}
    seconds = from_relative_throughput(
        table, "alexnet", base_seconds={2: 0.1, 4: 0.2, 6: 0.3, 8: 0.4}
    )
    assert {(s.gpus, s.nodes): float(s.seconds[0]) for s in seconds}[(8, 2)] == pytest.approx(
        0.4 / 0.5083145152293351
    )


def test_model_info_errors_name_the_entry():
    with pytest.raises(InputError, match="no model 'bert'"):
        from_relative_throughput({"alexnet": {}}, "bert", source="mi.json")
    with pytest.raises(InputError) as info:
        from_relative_throughput({"m": {"8": {"1": 1.0, "2": -0.5}}}, "m", source="mi.json")
    assert str(info.value) == "mi.json: m.8.2: relative throughput -0.5 is not a positive number"
    with pytest.raises(InputError, match="m.8.9: nodes must be in 1..8"):
        from_relative_throughput({"m": {"8": {"9": 0.5}}}, "m", source="mi.json")
    with pytest.raises(InputError, match="no single-node seconds given for 8 GPUs"):
        from_relative_throughput({"m": {"8": {"1": 1.0}}}, "m", base_seconds={4: 1.0})


@pytest.mark.parametrize(
    "values, message",
    [
        ([0.5], "no iterations left after dropping 1 warm-up iteration(s) of 1"),
        ([], "no iterations left after dropping 1 warm-up iteration(s) of 0"),
        ([9, 0.5, float("nan"), 0.5], "index 2: iteration time nan is NaN"),
        ([9, 0.5, 0.5, -0.2], "index 3: iteration time -0.2 is not positive"),
        ([9, 0.0], "index 1: iteration time 0.0 is not positive"),
        ([9, float("inf")], "index 1: iteration time inf is infinite"),
    ],
)
def test_bad_npy_arrays_give_one_line_errors(tmp_path, values, message):
    path = write_npy(tmp_path, "m_gpu_8.npy", values)
    with pytest.raises(InputError) as info:
        read_file(path)
    assert str(info.value) == f"{path}: {message}"


def test_only_warmup_iterations_may_be_anything(tmp_path):
    path = write_npy(tmp_path, "m_gpu_8.npy", [float("nan"), 0.5])
    assert read_file(path)[0].seconds.tolist() == [0.5]
    with pytest.raises(InputError, match="index 0: iteration time nan is NaN"):
        read_file(path, warmup=0)


def test_malformed_files_give_one_line_errors(tmp_path):
    two_d = write_npy(tmp_path, "m_gpu_8.npy", [[1.0, 2.0], [3.0, 4.0]])
    junk = tmp_path / "j_gpu_8.npy"
    junk.write_text("not numpy")
    unnamed = write_npy(tmp_path, "run.npy", [1.0, 2.0])
    cases = [
        (lambda: read_file(two_d), f"{two_d}: expected a 1-D array of seconds, got shape (2, 2)"),
        (lambda: read_file(junk), f"{junk}: not a readable .npy array"),
        (lambda: read_file(unnamed), f"{unnamed}: GPU count unknown"),
        (lambda: read_file(tmp_path / "x_gpu_1.txt"), "unknown sample format '.txt'"),
        (lambda: read_file(tmp_path / "gone_gpu_1.npy"), "gone_gpu_1.npy: no such file"),
    ]
    for call, message in cases:
        with pytest.raises(InputError) as info:
            call()
        assert message in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    "content, message",
    [
        ("{", "not valid JSON"),
        ('"text"', "expected a list of seconds"),
        ('{"samples": []}', "samples: must be a non-empty list"),
        ('{"samples": [{"gpus": 8}]}', 'samples[0]: must be an object with "seconds"'),
        ('{"samples": [{"seconds": [1, 1]}]}', 'samples[0]: needs an integer "gpus"'),
        (
            '{"samples": [{"gpus": 8, "nodes": "2", "seconds": [1, 1]}]}',
            "samples[0].nodes: must be an integer",
        ),
        (
            '{"samples": [{"gpus": 20, "nodes": 2, "seconds": [1, 1]}]}',
            "samples[0]: 20 GPUs do not fit on 2 nodes of 8",
        ),
        (
            '{"samples": [{"placement": [9], "seconds": [1, 1]}]}',
            "samples[0].placement: a node holds 9 GPUs",
        ),
        (
            '{"samples": [{"gpus": 8, "seconds": [1, -1]}]}',
            "samples[0]: index 1: iteration time -1.0 is not positive",
        ),
        (
            '{"samples": [{"gpus": 8, "seconds": [1, "x"]}]}',
            "samples[0]: per-iteration seconds are not numbers",
        ),
        ('{"alexnet": {"8": {"1": 1.0}}}', "choose one with --model"),
    ],
)
def test_bad_json_gives_one_line_errors(tmp_path, content, message):
    path = tmp_path / "runs.json"
    path.write_text(content)
    with pytest.raises(InputError) as info:
        read_file(path)
    assert str(info.value).startswith(str(path)) and message in str(info.value)


@pytest.mark.parametrize(
    "content, message",
    [
        ("gpus,time\n1,2\n", ':1: needs a header with a "seconds" column'),
        ("gpus,seconds\n1,9\n1,abc\n", ":3: seconds: not a number: 'abc'"),
        (
            "gpus,seconds\n1,9\n1,-2\n",
            ":3: seconds: iteration time -2.0 is not a finite positive number",
        ),
        (
            "gpus,seconds\n1,9\n1,nan\n",
            ":3: seconds: iteration time nan is not a finite positive number",
        ),
        ("gpus,seconds\nx,9\n", ":2: gpus: not an integer: 'x'"),
        ("seconds\n9\n1\n", ":2: GPU count unknown"),
        (
            "gpus,seconds\n1,9\n",
            ":2: no iterations left after dropping 1 warm-up iteration(s) of 1",
        ),
        ("gpus,seconds\n", ": no iteration rows"),
        ("gpus,nodes,seconds\n20,2,1\n", ":2: 20 GPUs do not fit on 2 nodes of 8"),
    ],
)
def test_bad_csv_gives_one_line_errors_with_the_line(tmp_path, content, message):
    path = tmp_path / "runs.csv"
    path.write_text(content)
    with pytest.raises(InputError) as info:
        read_file(path)
    assert str(info.value) == f"{path}{message}" or str(info.value).startswith(f"{path}{message}")


def test_samples_of_two_models_are_rejected():
    a = Sample("resnet50", (1,), np.ones(3), "a.npy")
    b = Sample("vgg16", (8, 8), np.ones(3), "b.npy")
    with pytest.raises(InputError, match="b.npy: model 'vgg16' differs from 'resnet50' in a.npy"):
        Samples((a, b))


def test_a_whole_relative_throughput_table_is_checked_on_reading(tmp_path):
    table = read_relative_throughput(TRACES / "model_info.json")
    assert sorted(table) == ["alexnet", "inception_v3", "mobilenet_v2", "resnet101", "vgg16"]
    bad = tmp_path / "mi.json"
    for text, why in (
        ("not json", r"mi.json:1: not valid JSON"),
        ("[]", r"mi.json: expected an object: model -> GPUs -> nodes -> throughput"),
        ('{"m": {"2": {"1": 1.0, "2": "x"}}}', r"mi.json: m.2.2: relative throughput 'x'"),
    ):
        bad.write_text(text)
        with pytest.raises(InputError, match=why):
            read_relative_throughput(bad)
