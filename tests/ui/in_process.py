"""The API and the web view as ``chronus serve`` builds them, in the test's own process on a sim
backend, for tests that drive them through ``httpx.ASGITransport`` and look at what a server
process cannot show from outside (the loop's lock, the cyclic collector).

A module of its own, as ``ui_helpers``: ``conftest`` is a name every test folder has."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path

from starlette.applications import Starlette

from chronus_py.backends.sim import SimBackend
from chronus_py.service.api import build_app
from chronus_py.service.auth import load_tokens
from chronus_py.service.core import Service
from chronus_py.service.db import Database
from chronus_py.service.rounds import SchedulerSettings
from chronus_py.ui.routes import attach

sys.path.insert(0, str(Path(__file__).parent.parent / "service"))
from serving import TOKENS  # noqa: E402


@dataclass
class InProcess:
    app: Starlette
    service: Service
    lock: asyncio.Lock
    """The scheduling loop's lock: a test that takes it stands for a round in progress."""


def in_process(workdir: Path) -> InProcess:
    """Two 8-GPU nodes and the ``serving.TOKENS`` tenants. The sim clock moves 60 s (the pages'
    step) in 17 hours, so only the service changes what a page shows. Close
    ``service.db`` when done."""
    (workdir / "tokens.yaml").write_text(TOKENS)
    backend = SimBackend(workdir / "world.sim", [("n0", 8), ("n1", 8)], speed=0.001)
    service = Service(backend, Database(workdir / "chronus.db"), SchedulerSettings())
    lock = asyncio.Lock()
    tokens = load_tokens(workdir / "tokens.yaml")
    app = build_app(service, tokens=tokens, lock=lock)
    attach(app, service, tokens=tokens, metrics=None, lock=lock, wake=lambda: None)
    return InProcess(app, service, lock)
