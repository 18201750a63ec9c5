"""``chronus profile fit|predict`` in-process: output, exit codes and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import chronus_py.cli as cli

REPO = Path(__file__).resolve().parents[2]
STATS = REPO / "traces" / "training_trace" / "stats"
RESNET = [STATS / f"imagenet_arch_resnet50_gpu_{g}.npy" for g in (1, 2, 4, 8, 16)]


@pytest.fixture
def main():
    return cli.main


def test_fit_then_predict_prints_the_estimate(main, tmp_path, capsys):
    out = tmp_path / "profile.json"
    assert main(["profile", "fit", *map(str, RESNET), "-o", str(out)]) == 0
    assert "resnet50, 5 placements, global batch capped at 4 GPUs" in capsys.readouterr().out
    assert main(["profile", "predict", str(out), "--gpus", "32", "--nodes", "4"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert list(printed) == ["iteration_seconds", "low", "high"]
    assert printed["low"] < printed["iteration_seconds"] < printed["high"]
    assert 0.03 < printed["iteration_seconds"] < 0.085  # strong scaling: below the 16-GPU 0.085 s
    assert main(["profile", "predict", str(out), "--placement", "4,4", "--iterations", "1000"]) == 0
    runtime = json.loads(capsys.readouterr().out)
    assert list(runtime) == ["seconds", "low", "high"]
    assert runtime["seconds"] == pytest.approx(1000 * 0.131, rel=0.1)


def test_fit_without_output_prints_the_profile(main, capsys):
    assert main(["profile", "fit", *map(str, RESNET)]) == 0
    assert json.loads(capsys.readouterr().out)["model"] == "resnet50"


def test_gpus_option_for_unnamed_files(main, tmp_path, capsys):
    paths = []
    for g in (1, 8, 16):
        path = tmp_path / f"run{g}.npy"
        np.save(path, np.array([5.0] + [0.5 + 0.01 * g] * 20))
        paths.append(str(path))
    assert main(["profile", "fit", *paths, "--gpus", "1,8,16", "--model", "bert"]) == 0
    assert json.loads(capsys.readouterr().out)["observations"][2]["placement"] == [8, 8]
    assert main(["profile", "fit", *paths]) == 2
    assert "GPU count unknown" in capsys.readouterr().err


def test_model_info_table_needs_a_model(main, capsys):
    table = REPO / "traces" / "training_trace" / "model_info.json"
    assert main(["profile", "fit", str(table), "--model", "vgg16"]) == 0
    profile = json.loads(capsys.readouterr().out)
    assert profile["model"] == "vgg16"


def one_line_error(capsys) -> str:
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    return lines[0]


@pytest.mark.parametrize(
    "values, message",
    [
        ([], "no iterations left"),
        ([1.0, float("nan")], "index 1: iteration time nan is NaN"),
        ([1.0, 0.5, -0.1], "index 2: iteration time -0.1 is not positive"),
    ],
)
def test_bad_samples_exit_2_with_one_line(main, tmp_path, capsys, values, message):
    bad = tmp_path / "imagenet_arch_resnet50_gpu_2.npy"
    np.save(bad, np.array(values, dtype=float))
    assert main(["profile", "fit", str(RESNET[0]), str(bad), str(RESNET[4])]) == 2
    line = one_line_error(capsys)
    assert line.startswith(f"chronus profile: {bad}: ") and message in line


def test_single_node_samples_exit_2(main, capsys):
    assert main(["profile", "fit", *map(str, RESNET[:4])]) == 2
    assert "all samples are single-node" in one_line_error(capsys)


def test_mixed_models_exit_2(main, capsys):
    other = STATS / "gan_arch_gan_gpu_16.npy"
    assert main(["profile", "fit", str(RESNET[0]), str(other)]) == 2
    assert "model 'gan' differs from 'resnet50'" in one_line_error(capsys)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--gpus", "32", "--nodes", "2"], "32 GPUs do not fit on 2 nodes of 8"),
        (["--gpus", "4", "--placement", "2,1"], "gpus=4 but the placement holds 3 GPUs"),
        (["--placement", "9"], "a node holds 9 GPUs"),
        (["--nodes", "2"], "give --gpus"),
    ],
)
def test_impossible_requests_exit_2(main, tmp_path, capsys, args, message):
    out = tmp_path / "p.json"
    assert main(["profile", "fit", *map(str, RESNET), "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["profile", "predict", str(out), *args]) == 2
    assert message in one_line_error(capsys)


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "cannot read"),
        ("{", "not valid JSON"),
        ('{"format": "other"}', "not a profile"),
        ('{"format": "chronus-profile/1", "params": {}}', "coefficients: missing or not a dict"),
    ],
)
def test_bad_profile_files_exit_2(main, tmp_path, capsys, content, message):
    path = tmp_path / "p.json"
    if content is not None:
        path.write_text(content)
    assert main(["profile", "predict", str(path), "--gpus", "8"]) == 2
    line = one_line_error(capsys)
    assert str(path) in line and message in line


def test_inter_node_weight_round_trips_through_the_profile(main, tmp_path, capsys):
    out = tmp_path / "profile.json"
    assert main(["profile", "fit", *map(str, RESNET), "--inter-node", "0.3", "-o", str(out)]) == 0
    assert json.loads(out.read_text())["params"]["inter_node"] == 0.3
    capsys.readouterr()
    assert main(["profile", "predict", str(out), "--gpus", "32", "--nodes", "4"]) == 0
    assert json.loads(capsys.readouterr().out)["iteration_seconds"] > 0
    with pytest.raises(SystemExit):
        main(["profile", "fit", *map(str, RESNET), "--inter-node", "1.5"])
    assert "expected linear, ring or a number in [0, 1], got '1.5'" in capsys.readouterr().err


def toy_runs(directory: Path, model: str, compute: float, growth: float) -> dict[int, Path]:
    """Sample files of one weak-scaling model: 20 iterations per GPU count (the first a slow
    warm-up), the network cost per extra node ``0.3·compute`` times ``growth`` past 2 nodes."""
    rng = np.random.default_rng(len(model))
    paths = {}
    for g in (1, 8, 16, 32, 64):
        nodes = -(-g // 8)
        network = 0.3 * compute * (nodes - 1) * (growth if nodes > 2 else 1.0)
        seconds = (compute + 0.05 * compute * (g > 1) + network) * (1 + 0.01 * rng.random(20))
        paths[g] = directory / f"imagenet_arch_{model}_gpu_{g}.npy"
        np.save(paths[g], np.concatenate([[10.0], seconds]))
    return paths


def test_learn_then_fit_with_the_learned_band(main, tmp_path, capsys):
    """`profile learn` takes (profile, larger run) pairs and prints the shape and spread that
    `profile fit --inter-node --beyond-spread` then uses past the profiled nodes."""
    run_args = []
    for model, compute, growth in (("a", 0.2, 0.5), ("b", 0.4, 0.7), ("c", 0.3, 0.6)):
        paths = toy_runs(tmp_path, model, compute, growth)
        profile = tmp_path / f"{model}.json"
        assert (
            main(["profile", "fit", *(str(paths[g]) for g in (1, 8, 16)), "-o", str(profile)]) == 0
        )
        run_args += ["--run", str(profile), str(paths[32]), "--run", str(profile), str(paths[64])]
    capsys.readouterr()
    assert main(["profile", "learn", *run_args]) == 0
    learned = json.loads(capsys.readouterr().out)
    assert learned["cases"] == 6 and learned["band"] == 0.95
    assert learned["inter_node"] < 0.5 and 0 < learned["beyond_spread"] < 0.2
    paths = toy_runs(tmp_path, "d", 0.25, 0.6)
    out = tmp_path / "d.json"
    fit = ["profile", "fit", *(str(paths[g]) for g in (1, 8, 16)), "-o", str(out)]
    weight, spread = str(learned["inter_node"]), str(learned["beyond_spread"])
    assert main([*fit, "--inter-node", weight, "--beyond-spread", spread]) == 0
    capsys.readouterr()
    assert main(["profile", "predict", str(out), "--gpus", "64"]) == 0
    est = json.loads(capsys.readouterr().out)
    measured = float(np.median(np.load(paths[64])[1:]))
    assert est["low"] <= measured <= est["high"]
    assert est["high"] / est["low"] == pytest.approx(np.exp(2 * learned["beyond_spread"]), rel=0.05)


def test_learn_refuses_runs_within_the_profiled_nodes(main, tmp_path, capsys):
    paths = toy_runs(tmp_path, "a", 0.2, 0.5)
    profile = tmp_path / "a.json"
    assert main(["profile", "fit", *(str(paths[g]) for g in (1, 8, 16)), "-o", str(profile)]) == 0
    capsys.readouterr()
    assert main(["profile", "learn", "--run", str(profile), str(paths[16])]) == 2
    line = one_line_error(capsys)
    assert str(paths[16]) in line and "within the 2 the profile" in line
    assert main(["profile", "learn", "--run", str(profile), str(paths[32]), "--band", "1"]) == 2
    assert "--band: must be in (0, 1), got 1.0" in one_line_error(capsys)
    with pytest.raises(SystemExit):
        main(["profile", "fit", str(paths[1]), "--beyond-spread", "-1"])
    assert "expected a number >= 0, got '-1'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda p: p.update(format="other"), 'not a profile (expected "format"'),
        (
            lambda p: p["coefficients"].update(compute=0.0, overhead=0.0, intra=0.0, inter=0.0),
            "a profile predicts no time for its run",
        ),
    ],
)
def test_learn_refuses_profiles_it_cannot_learn_from(main, tmp_path, capsys, edit, message):
    paths = toy_runs(tmp_path, "a", 0.2, 0.5)
    profile = tmp_path / "a.json"
    assert main(["profile", "fit", *(str(paths[g]) for g in (1, 8, 16)), "-o", str(profile)]) == 0
    data = json.loads(profile.read_text())
    edit(data)
    profile.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["profile", "learn", "--run", str(profile), str(paths[32])]) == 2
    assert message in one_line_error(capsys)
