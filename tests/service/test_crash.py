"""Crash safety: SIGKILL the daemon at 22 random points of a workload driven through the HTTP
API, restart it each time, and check what an operator relies on.

- no accepted job is lost: every job answered 201 exists after every restart, with the
  admission it was answered (the answer comes only after the commit);
- no promise is forgotten or silently changed: each answered guarantee is still the job's
  guarantee at the end and was met, unless the database records its withdrawal (``demoted``).
  Withdrawals happen only when the downtime ate the capacity the plan held for a job: the
  simulated cluster runs on while the daemon is dead, and on a loaded machine a restart takes
  seconds (thousands of simulated seconds), so an outage can break a promise, visibly;
- no GPU is double-booked and no job started twice: checked on the simulated cluster's own
  command log, folded here independently of the backend's code;
- the final first-deadline ratio matches an uninterrupted run of the same workload within 0.1.
  Why 0.1: a kill stops all decisions for one restart (1-5 s wall on this machine, 100-500
  simulated seconds at --speed 100) while the simulated cluster runs on, so starts after a kill
  come later than in the uninterrupted run. Deadlines (set when a job is sent) give each job
  1,800 s beyond three times its work, more than a slow restart costs, so a job only misses if
  several restarts fall on it; 0.1 is 4 of the 44 SLO jobs.
"""

from __future__ import annotations

import math
import random
import sqlite3
import threading
import time

import httpx
from serving import Server

SPEED = 100.0
NODES = (
    "--nodes",
    "8",
    "--gpus-per-node",
    "8",
    "--speed",
    str(SPEED),
    "--headroom",
    "0.5",
    "--solver",
    "greedy",
)
KILLS = 22


def workload(seed: int = 7) -> list[tuple[float, dict]]:
    """(simulated submission time, body): 66 jobs, one every 10 simulated seconds; SLO jobs
    (two in three) get their deadline when sent (``slack``: 3 x work + 1,800 s)."""
    rng = random.Random(seed)
    out = []
    for i in range(66):
        est = rng.choice((60.0, 120.0, 180.0, 300.0))
        body = {"id": f"j{i:03d}", "gpus": rng.choice((1, 2, 4, 8)), "estimate_seconds": est}
        if i % 3:
            body["slack"] = 3 * est + 1800.0
        out.append((20.0 + 10.0 * i, body))
    return out


class Driver(threading.Thread):
    """Submits the workload at its simulated times, through restarts: a request cut by a kill
    is checked after the restart and sent again if the server never committed it."""

    def __init__(self, url: str):
        super().__init__(daemon=True)
        self.http = httpx.Client(base_url=url, timeout=10)
        self.answered: dict[str, dict] = {}
        self.done = False

    def call(self, method: str, path: str, **kw) -> httpx.Response:
        while True:
            try:
                return self.http.request(method, path, **kw)
            except httpx.TransportError:
                time.sleep(0.05)

    def run(self) -> None:
        for at, body in workload():
            while (now := self.call("GET", "/v1/cluster").json()["now"]) < at:
                time.sleep(0.01)
            slack = body.pop("slack", None)
            if slack is not None:
                body["deadlines"] = [{"at": now + slack}]
            while True:
                try:
                    r = self.http.post("/v1/jobs", json=body)
                except httpx.TransportError:
                    got = self.call("GET", f"/v1/jobs/{body['id']}")
                    if got.status_code == 200:  # committed before the kill: not answered
                        break
                    continue
                assert r.status_code == 201, r.text
                self.answered[body["id"]] = r.json()["admission"]
                break
        self.done = True


def run_workload(serve, tmp_path, *, kills: int) -> tuple[dict, dict, Server]:
    server = serve(*NODES, workdir=tmp_path)
    driver = Driver(server.url)
    driver.start()
    rng = random.Random(11)
    for k in range(kills):
        # Kill points spread over the submissions (3 jobs apart), each at a random instant
        # that often falls inside a request or a round, and never before the daemon has had
        # some time to schedule (back-to-back kills would only measure restarts).
        while len(driver.answered) < 3 * k and not driver.done:
            time.sleep(0.005)
        time.sleep(rng.uniform(0.15, 0.6))
        server.kill()
        answered = dict(driver.answered)  # before the restart: later answers may race the list
        server.start()
        jobs = {j["id"]: j for j in server.http.get("/v1/jobs").json()["jobs"]}
        for job_id, admission in answered.items():
            assert job_id in jobs, f"accepted job {job_id} lost"
            assert jobs[job_id]["admission"] == admission
    driver.join(timeout=60)
    driver.http.close()
    assert driver.done
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        jobs = {j["id"]: j for j in server.http.get("/v1/jobs").json()["jobs"]}
        if len(jobs) == 66 and all(j["state"] == "finished" for j in jobs.values()):
            break
        time.sleep(0.2)
    else:
        raise AssertionError("jobs did not finish")
    return jobs, driver.answered, server


