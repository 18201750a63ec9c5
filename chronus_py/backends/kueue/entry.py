"""What ``chronus serve`` needs of the kueue backend before it runs: its flags, why it cannot
resize a running job, and ``from_args``, which imports the backend itself only when it is used.

Why a module of its own: every ``chronus`` command builds the ``serve`` parser, which asks each
registered backend for its flags (``backends/__init__.py``). The backend imports ``lightkube``,
which only the ``kube`` extra installs, so a plain ``pip install chronus-py`` could not even run
``chronus replay`` while the registry pointed at it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence

from chronus_py.backends.kueue.names import CONTROLLER, GPU
from chronus_py.errors import ChronusError, InputError

CANNOT_RESIZE = "it admits each Workload at the size it was created with and has no resize command"
KUBE_EXTRA = frozenset({"lightkube", "httpx", "httpx2"})  # the modules ``[kube]`` installs


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("kueue backend (--backend kueue)")
    g.add_argument(
        "--kubeconfig",
        default=None,
        help="kubeconfig file (default: in-cluster service account, else $KUBECONFIG)",
    )
    g.add_argument(
        "--kueue-controller-name",
        default=None,
        help=f"spec.controllerName of chronus's AdmissionChecks (default {CONTROLLER})",
    )
    g.add_argument(
        "--kueue-gpu-resource",
        default=None,
        help=f"the extended resource counted as GPUs (default {GPU})",
    )
    g.add_argument(
        "--kueue-node-selector",
        default=None,
        help="schedule only nodes with these labels: key=value[,key=value] (default: every "
        "node with GPUs)",
    )
    g.add_argument(
        "--kueue-poll", type=float, default=None, help="seconds between looks at the cluster (1)"
    )
    g.add_argument(
        "--kueue-start-timeout",
        type=float,
        default=None,
        help="seconds kube-scheduler has to bind a started Workload's pods; then the start is "
        "withdrawn and re-planned, and its node takes no new work for a while (30)",
    )
    g.add_argument(
        "--kueue-lease",
        default=None,
        help="leader election: NAMESPACE/NAME of the coordination.k8s.io Lease; replicas "
        "given the same one elect a leader, the others wait (default: no election)",
    )
    g.add_argument(
        "--kueue-lease-duration",
        type=float,
        default=None,
        help="seconds a leader's Lease lasts without renewal (default 15; renewed every "
        "2 s, given up after 10)",
    )
    g.add_argument(
        "--kueue-time-scale",
        type=float,
        default=None,
        help="compressed-time runs (tests, demos, benchmarks): one wall second is this many "
        "seconds of chronus time (default 1)",
    )
    g.add_argument(
        "--kueue-time-origin",
        type=float,
        default=None,
        help="the Unix time from which --kueue-time-scale counts (required with a scale)",
    )


def from_args(
    args: argparse.Namespace, *, db_path: Path, nodes: Sequence[tuple[str, int]] | None = None
):
    """The Kueue backend (``backend.from_args``)."""
    return _backend().from_args(args, db_path=db_path, nodes=nodes)


def check(args: argparse.Namespace, *, nodes: Sequence[tuple[str, int]] | None = None):
    """What ``chronus serve --check`` reports for Kueue (``backend.check``)."""
    return _backend().check(args, nodes=nodes)


def _backend():
    """The backend's module, or one line: what to install when a module of the kube extra is
    missing, else the import that failed, naming its module (a broken install or a bug must
    not pass for a missing extra)."""
    try:
        from chronus_py.backends.kueue import backend
    except ImportError as exc:
        missing = (exc.name or "").partition(".")[0]
        if isinstance(exc, ModuleNotFoundError) and missing in KUBE_EXTRA:
            raise InputError(
                "--backend", f"kueue needs the kube extra: pip install 'chronus-py[kube]' ({exc})"
            ) from None
        error = ChronusError(
            f"--backend kueue: cannot import {exc.name or 'a module'}: {type(exc).__name__}: {exc}"
        )
        error.exit_code = 1
        raise error from None
    return backend
