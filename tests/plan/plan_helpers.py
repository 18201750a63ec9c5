"""A small valid state as a mapping, and a writer, shared by the plan tests."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "state.yaml"

BASE = {
    "now": 1000,
    "lease": 600,
    "policy": "chronus",
    "cluster": {"nodes": 2, "gpus_per_node": 4},
    "running": [
        {
            "id": "a",
            "gpus": 2,
            "submit": 0,
            "placement": {"node0": [0, 1]},
            "estimate_seconds": 3000,
            "progress_seconds": 500,
            "deadlines": [{"at": 6000, "value": 1}],
            "guaranteed_deadline": 6000,
        },
    ],
    "pending": [
        {
            "id": "b",
            "gpus": 4,
            "submit": 100,
            "estimate_seconds": 1200,
            "deadlines": [{"at": 4000}],
        },
        {"id": "c", "gpus": 1, "submit": 200, "estimate_seconds": 900},
    ],
}


def base() -> dict:
    return copy.deepcopy(BASE)


def write_state(tmp_path: Path, state: dict, name: str = "state.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(state, sort_keys=False))
    return path
