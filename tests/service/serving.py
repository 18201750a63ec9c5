"""The real ``chronus serve`` as a subprocess on a free loopback port (tests import it)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx


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
