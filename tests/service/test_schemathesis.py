"""schemathesis against a live ``chronus serve`` (issue 27): every check schemathesis has, over
every operation of the served OpenAPI document (examples, coverage, fuzzing and stateful
phases), as a tenant and as an admin, must find nothing; nor may the server log a traceback.

Bounded (a fixed seed, ``--max-examples``) so the suite stays fast on CI's two cores."""

from __future__ import annotations

import subprocess
import sys

import pytest
from serving import running

MAX_EXAMPLES = 20


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running(tmp_path_factory.mktemp("schemathesis"), "--nodes", "4", "--speed", "50") as s:
        yield s


@pytest.mark.parametrize("token", ["team-a-token-0123456789", "admin-token-0123456789"])
def test_schemathesis_finds_nothing(server, token, tmp_path):
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "from schemathesis.cli import schemathesis; schemathesis()",
            "run",
            f"{server.url}/openapi.json",
            "--checks",
            "all",
            "--header",
            f"Authorization: Bearer {token}",
            "--max-examples",
            str(MAX_EXAMPLES),
            "--seed",
            "27",
            "--workers",
            "1",
            "--no-color",
            "--report-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,  # its example database and reports stay out of the checkout
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert "Traceback" not in server.log.read_text()
