"""``chronus serve --backend kueue`` as a child process, against a control plane (``lab.py``),
acting as the ServiceAccount of ``deploy/kueue/controller.yaml`` with exactly that manifest's
RBAC: what the end-to-end tests, the demo and the benchmarks run, so all of them drive the real
daemon with the privileges a cluster would give it."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from chronus_py.service.client import Client, ClientError
from chronus_py.service.kueue.lab import ControlPlane, free_port

DEPLOY = Path(__file__).resolve().parents[3] / "deploy" / "kueue"
NAMESPACE, ACCOUNT = "chronus-system", "chronus"
CONTROLLER = "chronus.io/deadline"


def install_rbac(cp: ControlPlane) -> Path:
    """The controller manifest's namespace, ServiceAccount and RBAC (not its Deployment: the
    tests run the daemon themselves); a kubeconfig acting as that ServiceAccount."""
    docs = [d for d in yaml.safe_load_all((DEPLOY / "controller.yaml").read_text()) if d]
    cp.apply(*[d for d in docs if d["kind"] not in ("Deployment", "Service")])
    return cp.service_account_kubeconfig(NAMESPACE, ACCOUNT)


def admission_check(cp: ControlPlane, name: str, controller: str = CONTROLLER) -> None:
    """An AdmissionCheck served by ``controller`` (tests give each chronus its own, so one
    test's controller never sees another's Workloads)."""
    cp.apply(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "AdmissionCheck",
            "metadata": {"name": name},
            "spec": {"controllerName": controller},
        }
    )


class ServeProcess:
    """One ``chronus serve --backend kueue`` process on ``db``, in compressed time (``scale``
    chronus seconds per wall second from ``origin``, kept across restarts). ``headroom`` 0: the
    default 0.9 keeps most of a cluster this small for the pool, too little for a guarantee."""

    def __init__(
        self,
        cp: ControlPlane,
        kubeconfig: Path,
        db: Path,
        *extra: str,
        scale: float = 60.0,
        origin: float | None = None,
        lease: float = 300.0,
        headroom: float = 0.0,
        guard: float = 0.0,
        poll: float = 0.3,
    ):
        self.cp = cp
        self.db = Path(db)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.origin = time.time() if origin is None else origin
        self.scale = scale
        self.argv = [
            sys.executable,
            "-m",
            "chronus_py",
            "serve",
            "--backend=kueue",
            f"--kubeconfig={kubeconfig}",
            f"--db={self.db}",
            f"--listen=127.0.0.1:{self.port}",
            f"--kueue-poll={poll:g}",
            f"--kueue-time-scale={scale:g}",
            f"--kueue-time-origin={self.origin:.3f}",
            f"--lease={lease:g}",
            f"--headroom={headroom:g}",
            f"--guard={guard:g}",
            "--solver=greedy",
            *extra,
        ]
        self.log = self.db.with_suffix(".log")
        self.proc: subprocess.Popen | None = None
        self.client = Client(self.url, timeout=60)

    def launch(self) -> "ServeProcess":
        """Start the process without waiting for it (a standby replica never answers)."""
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                self.argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        return self

    def start(self, timeout: float = 60.0) -> "ServeProcess":
        self.launch()
        self.wait_serving(timeout)
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
