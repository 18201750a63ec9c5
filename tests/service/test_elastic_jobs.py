"""Elastic jobs through ``chronus serve`` over real HTTP (issue 15): admission gives a job its
smallest size that still meets its deadline, the answer says the size, the sim runs it at that
size, and a restart keeps it; bad elastic fields are 422s naming the field (on one server
shared by the refusals: a refused job leaves nothing behind)."""

from __future__ import annotations

from pathlib import Path

import pytest
from polling import wait_for
from serving import TOKENS, A, running

from chronus_py.jobs.throughputs import read_throughputs

REPO = Path(__file__).resolve().parents[2]
RATE = read_throughputs(REPO / "traces" / "elasticflow" / "throughputs_A100").curve("resnet50", 256)


def _job(http, job_id: str) -> dict:
    return http.get(f"/v1/jobs/{job_id}", headers=A).json()


@pytest.fixture
def args(tmp_path) -> tuple[str, ...]:
    (tmp_path / "tokens.yaml").write_text(TOKENS)
    return ("--tokens", str(tmp_path / "tokens.yaml"), "--nodes", "4", "--speed", "50")


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    with running(tmp_path_factory.mktemp("elastic"), "--nodes", "4", "--speed", "50") as server:
        yield server


def test_elastic_jobs_are_sized_answered_run_and_kept(serve, args):
    server = serve(*args)
    http = server.http
    now = http.get("/v1/cluster", headers=A).json()["now"]
    work = {"batch": 256, "iterations": 20000}
    loose = {"id": "loose", "model": "resnet50", "elastic": work, "deadlines": [{"at": now + 1e5}]}
    tight = {**loose, "id": "tight", "deadlines": [{"at": now + 20000 / RATE[4] + 3000}]}
    for body in (loose, tight):
        r = http.post("/v1/jobs", headers=A, json=body)
        assert r.status_code == 201, r.text
        assert r.json()["admission"]["decision"] == "guaranteed"
    small, large = _job(http, "loose"), _job(http, "tight")
    assert small["gpus"] == 1 and small["elastic"] == work
    assert large["gpus"] > 1 and large["estimate_seconds"] == pytest.approx(
        20000 / RATE[large["gpus"]]
    )
    running = wait_for(lambda: _job(http, "tight")["state"] == "running")
    assert running and sum(map(len, _job(http, "tight")["placement"].values())) == large["gpus"]

    server.kill()
    again = serve(*args)
    after = _job(again.http, "tight")
    assert after["gpus"] == large["gpus"] and after["guaranteed"] == large["guaranteed"]


@pytest.mark.parametrize(
    "body, field",
    [
        ({"model": "resnet50", "elastic": {"iterations": 10}}, "elastic.batch"),
        ({"elastic": {"batch": 256, "iterations": 10}}, "model"),
        ({"model": "alexnet", "elastic": {"batch": 256, "iterations": 10}}, "model"),
        (
            {"model": "resnet50", "elastic": {"batch": 256, "iterations": 10, "size": 2}},
            "elastic.size",
        ),
        (
            {
                "model": "resnet50",
                "elastic": {"batch": 256, "iterations": 10},
                "estimate_seconds": 5,
            },
            "estimate_seconds",
        ),
    ],
)
def test_bad_elastic_fields_are_refused_naming_the_field(shared, body, field):
    r = shared.http.post("/v1/jobs", headers=A, json=body)
    assert r.status_code == 422 and r.json()["field"] == field, r.text


def test_an_elastic_range_without_a_size_is_rejected(shared):
    """Well-formed (the schema cannot relate min_gpus to max_gpus) but never runnable: a 200,
    not submitted, admission rejected naming the field."""
    body = {
        "model": "resnet50",
        "elastic": {"batch": 256, "iterations": 10, "min_gpus": 8, "max_gpus": 2},
    }
    r = shared.http.post("/v1/jobs", headers=A, json=body)
    assert r.status_code == 200 and r.json()["admission"]["decision"] == "rejected"
    assert r.json()["admission"]["reason"].startswith("elastic.min_gpus: must be <= max_gpus")
    assert shared.http.get("/v1/jobs", headers=A).json()["jobs"] == []
