"""Every decision of ``chronus plan`` carries the job's estimate state, and a job whose runtime
nobody knows is accepted: measured in place, ranked by its probe, promised nothing until its
first estimate (issue 14)."""

from __future__ import annotations

import json

import pytest
from plan_helpers import base, write_state

from chronus_py.cli import main
from chronus_py.estimates.in_place import MEASURE_WINDOW


def _plan(tmp_path, capsys, state: dict) -> dict:
    assert main(["plan", str(write_state(tmp_path, state))]) == 0
    return json.loads(capsys.readouterr().out)


def _by_job(plan: dict) -> dict:
    return {d["job"]: d for d in plan["decisions"]}


def test_known_jobs_say_what_is_promised(tmp_path, capsys):
    decisions = _by_job(_plan(tmp_path, capsys, base()))
    guaranteed = decisions["a"]["estimate"]
    assert guaranteed["phase"] == "estimated" and guaranteed["promise"] == "firm"
    assert guaranteed["seconds"] == 3000 and guaranteed["guaranteed_deadline"] == 6000
    assert guaranteed["measured"] == 500
    best_effort = decisions["c"]["estimate"]
    assert best_effort["phase"] == "estimated" and best_effort["promise"] == "none"


def test_unknown_runtime_is_measured_and_promised_nothing_yet(tmp_path, capsys):
    state = base()
    del state["pending"][0]["estimate_seconds"]  # b: 4 GPUs, deadline 4000, runtime unknown
    running = {"id": "m", "gpus": 2, "submit": 900, "placement": {"node0": [2, 3]}}
    state["running"].append({**running, "progress_seconds": 100, "deadlines": [{"at": 9000}]})
    plan = _plan(tmp_path, capsys, state)
    decisions = _by_job(plan)
    waiting = decisions["b"]
    assert waiting["guaranteed"] is False
    assert waiting["estimate"]["phase"] in ("unknown", "measuring")
    assert waiting["estimate"]["promise"] == "tentative"
    assert waiting["estimate"]["seconds"] is None
    assert "runtime unknown" in waiting["reason"]
    measuring = decisions["m"]["estimate"]
    assert measuring["phase"] == "measuring" and measuring["measured"] == 100
    answer_by = 1000 + MEASURE_WINDOW - 100
    assert measuring["answer_by"] == pytest.approx(answer_by)
    assert plan["next_decision"] <= answer_by
    assert "m" not in plan["lease_plan"] and "b" not in plan["lease_plan"]


def test_profile_band_is_the_estimate_band(tmp_path, capsys):
    import numpy as np

    from chronus_py.profiler import Profile
    from chronus_py.samples import Sample, Samples

    rng = np.random.default_rng(0)
    samples = Samples(
        tuple(
            Sample(
                "toy", (g,) if g <= 4 else (4, g - 4), rng.normal(0.1 + 0.01 * g, 0.005, 50), "toy"
            )
            for g in (1, 2, 4, 8)
        )
    )
    profile = Profile(gpus_per_node=4).fit(samples)
    (tmp_path / "toy.json").write_text(json.dumps(profile.to_dict()))
    state = base()
    del state["pending"][0]["estimate_seconds"]
    state["pending"][0]["profile"] = {"file": "toy.json", "iterations": 10000}
    estimate = _by_job(_plan(tmp_path, capsys, state))["b"]["estimate"]
    assert estimate["phase"] == "estimated"
    assert estimate["low"] < estimate["seconds"] < estimate["high"]


@pytest.mark.parametrize(
    "change, message",
    [
        (
            {"guaranteed_deadline": 6000, "estimate_seconds": ...},
            "running[0].guaranteed_deadline: a guarantee needs an estimate",
        ),
        (
            {"progress_seconds": 900, "estimate_seconds": ..., "guaranteed_deadline": None},
            "running[0]: progress_seconds 900 is past the 300 s measurement window",
        ),
    ],
)
def test_unknown_runtime_errors_name_the_job(tmp_path, capsys, change, message):
    state = base()
    job = state["running"][0]
    for key, value in change.items():
        if value is ...:
            del job[key]
        else:
            job[key] = value
    assert main(["plan", str(write_state(tmp_path, state))]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
