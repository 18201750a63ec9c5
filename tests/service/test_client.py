"""The client side: ``chronus submit / status / cancel / jobs`` and the Python client, against a
real server with tokens."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from chronus_py.service.client import Client, ClientError

TOKENS = """tokens:
  - {token: "team-a-token-0123456789", tenant: team-a}
"""


@pytest.fixture
def server(serve, tmp_path):
    (tmp_path / "tokens.yaml").write_text(TOKENS)
    (tmp_path / "token").write_text("team-a-token-0123456789\n")
    return serve("--tokens", str(tmp_path / "tokens.yaml"), "--nodes", "2", "--speed", "10")


def chronus(server, tmp_path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "CHRONUS_SERVER": server.url}
    return subprocess.run(
        [sys.executable, "-m", "chronus_py", *args, "--token-file", str(tmp_path / "token")],
        capture_output=True,
        text=True,
        env=env,
    )


def test_commands_submit_status_jobs_cancel(server, tmp_path):
    r = chronus(
        server,
        tmp_path,
        "submit",
        "--id",
        "c1",
        "--gpus",
        "2",
        "--estimate",
        "600",
        "--deadline",
        "100000",
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["admission"]["decision"] in ("guaranteed", "not_guaranteed")
    r = chronus(server, tmp_path, "status", "c1")
    assert r.returncode == 0 and json.loads(r.stdout)["tenant"] == "team-a"
    r = chronus(server, tmp_path, "jobs")
    assert r.returncode == 0 and "c1" in r.stdout and "team-a" in r.stdout
    r = chronus(server, tmp_path, "cancel", "c1")
    assert r.returncode == 0 and json.loads(r.stdout)["state"] == "cancelled"


def test_command_errors_are_one_line(server, tmp_path):
    r = chronus(server, tmp_path, "status", "nope")
    assert r.returncode == 2
    assert r.stderr.strip() == "chronus status: 404: id: no job 'nope'"
    (tmp_path / "job.json").write_text('{"gpus": 1}')
    r = chronus(server, tmp_path, "submit", str(tmp_path / "job.json"))
    assert r.returncode == 2 and "estimate_seconds: required" in r.stderr
    r = subprocess.run(
        [sys.executable, "-m", "chronus_py", "jobs", "--server", "http://127.0.0.1:9"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1 and "cannot reach" in r.stderr and "Traceback" not in r.stderr


def test_python_client(server):
    client = Client(server.url, "team-a-token-0123456789")
    assert client.submit({"id": "p1", "gpus": 1, "estimate_seconds": 60})["submitted"]
    assert client.status("p1")["id"] == "p1"
    assert [j["id"] for j in client.jobs()["jobs"]] == ["p1"]
    assert "chronus_jobs" in client.metrics()
    with pytest.raises(ClientError) as err:
        Client(server.url, "wrong-token-000000000").jobs()
    assert err.value.status == 401
