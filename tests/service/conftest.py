"""``serve(*args)``: start real servers for a test, stopped at its end."""

from __future__ import annotations

from pathlib import Path

import pytest
from serving import Server


@pytest.fixture
def serve(tmp_path):
    """``serve(*args)`` starts a server in ``tmp_path``; all are stopped at the end."""
    started: list[Server] = []

    def start(*args: str, workdir: Path | None = None, port: int | None = None) -> Server:
        server = Server(workdir or tmp_path, *args, port=port).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
        server.http.close()
