"""Elastic jobs in ``chronus plan`` (issue 15): a waiting elastic job gets its smallest size that
still meets its deadline, a running one keeps its size, every decision says the size, and bad
elastic fields are one line naming the field."""

from __future__ import annotations

import json

import pytest
from plan_helpers import REPO, write_state

from chronus_py.cli import main
from chronus_py.jobs.overhead import restart_overhead
from chronus_py.jobs.throughputs import read_throughputs

TABLE = read_throughputs(REPO / "traces" / "elasticflow" / "throughputs_A100")
RATE = TABLE.curve("resnet50", 256)  # GPUs -> iterations per second
ELASTIC_KEYS = ("min_gpus", "max_gpus", "batch", "iterations", "iterations_done")


def state(policy: str = "chronus", **pending) -> dict:
    return {
        "now": 1000,
        "policy": policy,
        "cluster": {"nodes": 4, "gpus_per_node": 8},
        "running": [
            {
                "id": "rigid",
                "gpus": 8,
                "submit": 0,
                "placement": {"node0": list(range(8))},
                "estimate_seconds": 20000,
                "progress_seconds": 900,
            },
            {
                "id": "running",
                "gpus": 4,
                "submit": 0,
                "model": "resnet50",
                "placement": {"node1": [0, 1, 2, 3]},
                "elastic": {"batch": 256, "iterations": 20000, "iterations_done": 2000},
                "deadlines": [{"at": 60000}],
            },
        ],
        "pending": [
            {
                "id": "tight",
                "submit": 900,
                "model": "resnet50",
                "elastic": {"batch": 256, "iterations": 40000, "max_gpus": 32},
                "deadlines": [{"at": 12000}],
            },
            {
                "id": "loose",
                "submit": 950,
                "model": "resnet50",
                "elastic": {"batch": 256, "iterations": 40000},
                "deadlines": [{"at": 400000}],
            },
            {
                "id": "best-effort",
                "submit": 960,
                "model": "resnet50",
                "elastic": {"batch": 256, "iterations": 1000, "max_gpus": 8},
            },
            *pending.values(),
        ],
    }


def plan(tmp_path, capsys, data: dict) -> dict[str, dict]:
    assert main(["plan", str(write_state(tmp_path, data))]) == 0, capsys.readouterr().err
    return {d["job"]: d for d in json.loads(capsys.readouterr().out)["decisions"]}


def alone(iterations: float, deadline: float, now: float = 1000.0) -> int:
    """The smallest size meeting the deadline alone from now, restart included."""
    return next(
        n
        for n in (1, 2, 4, 8, 16, 32)
        if now + restart_overhead(n) + iterations / RATE[n] <= deadline
    )


def test_sizes_are_chosen_per_job_and_said_in_every_decision(tmp_path, capsys):
    decisions = plan(tmp_path, capsys, state())
    assert decisions["rigid"]["gpus"] == 8 and decisions["running"]["gpus"] == 4
    assert decisions["best-effort"]["gpus"] == 8  # no deadline: its largest size
    assert decisions["loose"]["gpus"] == 1 and decisions["loose"]["guaranteed"]
    tight = decisions["tight"]
    assert tight["guaranteed"] and tight["gpus"] >= alone(40000, 12000)
    assert tight["gpus"] > decisions["loose"]["gpus"]


def test_without_a_lease_plan_the_size_meets_the_deadline_alone(tmp_path, capsys):
    decisions = plan(tmp_path, capsys, state("edf"))
    assert decisions["tight"]["gpus"] == alone(40000, 12000)
    assert decisions["loose"]["gpus"] == 1


def test_a_job_that_cannot_make_it_runs_at_its_fastest_size(tmp_path, capsys):
    hopeless = {
        "id": "hopeless",
        "submit": 990,
        "model": "resnet50",
        "elastic": {"batch": 256, "iterations": 10_000_000},
        "deadlines": [{"at": 2000}],
    }
    decisions = plan(tmp_path, capsys, state(x=hopeless))
    fastest = max((n for n in RATE if n <= 32 and n & (n - 1) == 0), key=lambda n: RATE[n])
    assert decisions["hopeless"]["gpus"] == fastest and not decisions["hopeless"]["guaranteed"]


def _set(data: dict, section: str, index: int, **changes) -> dict:
    job = data[section][index]
    for key, value in changes.items():
        where = job["elastic"] if key in ELASTIC_KEYS else job
        if value is ...:
            del where[key]
        else:
            where[key] = value
    return data


@pytest.mark.parametrize(
    "section, index, changes, message",
    [
        ("pending", 0, {"gpus": 4}, "pending[0].gpus: a waiting elastic job gets its size"),
        ("pending", 0, {"min_gpus": 16, "max_gpus": 8}, "pending[0].elastic.min_gpus: must be <="),
        ("pending", 0, {"model": "alexnet"}, "pending[0].elastic: no throughput curve for model"),
        ("pending", 0, {"batch": 100}, "pending[0].elastic: no throughput curve"),
        ("pending", 0, {"batch": ...}, "pending[0].elastic.batch: required"),
        ("pending", 0, {"estimate_seconds": 60}, "pending[0].estimate_seconds: an elastic job's"),
        ("pending", 0, {"iterations_done": 50000}, "pending[0].elastic.iterations_done: must be"),
        ("pending", 0, {"model": ...}, "pending[0].model: required"),
        ("running", 1, {"gpus": 3}, "running[1].gpus: 3 is not one of the job's sizes"),
    ],
)
def test_bad_elastic_fields_are_one_line(tmp_path, capsys, section, index, changes, message):
    data = _set(state(), section, index, **changes)
    assert main(["plan", str(write_state(tmp_path, data))]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
