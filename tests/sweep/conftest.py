"""A small synthetic trace (plain CSV, seconds): mixed SLO and best-effort, 1-8 GPU jobs, 3 days."""

from __future__ import annotations

import random
from pathlib import Path

import pytest


def make_trace(path: Path, jobs: int = 120, seed: int = 1) -> Path:
    rng = random.Random(seed)
    lines = ["job_id,submit_time,duration,num_gpu,deadline"]
    for i in range(jobs):
        submit = rng.uniform(0, 3 * 86400)
        duration = rng.uniform(600, 20000)
        deadline = "" if rng.random() < 0.3 else f"{submit + duration * rng.uniform(1.2, 3):.0f}"
        lines.append(f"j{i},{submit:.0f},{duration:.0f},{rng.choice([1, 1, 2, 4, 8])},{deadline}")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def tiny_trace(tmp_path: Path) -> Path:
    return make_trace(tmp_path / "tiny.csv")
