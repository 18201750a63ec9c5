"""``chronus serve --backend slurm`` as a child process, against a :class:`SlurmLab`: what the
end-to-end tests, the demo and the benchmarks run, so all three drive the real daemon."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from chronus_py.service.client import Client, ClientError
from chronus_py.service.slurm.lab import SlurmLab


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServeProcess:
    """One ``chronus serve`` process on ``db`` (kept across restarts, as in production)."""

    def __init__(
        self,
        lab: SlurmLab,
        db: Path,
        *extra: str,
        grace: float = 1.0,
        poll: float = 0.5,
        lease: float = 1200.0,
        headroom: float = 0.5,
    ):
        """``headroom`` 0.5: the default 0.9 keeps 90 % of a cluster this small for the pool,
        too little for any guarantee."""
        self.lab = lab
        self.db = Path(db)
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.argv = [
            sys.executable,
            "-m",
            "chronus_py",
            "serve",
            "--backend",
            "slurm",
            "--slurmrestd",
            f"unix:{lab.socket}",
            "--partition",
            lab.partition,
            "--db",
            str(self.db),
            "--listen",
            f"127.0.0.1:{self.port}",
            "--slurm-grace",
            f"{grace:g}",
            "--slurm-poll",
            f"{poll:g}",
            "--slurm-workdir",
            str(lab.root / "jobs"),
            "--lease",
            f"{lease:g}",
            "--headroom",
            f"{headroom:g}",
            *extra,
        ]
        self.log = self.db.with_suffix(".log")
        self.proc: subprocess.Popen | None = None
        self.client = Client(self.url, timeout=60)

    def start(self, timeout: float = 30.0) -> "ServeProcess":
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                self.argv, env=self.lab.env, stdout=out, stderr=subprocess.STDOUT
            )
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"chronus serve exited ({self.proc.returncode}); see "
                    f"{self.log}:\n{self.log.read_text()[-2000:]}"
                )
            try:
                self.client.health()
                return self
            except (ClientError, OSError):
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

    def __enter__(self) -> "ServeProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