def first_deadline_ratio(jobs: dict) -> float:
    slo = [j for j in jobs.values() if j["deadlines"]]
    return sum(j["met_first_deadline"] for j in slo) / len(slo)


def fold_commands(path) -> None:
    """Replay the sim's command log with the replay world's rules (overhead 30 s x (1 + log2 g)
    per start) and fail on a start onto a busy GPU or of a job already running."""
    conn = sqlite3.connect(path)
    rows = conn.execute("SELECT kind, job, at, data FROM command ORDER BY seq").fetchall()
    conn.close()
    import json

    work, gpus_of, starts = {}, {}, {}
    running: dict[str, tuple[float, float, set]] = {}  # job -> (since, service before, gpus)
    service: dict[str, float] = {}
    owner: dict[tuple, str] = {}

    def complete_until(t: float) -> None:
        for job_id, (since, before, held) in list(running.items()):
            need = work[job_id] + starts[job_id] * 30.0 * (1 + math.log2(gpus_of[job_id]))
            if since + need - before <= t:
                del running[job_id]
                for g in held:
                    del owner[g]

    for kind, job_id, at, data in rows:
        complete_until(at)
        data = json.loads(data) if data else None
        if kind == "submit":
            work[job_id] = data["work"]
            gpus_of[job_id] = data["spec"]["gpus"]
            starts[job_id] = 0
            service[job_id] = 0.0
        elif kind == "start":
            assert job_id not in running, f"{job_id} started while running"
            held = {(n, g) for n, gs in data.items() for g in gs}
            assert len(held) == gpus_of[job_id]
            for g in held:
                assert g not in owner, f"{g} double-booked: {owner[g]} and {job_id} at {at}"
                owner[g] = job_id
            starts[job_id] += 1
            running[job_id] = (at, service[job_id], held)
        elif kind in ("preempt", "cancel") and job_id in running:
            since, before, held = running.pop(job_id)
            service[job_id] = before + at - since
            for g in held:
                del owner[g]


def test_sigkill_at_22_points_loses_nothing(serve, tmp_path):
    (tmp_path / "calm").mkdir()
    (tmp_path / "kills").mkdir()
    calm, _, _ = run_workload(serve, tmp_path / "calm", kills=0)
    jobs, answered, server = run_workload(serve, tmp_path / "kills", kills=KILLS)
    assert server.log.read_text().count('"event": "listening"') == KILLS + 1
    demoted = {
        job
        for (job,) in sqlite3.connect(tmp_path / "kills" / "chronus.db").execute(
            "SELECT job FROM promise WHERE event='demoted'"
        )
    }
    for job_id, admission in answered.items():
        promised = admission.get("deadline")
        assert jobs[job_id]["admission"] == admission
        if promised is not None and job_id not in demoted:
            assert jobs[job_id]["guaranteed"] == promised, f"promise of {job_id} changed"
            assert jobs[job_id]["finished_at"] <= promised["at"], f"{job_id} missed its promise"
    assert any(a["decision"] == "guaranteed" for a in answered.values())
    fold_commands(tmp_path / "kills" / "chronus.db.sim")
    assert abs(first_deadline_ratio(jobs) - first_deadline_ratio(calm)) <= 0.1


def test_losing_the_database_keeps_what_runs(serve, tmp_path):
    """The database gone, the service rebuilds from the cluster: running jobs keep their GPUs
    (never started again), waiting ones are scheduled; only promises and history are lost."""
    server = serve("--nodes", "4", "--gpus-per-node", "8", "--speed", "10")  # nothing finishes
    for i in range(6):
        r = server.http.post(
            "/v1/jobs", json={"id": f"k{i}", "gpus": 8, "estimate_seconds": 36000.0}
        )
        assert r.status_code == 201
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        before = {j["id"]: j for j in server.http.get("/v1/jobs").json()["jobs"]}
        if sum(j["state"] == "running" for j in before.values()) == 4:
            break
        time.sleep(0.05)
    server.kill()
    for suffix in ("", "-wal", "-shm"):
        (tmp_path / f"chronus.db{suffix}").unlink(missing_ok=True)
    server.start()
    time.sleep(0.5)
    after = {j["id"]: j for j in server.http.get("/v1/jobs").json()["jobs"]}
    assert set(after) == set(before)
    for job_id, job in before.items():
        assert after[job_id]["state"] == job["state"]
        assert after[job_id]["placement"] == job["placement"]
        assert "recovered" in after[job_id]["admission"]["reason"]
    fold_commands(tmp_path / "chronus.db.sim")
    starts = (
        sqlite3.connect(tmp_path / "chronus.db.sim")
        .execute("SELECT COUNT(*) FROM command WHERE kind='start'")
        .fetchone()[0]
    )
    assert starts == 4
