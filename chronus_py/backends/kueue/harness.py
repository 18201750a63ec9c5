"""``chronus serve --backend kueue`` as a child process, against a control plane (``lab.py``),
acting as the ServiceAccount of ``deploy/kueue/controller.yaml`` with exactly that manifest's
RBAC: what the end-to-end tests, the demo and the benchmarks run, so all of them drive the real
daemon with the privileges a cluster would give it."""

from __future__ import annotations

import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import yaml

from chronus_py.backends.kueue.lab import ControlPlane
from chronus_py.backends.kueue.names import CONTROLLER
from chronus_py.service import serve_process

DEPLOY = Path(__file__).resolve().parents[3] / "deploy" / "kueue"
NAMESPACE, ACCOUNT = "chronus-system", "chronus"


def install_rbac(cp: ControlPlane) -> Path:
    """The controller manifest's namespace, ServiceAccount and RBAC (not its Deployment: the
    tests run the daemon themselves); a kubeconfig acting as that ServiceAccount."""
    docs = [d for d in yaml.safe_load_all((DEPLOY / "controller.yaml").read_text()) if d]
    cp.apply(*[d for d in docs if d["kind"] not in ("Deployment", "Service")])
    return cp.service_account_kubeconfig(NAMESPACE, ACCOUNT)


@contextmanager
def control_plane(prefix: str) -> Iterator[tuple[ControlPlane, Path, Path]]:
    """A started private control plane in a fresh temporary directory, with the controller's
    RBAC installed: ``(control plane, kubeconfig acting as chronus, the directory)``. Every
    daemon is stopped and the directory removed on exit (the demo's and benchmarks' set-up)."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        cp = ControlPlane(Path(tmp) / "cp")
        cp.start()
        try:
            yield cp, install_rbac(cp), Path(tmp)
        finally:
            cp.stop()


def admission_check(cp: ControlPlane, name: str, controller: str = CONTROLLER) -> None:
    """An AdmissionCheck served by ``controller`` (tests give each chronus its own, so one
    test's controller never sees another's Workloads)."""
    cp.apply(
        {
            "apiVersion": cp.kueue_api,
            "kind": "AdmissionCheck",
            "metadata": {"name": name},
            "spec": {"controllerName": controller},
        }
    )


class ServeProcess(serve_process.ServeProcess):
    """One ``chronus serve --backend kueue`` process on ``db``, in compressed time (``scale``
    chronus seconds per wall second from ``origin``, kept across restarts). ``headroom`` 0: the
    default 0.9 keeps most of a cluster this small for the pool, too little for a guarantee."""

    start_timeout = 60.0

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
        super().__init__(db)
        self.cp = cp
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
