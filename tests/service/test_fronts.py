"""``chronus serve --http-workers N``: front processes read HTTP and forward to the scheduler
process, and the service keeps the single process's guarantees: a 201 only after the commit and
a read after it sees the job, tenants apart, one ``/metrics``; a killed front is replaced; a
killed scheduler takes its fronts with it (the port is free for the restart, which has every
accepted job); SIGTERM stops all of it."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from polling import wait_for
from serving import ADMIN, TOKENS, A, B, Server


def fronts_of(server: Server) -> list[int]:
    """The process ids of the server's front processes (its children running ``front``)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == server.proc.pid and b"chronus_py.service.front" in cmdline:
            out.append(int(stat.parent.name))
    return sorted(out)


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture
def start(serve, tmp_path):
    """``start(port=None)``: a server with two fronts on 2 nodes, stopped at the test's end."""
    (tmp_path / "tokens.yaml").write_text(TOKENS)

    def start(port: int | None = None) -> Server:
        tokens = str(tmp_path / "tokens.yaml")
        return serve("--tokens", tokens, "--nodes", "2", "--http-workers", "2", port=port)

    return start


def job(job_id: str) -> dict:
    return {"id": job_id, "gpus": 1, "estimate_seconds": 3600}


def test_fronts_answer_as_the_single_process(start):
    server = start()
    assert len(wait_for(lambda: len(fronts_of(server)) == 2 and fronts_of(server))) == 2
    http = server.http
    for i in range(20):  # over several connections, so both fronts serve some
        got = http.post("/v1/jobs", json=job(f"j{i}"), headers=A)
        assert got.status_code == 201, got.text
        assert http.get(f"/v1/jobs/j{i}", headers=A).json()["id"] == f"j{i}"
        assert http.get(f"/v1/jobs/j{i}", headers=B).status_code == 404
        http.close()
        http = server.http = type(http)(base_url=server.url, timeout=30)
    assert http.post("/v1/jobs", json=job("j0"), headers=A).status_code == 409
    json_type = {**A, "Content-Type": "application/json"}
    wrong = http.post("/v1/jobs", content=b'{"id": "x", "gpus": NaN}', headers=json_type)
    assert wrong.status_code == 422 and wrong.json()["field"] == "gpus"
    allow = http.put("/v1/jobs", headers=A).headers["allow"]
    assert set(allow.split(", ")) == {"POST", "GET", "HEAD"}
    assert http.get("/v1/jobs", headers=ADMIN).json()["next_after"] is None
    assert len(http.get("/v1/jobs", headers=ADMIN).json()["jobs"]) == 20
    metrics = http.get("/metrics").text
    assert 'chronus_submissions_total{decision="not_guaranteed"} 20.0' in metrics
    assert http.delete("/v1/jobs/j1", headers=A).json()["state"] == "cancelled"
    assert server.stop() == 0
    assert not fronts_of(server)


def test_a_killed_front_is_replaced(start):
    server = start()
    before = wait_for(lambda: len(fronts_of(server)) == 2 and fronts_of(server))
    os.kill(before[0], signal.SIGKILL)
    after = wait_for(lambda: (f := fronts_of(server)) and before[0] not in f and len(f) == 2 and f)
    assert before[1] in after
    for i in range(4):
        assert server.http.post("/v1/jobs", json=job(f"k{i}"), headers=A).status_code == 201
    assert '"event": "front_restarted"' in server.log.read_text()


def test_a_killed_scheduler_takes_its_fronts_and_loses_nothing(start):
    server = start()
    fronts = wait_for(lambda: len(fronts_of(server)) == 2 and fronts_of(server))
    assert server.http.post("/v1/jobs", json=job("kept"), headers=A).status_code == 201
    server.kill()
    wait_for(lambda: not any(alive(pid) for pid in fronts), timeout=5)
    again = start(port=server.port)  # the same port and database
    assert again.http.get("/v1/jobs/kept", headers=A).json()["id"] == "kept"
