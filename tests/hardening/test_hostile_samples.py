"""Samples that used to crash the profile fit, and fits that used to write profiles `predict`
refuses."""

from __future__ import annotations

import numpy as np
import pytest

from chronus_py.cli import main


@pytest.mark.parametrize(
    "values,why",
    [
        (np.full(8, 1e-320), "outside [1e-09"),  # subnormals: LinAlgError in the least squares
        (np.full(8, 1e300), "outside [1e-09"),
    ],
)
def test_extreme_iteration_times_are_refused(tmp_path, capsys, values, why):
    files = []
    for gpus, data in ((1, np.full(8, 0.5)), (16, np.full(8, 0.6)), (4, values)):
        path = tmp_path / f"imagenet_arch_resnet50_gpu_{gpus}.npy"
        np.save(path, data + (0 if gpus == 4 else np.linspace(0, 0.01, 8)))
        files.append(str(path))
    assert main(["profile", "fit", *files, "-o", str(tmp_path / "p.json")]) == 2
    err = capsys.readouterr().err
    assert why in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "p.json").exists()


def test_profile_with_infinity_is_refused_by_predict(tmp_path, capsys):
    path = tmp_path / "p.json"
    path.write_text('{"format": "chronus-profile/1", "iteration_cv": Infinity}')
    assert main(["profile", "predict", str(path), "--gpus", "8"]) == 2
    assert "Infinity is not a JSON number" in capsys.readouterr().err


def test_sample_gpu_counts_are_bounded(tmp_path, capsys):
    """1e8 GPUs in a JSON sample built a 12.5-million-node placement and stalled the fit (found by
    benchmarks/fuzz.py)."""
    path = tmp_path / "s.json"
    path.write_text('{"model": "m", "samples": [{"gpus": 100000000, "seconds": [0.3, 0.31]}]}')
    assert main(["profile", "fit", str(path)]) == 2
    assert "samples[0]: gpus must be <= 1,000,000" in capsys.readouterr().err


def test_profile_predicting_infinity_is_a_clean_error(tmp_path, capsys):
    """A coefficient of 1e308 made `predict` print Infinity, which is not JSON (found by
    benchmarks/fuzz.py)."""
    import json
    from pathlib import Path

    data = json.loads(
        (Path(__file__).resolve().parents[2] / "examples/profiles/resnet50.json").read_text()
    )
    data["coefficients"]["intra"] = 1e308
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    assert main(["profile", "predict", str(path), "--gpus", "16", "--nodes", "2"]) == 2
    assert "non-finite time" in capsys.readouterr().err
