"""``chronus serve`` as a child process on a free loopback port: the part every backend's harness
(``kueue/harness.py``, ``slurm/harness.py``) shares, so end-to-end tests, demos and benchmarks
start, wait for, crash and stop the real daemon one way. A backend's harness builds the
command line; this class runs it."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

from chronus_py.service.client import Client, ClientError


def free_port() -> int:
    """A loopback TCP port nothing listens on now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServeProcess:
    """One ``chronus serve`` process on ``db`` (kept across restarts, as in production), logging
    to ``db`` with suffix ``.log``. A subclass sets ``argv`` (``port`` is chosen here, so it can
    name it) and may set ``env``."""

    start_timeout = 30.0

    def __init__(self, db: Path, env: dict[str, str] | None = None):
        self.db = Path(db)
        self.env = env
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.argv: list[str] = []
        self.log = self.db.with_suffix(".log")
        self.proc: subprocess.Popen | None = None
        self.client = Client(self.url, timeout=60)

    def launch(self) -> "ServeProcess":
        """Start the process without waiting for it (a standby replica never answers)."""
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                self.argv,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        return self

    def start(self, timeout: float | None = None) -> "ServeProcess":
        """Launch and wait until it answers; one that does not in time is stopped, not left
        running: a restart that took over 30 s at load 28 stayed up unseen and took the next
        tests' Slurm jobs as its own (issue 26, session 12)."""
        self.launch()
        try:
            self.wait_serving(self.start_timeout if timeout is None else timeout)
        except RuntimeError:
            self.stop()
            raise
        return self

    def serving(self) -> bool:
        try:  # a standby accepts connections (the socket is bound) but never answers
            Client(self.url, timeout=1.0).health()
            return True
        except (ClientError, OSError):
            return False

    def wait_serving(self, timeout: float) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"chronus serve exited ({self.proc.returncode}); see "
                    f"{self.log}:\n{self.log.read_text()[-3000:]}"
                )
            if self.serving():
                return
            time.sleep(0.2)
        raise RuntimeError(f"chronus serve did not answer within {timeout:g}s; see {self.log}")

    def kill9(self) -> None:
        """Kill the daemon without a chance to clean up, as a crash would."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill9()

    def jobs(self) -> dict[str, dict]:
        return {j["id"]: j for j in self.client.jobs()["jobs"]}

    def events(self, *kinds: str) -> list[dict]:
        """The decision log's JSON lines of these events, in order."""
        out = []
        for line in self.log.read_text(errors="replace").splitlines():
            m = re.search(r"(\{.*\})\s*$", line)
            if not m:
                continue
            try:
                event = json.loads(m.group(1))
            except ValueError:
                continue
            if not kinds or event.get("event") in kinds:
                out.append(event)
        return out

    def __enter__(self) -> "ServeProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
