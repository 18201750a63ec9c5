"""Backends by name: ``chronus serve --backend NAME`` looks its module up here.

A backend module provides ``add_arguments(parser)`` (its own flags, in an argument group; flag
names must not clash with other backends', so prefix them, e.g. ``--slurm-partition``) and
``from_args(args, *, db_path, nodes=None) -> Backend`` (``db_path`` is the service database, for
a backend that keeps a file next to it; ``nodes`` is the node list of a HiveD config when the
service was given one), and optionally ``check(args, *, nodes=None) -> dict`` (what
``chronus serve --check`` reports after asking the cluster manager; it raises ``InputError``
where ``serve`` would fail), and ``CANNOT_RESIZE``, why it cannot resize a running job (every
backend today: ``chronus serve`` then refuses an elastic policy at start, saying so; one that
can leaves it out). To add a backend, write such a module and register it below: one
line.
Modules are imported only when used, so ``chronus --help`` stays fast and a backend's client
library is needed only by those who run it.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from chronus_py.errors import InputError

BACKENDS: dict[str, str] = {
    "sim": "chronus_py.backends.sim",
    "slurm": "chronus_py.backends.slurm.backend",
    "kueue": "chronus_py.backends.kueue.entry",
}
DEFAULT_BACKEND = "sim"


def backend_module(name: str) -> ModuleType:
    if name not in BACKENDS:
        raise InputError("--backend", f"unknown backend {name!r} (have: {', '.join(BACKENDS)})")
    return importlib.import_module(BACKENDS[name])


def cannot_resize(name: str) -> str | None:
    """Why backend ``name`` cannot resize a running job, or None if it can."""
    return getattr(backend_module(name), "CANNOT_RESIZE", None)
