"""A job nobody can give a runtime for (issue 14), through ``chronus serve`` over real HTTP: it
is taken in tentatively, measured in place from its progress reports, admitted on its first
estimate, and every answer says its estimate state - also after a kill -9."""

from __future__ import annotations

from polling import wait_for
from serving import TOKENS, A


def _job(http, job_id: str) -> dict:
    return http.get(f"/v1/jobs/{job_id}", headers=A).json()


def test_unknown_runtime_is_measured_then_admitted(serve, tmp_path):
    (tmp_path / "tokens.yaml").write_text(TOKENS)
    args = ("--tokens", str(tmp_path / "tokens.yaml"), "--nodes", "2", "--speed", "200")
    server = serve(*args)
    http = server.http
    now = http.get("/v1/cluster", headers=A).json()["now"]
    body = {"id": "u1", "gpus": 1, "iterations": 1000, "deadlines": [{"at": now + 50000}]}

    r = http.post("/v1/jobs", headers=A, json={k: v for k, v in body.items() if k != "iterations"})
    assert r.status_code == 422 and r.json()["field"] == "estimate_seconds"
    r = http.post("/v1/jobs", headers=A, json=body)  # well-formed, but the sim needs its work
    assert r.status_code == 200 and r.json()["admission"]["decision"] == "rejected"
    assert r.json()["admission"]["reason"].startswith("duration_seconds: ")

    r = http.post("/v1/jobs", headers=A, json={**body, "duration_seconds": 4000})
    assert r.status_code == 201, r.text
    assert r.json()["admission"]["decision"] == "tentative"
    view = _job(http, "u1")
    assert view["estimate_seconds"] is None  # its probe is no estimate
    estimate = view["estimate"]
    assert estimate["phase"] in ("unknown", "measuring")
    assert estimate["promise"] == "tentative" and estimate["seconds"] is None

    running = wait_for(lambda: _job(http, "u1")["estimate"]["phase"] == "measuring")
    assert running
    r = http.post("/v1/jobs/u1/progress", headers=A, json={"iterations_done": 1})
    assert r.status_code == 200 and not r.json()["reestimated"]  # not measured long enough

    def measured() -> dict | None:
        r = http.post("/v1/jobs/u1/progress", headers=A, json={"iterations_done": 100})
        return r.json() if r.json()["reestimated"] else None

    view = wait_for(measured)
    assert view["estimate"]["phase"] == "estimated"
    assert view["estimate"]["promise"] == "firm"
    assert view["guaranteed"] == {"at": now + 50000, "value": 1}
    seconds = view["estimate"]["seconds"]
    assert seconds >= 300 / 0.1  # at least the window over the share done
    assert view["estimate_seconds"] == seconds

    server.kill()
    server = serve(*args)
    after = _job(server.http, "u1")
    assert after["estimate"]["phase"] == "estimated"
    assert after["guaranteed"] == {"at": now + 50000, "value": 1}
