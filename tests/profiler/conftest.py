"""Synthetic samples from known model coefficients, shared by the profiler tests."""

from __future__ import annotations

import numpy as np
import pytest

from chronus_py.profiler import Coefficients, predict_seconds
from chronus_py.samples import Sample, Samples, packed


def synthetic(
    coef: Coefficients,
    gpus: list[int],
    *,
    inter_node: str | float = "linear",
    cv: float = 0.02,
    iterations: int = 500,
    seed: int = 0,
    model: str = "synthetic",
    gpus_per_node: int = 8,
) -> Samples:
    """Per-iteration seconds drawn around the model's time on packed placements, with
    multiplicative Gaussian noise of coefficient of variation ``cv``."""
    rng = np.random.default_rng(seed)
    items = []
    for g in gpus:
        placement = packed(g, gpus_per_node)
        t = predict_seconds(coef, placement, inter_node)
        seconds = t * (1 + cv * rng.standard_normal(iterations))
        items.append(Sample(model, placement, seconds, f"synthetic_gpu_{g}"))
    return Samples(tuple(items))


@pytest.fixture
def weak_coef() -> Coefficients:
    return Coefficients(compute=0.30, overhead=0.0, intra=0.06, inter=0.10, batch_cap_gpus=None)


@pytest.fixture
def capped_coef() -> Coefficients:
    return Coefficients(compute=0.40, overhead=0.20, intra=0.03, inter=0.06, batch_cap_gpus=4)


@pytest.fixture
def make_samples():
    """The :func:`synthetic` sample factory (a fixture, so test modules need not import
    conftest)."""
    return synthetic
