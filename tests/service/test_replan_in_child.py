"""The lease re-plan runs in a child process on a fork of the scheduler and is committed under
the scheduler's lock (issue 27): requests go on meanwhile, and what the service answers and
records afterwards agrees with the committed plan."""

from __future__ import annotations

import json
import time

from serving import Server


def events(server: Server, name: str) -> list[dict]:
    out = []
    for line in server.log.read_text().splitlines():
        if f'"{name}"' in line:
            fields = json.loads(line.split(" ", 3)[3])
            if fields["event"] == name:
                out.append(fields)
    return out


def test_replans_commit_and_promises_agree_with_the_plan(tmp_path):
    # 100-second leases at 200 simulated seconds per second: a re-plan every 0.5 wall seconds.
    server = Server(
        tmp_path, "--nodes", "4", "--speed", "200", "--lease", "100", "--headroom", "0.5"
    ).start()
    try:
        http = server.http
        now = http.get("/v1/cluster").json()["now"]
        for i in range(12):
            body = {
                "id": f"j{i}",
                "gpus": 2,
                "estimate_seconds": 2000 + 100 * i,
                "deadlines": [{"at": now + 30000 + 1000 * i}],
            }
            assert http.post("/v1/jobs", json=body).status_code == 201
        deadline = time.monotonic() + 30
        while len(events(server, "replan_committed")) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        committed = events(server, "replan_committed")
        assert len(committed) >= 3 and all(c["ok"] for c in committed)
        assert len(events(server, "replan_started")) >= len(committed)
        time.sleep(0.5)  # a round after the last commit records its promises
        plan = http.get("/v1/plan").json()
        jobs = {j["id"]: j for j in http.get("/v1/jobs").json()["jobs"]}
        active = {i for i, j in jobs.items() if j["state"] in ("pending", "running")}
        guaranteed = {i for i, j in jobs.items() if j["guaranteed"] is not None}
        assert guaranteed and guaranteed & active <= set(plan["lease_plan"]) | {
            d["job"] for d in plan["decisions"] if d["action"] in ("continue", "start")
        }
        for decision in plan["decisions"]:
            job = jobs[decision["job"]]
            assert decision["guaranteed"] == (job["guaranteed"] is not None)
    finally:
        assert server.stop() == 0
        server.http.close()
    assert "Traceback" not in server.log.read_text()
