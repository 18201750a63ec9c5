"""The client side: ``chronus submit / status / cancel / jobs`` and the Python client, against a
real server with tokens."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from serving import Server

from chronus_py.cli import main
from chronus_py.service.client import Client, ClientError

TOKENS = """tokens:
  - {token: "team-a-token-0123456789", tenant: team-a}
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One server for the module's tests (their job ids differ)."""
    workdir = tmp_path_factory.mktemp("client")
    (workdir / "tokens.yaml").write_text(TOKENS)
    (workdir / "token").write_text("team-a-token-0123456789\n")
    tokens = str(workdir / "tokens.yaml")
    server = Server(workdir, "--tokens", tokens, "--nodes", "2", "--speed", "10")
    server.start(timeout=60)
    yield server
    server.stop()
    server.http.close()


@pytest.fixture
def chronus(server, capsys, monkeypatch):
    """``chronus(*args)``: the ``chronus`` command's ``main`` with the server and the token file,
    in this process (each ``python -m chronus_py`` costs seconds of imports; one test below
    runs it as a process)."""
    monkeypatch.setenv("CHRONUS_SERVER", server.url)

    def run(*args: str) -> subprocess.CompletedProcess:
        capsys.readouterr()
        code = main([*args, "--token-file", str(server.workdir / "token")])
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out, err)

    return run


def test_commands_submit_status_jobs_cancel(chronus):
    r = chronus(
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
    r = chronus("status", "c1")
    assert r.returncode == 0 and json.loads(r.stdout)["tenant"] == "team-a"
    r = chronus("jobs")
    assert r.returncode == 0 and "c1" in r.stdout and "team-a" in r.stdout
    r = chronus("cancel", "c1")
    assert r.returncode == 0 and json.loads(r.stdout)["state"] == "cancelled"


def test_command_errors_are_one_line(chronus, tmp_path):
    r = chronus("status", "nope")
    assert r.returncode == 2
    assert r.stderr.strip() == "chronus status: 404: id: no job 'nope'"
    (tmp_path / "job.json").write_text('{"gpus": 1}')
    r = chronus("submit", str(tmp_path / "job.json"))
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
    ids = [j["id"] for j in client.jobs()["jobs"]]
    assert "p1" in ids and set(ids) <= {"c1", "p1"}  # team-a's own (c1: the commands' test)
    assert "chronus_jobs" in client.metrics()
    with pytest.raises(ClientError) as err:
        Client(server.url, "wrong-token-000000000").jobs()
    assert err.value.status == 401
