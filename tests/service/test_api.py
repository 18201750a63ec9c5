"""The HTTP API end to end: a real ``chronus serve`` (sim backend) over real HTTP."""

from __future__ import annotations

import time

import pytest
from polling import wait_for
from serving import ADMIN, TOKENS, A, B, running

ARGS = ("--nodes", "4", "--speed", "50", "--headroom", "0.5")


@pytest.fixture
def server(serve, tmp_path):
    (tmp_path / "tokens.yaml").write_text(TOKENS)
    return serve("--tokens", str(tmp_path / "tokens.yaml"), *ARGS)


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One server for the tests that only read, are refused, or keep to job ids of their own
    on a cluster with room for all of them (nothing one does changes what another sees)."""
    with running(tmp_path_factory.mktemp("shared"), *ARGS) as server:
        yield server


def test_submit_guarantee_status_plan_and_cancel(server):
    http = server.http
    now = http.get("/v1/cluster", headers=A).json()["now"]
    r = http.post(
        "/v1/jobs",
        headers=A,
        json={"id": "j1", "gpus": 8, "estimate_seconds": 3600, "deadlines": [{"at": now + 20000}]},
    )
    assert r.status_code == 201, r.text
    admission = r.json()["admission"]
    assert admission["decision"] == "guaranteed"
    assert admission["deadline"]["at"] == now + 20000
    job = wait_for(
        lambda: (j := http.get("/v1/jobs/j1", headers=A).json())["state"] == "running" and j
    )
    assert job["tenant"] == "team-a" and job["guaranteed"]["at"] == now + 20000
    assert sum(len(g) for g in job["placement"].values()) == 8
    plan = http.get("/v1/plan", headers=A).json()
    assert [d["job"] for d in plan["decisions"]] == ["j1"]
    assert plan["lease_plan"]["j1"]
    r = http.delete("/v1/jobs/j1", headers=A)
    assert r.status_code == 200 and r.json()["state"] == "cancelled"
    listed = http.get("/v1/jobs?state=cancelled", headers=A).json()["jobs"]
    assert [r.json()] == [j for j in listed if j["id"] == "j1"]  # the answer is the record
    wait_for(lambda: http.get("/v1/cluster", headers=A).json()["free_gpus"] == 32)


def test_dry_run_answers_without_submitting(shared):
    http = shared.http
    now = http.get("/v1/cluster", headers=A).json()["now"]
    body = {"id": "d1", "gpus": 8, "estimate_seconds": 3600, "deadlines": [{"at": now + 20000}]}
    r = http.post("/v1/jobs?dry_run=true", headers=A, json=body)
    assert r.status_code == 200 and r.json()["admission"]["decision"] == "guaranteed"
    assert http.get("/v1/jobs/d1", headers=A).status_code == 404
    assert (
        http.post("/v1/jobs", headers=A, json=body).json()["admission"]["decision"] == "guaranteed"
    )


def test_refused_rejected_and_not_guaranteed_say_why(server):
    """The refusal rule: a request that breaks the published schema (here: more GPUs than its
    `maximum`, the cluster's size) is a 422 naming the field; a well-formed job the service
    cannot run (its last deadline past) is a 200, not submitted, admission rejected. A dry run
    gets the same answers."""
    http = server.http
    now = http.get("/v1/cluster", headers=A).json()["now"]
    for query in ("", "?dry_run=true"):
        r = http.post(f"/v1/jobs{query}", headers=A, json={"gpus": 64, "estimate_seconds": 60})
        assert r.status_code == 422
        assert r.json() == {"error": "expected at most the cluster's 32", "field": "gpus"}
        late = {"gpus": 1, "estimate_seconds": 60, "deadlines": [{"at": 2}, {"at": 1}]}
        r = http.post(f"/v1/jobs{query}", headers=A, json=late)
        assert r.status_code == 200 and not r.json()["submitted"]
        assert r.json()["admission"]["decision"] == "rejected"
        assert r.json()["admission"]["reason"].startswith("deadlines[1].at: the last deadline (2)")
        far = {"gpus": 1, "estimate_seconds": 60, "deadlines": [{"at": now + 1e16}]}
        r = http.post(f"/v1/jobs{query}", headers=A, json=far)
        assert r.json()["admission"]["decision"] == "rejected"
        assert "planning horizon" in r.json()["admission"]["reason"]
    assert http.get("/v1/jobs", headers=A).json()["jobs"] == []
    r = http.post("/v1/jobs", headers=A, json={"gpus": 1, "estimate_seconds": 60})
    assert r.json()["admission"]["decision"] == "not_guaranteed"
    assert "best-effort" in r.json()["admission"]["reason"]
    r = http.post(
        "/v1/jobs",
        headers=A,
        json={"gpus": 1, "estimate_seconds": 1e6, "deadlines": [{"at": now + 3600}]},
    )
    assert r.json()["admission"]["decision"] == "not_guaranteed"
    assert "even alone" in r.json()["admission"]["reason"]


@pytest.mark.parametrize(
    "body, status, field",
    [
        ({"gpus": "x", "estimate_seconds": 1}, 422, "gpus"),
        ({"gpus": 0, "estimate_seconds": 1}, 422, "gpus"),
        ({"gpus": 1}, 422, "estimate_seconds"),
        ({"gpus": 1, "estimate_seconds": -5}, 422, "estimate_seconds"),
        ({"gpus": 1, "estimate_seconds": 5, "deadlines": [{"at": "soon"}]}, 422, "deadlines[0].at"),
        ({"gpus": 1, "estimate_seconds": 5, "deadlines": {"at": 9}}, 422, "deadlines"),
        ({"gpus": 1, "estimate_seconds": 5, "colour": "red"}, 422, "colour"),
        ({"gpus": 1, "estimate_seconds": 5, "tenant": "team-b"}, 403, "tenant"),
        ({"gpus": 1, "estimate_seconds": 5, "model": None}, 422, "model"),
        ({"gpus": 1.5, "estimate_seconds": 5}, 422, "gpus"),
        ({"gpus": 1, "estimate_seconds": 5, "id": "a b"}, 422, "id"),
        ([1, 2], 422, "body"),
    ],
)
def test_bad_bodies_name_the_field(shared, body, status, field):
    r = shared.http.post("/v1/jobs", headers=A, json=body)
    assert r.status_code == status, r.text
    assert r.json()["field"] == field


def test_malformed_and_oversized_requests(shared):
    http = shared.http
    JSON = {**A, "Content-Type": "application/json"}
    r = http.post("/v1/jobs", headers=JSON, content=b"{not json")
    assert r.status_code == 400 and r.json()["field"] == "body"
    r = http.post("/v1/jobs", headers=JSON, content=b'{"gpus": 1, "estimate_seconds": NaN}')
    assert r.status_code == 422 and r.json()["field"] == "estimate_seconds"
    r = http.post("/v1/jobs", headers=JSON, content=b"[" + b"1," * 40000 + b"1]")
    assert r.status_code == 413
    assert http.post("/v1/jobs?dry_run=maybe", headers=A, json={}).json()["field"] == "dry_run"
    assert http.get("/v1/jobs?state=lost", headers=A).json()["field"] == "state"
    assert http.get("/v1/jobs?limit=0", headers=A).json()["field"] == "limit"
    assert http.get("/v1/nothing", headers=A).status_code == 404
    assert http.put("/v1/jobs", headers=A).status_code == 405
    r = http.post("/v1/jobs/x/progress", headers=A, json={"iterations_done": 1})
    assert r.status_code == 404


def test_auth_tenants_and_admin(server):
    http = server.http
    assert http.get("/v1/jobs").status_code == 401
    assert (
        http.get("/v1/jobs", headers={"Authorization": "Bearer wrong-token-000000000"}).status_code
        == 401
    )
    assert (
        http.post(
            "/v1/jobs", headers=A, json={"id": "a1", "gpus": 1, "estimate_seconds": 600}
        ).status_code
        == 201
    )
    assert http.get("/v1/jobs/a1", headers=B).status_code == 404
    assert http.delete("/v1/jobs/a1", headers=B).status_code == 404
    assert http.get("/v1/jobs", headers=B).json()["jobs"] == []
    assert [j["id"] for j in http.get("/v1/jobs", headers=A).json()["jobs"]] == ["a1"]
    r = http.post(
        "/v1/jobs",
        headers=ADMIN,
        json={"id": "b1", "gpus": 1, "estimate_seconds": 600, "tenant": "team-b"},
    )
    assert r.status_code == 201
    assert http.get("/v1/jobs/b1", headers=B).json()["tenant"] == "team-b"
    # A tenant's ids are its own: an admin sees them in full, TENANT:ID.
    all_ids = {j["id"] for j in http.get("/v1/jobs", headers=ADMIN).json()["jobs"]}
    assert all_ids == {"team-a:a1", "b1"}
    assert (
        http.post(
            "/v1/jobs", headers=A, json={"id": "a1", "gpus": 1, "estimate_seconds": 1}
        ).status_code
        == 409
    )
    assert "team-a-token" not in server.log.read_text()


def test_progress_reestimates(shared):
    http = shared.http
    http.post(
        "/v1/jobs",
        headers=A,
        json={"id": "p1", "gpus": 1, "estimate_seconds": 3600, "iterations": 1000},
    )
    wait_for(lambda: http.get("/v1/jobs/p1", headers=A).json()["state"] == "running")
    time.sleep(1.0)  # 50 simulated seconds at --speed 50, well past the restart overhead
    r = http.post("/v1/jobs/p1/progress", headers=A, json={"iterations_done": 100})
    assert r.status_code == 200 and r.json()["reestimated"]
    assert r.json()["estimate_seconds"] != 3600
    r = http.post("/v1/jobs/p1/progress", headers=A, json={"iterations_done": 5000})
    assert r.status_code == 409 and r.json()["field"] == "iterations_done"  # it has 1,000


def test_metrics_openapi_and_health(server):
    http = server.http
    http.post("/v1/jobs", headers=A, json={"gpus": 1, "estimate_seconds": 60})
    metrics = http.get("/metrics").text
    assert 'chronus_submissions_total{decision="not_guaranteed"} 1.0' in metrics
    assert "chronus_round_seconds_bucket" in metrics
    assert "chronus_admission_seconds_count 1.0" in metrics
    # answered from the connection (``_Api.direct``), timed as its handler through the app is
    assert 'chronus_request_seconds_count{handler="submit"} 1.0' in metrics
    spec = http.get("/openapi.json").json()
    assert spec["openapi"].startswith("3.") and "/v1/jobs" in spec["paths"]
    assert http.get("/healthz").json()["backend"] == "sim"


def test_sigterm_shuts_down_cleanly(server):
    assert server.stop() == 0
    assert '"event": "stopped"' in server.log.read_text()


def test_no_tokens_means_loopback_only(tmp_path):
    import subprocess
    import sys

    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "chronus_py",
            "serve",
            "--listen",
            "0.0.0.0:0",
            "--db",
            str(tmp_path / "x.db"),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "without --tokens" in r.stderr
    assert not (tmp_path / "x.db").exists()


def test_config_file_and_check(tmp_path):
    import subprocess
    import sys

    (tmp_path / "serve.yaml").write_text("nodes: 2\nspeed: 10\npolicy: edf\n")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "chronus_py",
            "serve",
            "--config",
            str(tmp_path / "serve.yaml"),
            "--check",
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0 and "config OK" in r.stdout and "policy: edf" in r.stdout
    (tmp_path / "bad.yaml").write_text("nodez: 2\n")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "chronus_py",
            "serve",
            "--config",
            str(tmp_path / "bad.yaml"),
            "--check",
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "nodez: unknown option" in r.stderr


def test_host_layer_configs_follow_placements(serve, tmp_path):
    from pathlib import Path

    model = Path(__file__).resolve().parents[2] / "examples" / "hosts" / "2socket-8gpu.yaml"
    (tmp_path / "hosts.yaml").write_text(f"node0: {model}\n")
    server = serve(
        "--nodes",
        "1",
        "--gpus-per-node",
        "8",
        "--speed",
        "10",
        "--layers-dir",
        str(tmp_path / "layers"),
        "--hosts",
        str(tmp_path / "hosts.yaml"),
    )
    http = server.http
    r = http.post(
        "/v1/jobs",
        json={
            "id": "l1",
            "gpus": 8,
            "estimate_seconds": 36000,
            "cgroup": "training.slice/l1.scope",
        },
    )
    assert r.status_code == 201
    path = tmp_path / "layers" / "node0.json"
    wait_for(path.exists)
    served = http.get("/v1/hosts/node0/layers")
    assert served.status_code == 200 and served.text == path.read_text()
    assert "training.slice/l1.scope" in path.read_text()
    assert (tmp_path / "layers" / "node0.env").exists()
    http.delete("/v1/jobs/l1")
    wait_for(lambda: not path.exists())
    assert http.get("/v1/hosts/node0/layers").json()["field"] == "node"


def test_trace_jobs_enter_through_the_backend(serve):
    server = serve("--trace", "philly-slo", "--speed", "2000")
    jobs = wait_for(lambda: server.http.get("/v1/jobs").json()["jobs"])
    first = jobs[0]
    assert first["submit"] >= 0 and first["admission"]["decision"] in (
        "guaranteed",
        "not_guaranteed",
    )
    assert first["tenant"] != "default"  # the trace's tenant
