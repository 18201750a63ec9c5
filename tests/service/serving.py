"""The real ``chronus serve`` as a subprocess on a free loopback port, and the tenants' tokens
the tests give it (tests import it)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import httpx

TOKENS = """tokens:
  - {token: "team-a-token-0123456789", tenant: team-a}
  - {token: "team-b-token-0123456789", tenant: team-b}
  - {token: "admin-token-0123456789", admin: true}
"""
A = {"Authorization": "Bearer team-a-token-0123456789"}
B = {"Authorization": "Bearer team-b-token-0123456789"}
ADMIN = {"Authorization": "Bearer admin-token-0123456789"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A running daemon: ``url``, ``http`` (an httpx client), and its process."""

    def __init__(self, workdir: Path, *args: str, port: int | None = None):
        self.workdir = workdir
        self.args = args
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / f"serve-{self.port}.log"
        self.proc: subprocess.Popen | None = None
        self.http = httpx.Client(base_url=self.url, timeout=30)

    def start(self, timeout: float = 30.0) -> Server:
        cmd = [
            sys.executable,
            "-m",
            "chronus_py",
            "serve",
            "--listen",
            f"127.0.0.1:{self.port}",
            "--db",
            str(self.workdir / "chronus.db"),
            *self.args,
        ]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=log,
                cwd=self.workdir,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited {self.proc.returncode}:\n{self.log.read_text()}")
            try:
                if self.http.get("/healthz").status_code == 200:
                    return self
            except httpx.TransportError:
                time.sleep(0.05)
        raise RuntimeError(f"server did not come up:\n{self.log.read_text()}")

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)


@contextmanager
def running(workdir: Path, *args: str) -> Iterator[Server]:
    """A started server in ``workdir`` that knows the ``TOKENS`` tenants; stopped on exit (what a
    module-scoped fixture shares between its tests)."""
    (workdir / "tokens.yaml").write_text(TOKENS)
    server = Server(workdir, "--tokens", str(workdir / "tokens.yaml"), *args).start()
    yield server
    server.stop()
    server.http.close()
