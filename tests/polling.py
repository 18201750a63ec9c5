"""Waiting for a condition instead of sleeping for it: the one polling loop of the suite's
service, Slurm and Kubernetes tests, each at its own pace (``every``: the daemons' tests ask
an API server, so they ask less often)."""

from __future__ import annotations

import time
from typing import Any, Callable


def wait_for(
    check: Callable[[], Any],
    timeout: float = 30.0,
    what: str | None = None,
    during: Callable[[], Any] | None = None,
    *,
    every: float = 0.05,
) -> Any:
    """``check()``'s first true value, asked every ``every`` seconds (after ``during()``, if
    given, each time); fails the test after ``timeout`` seconds, naming ``what``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if during is not None:
            during()
        value = check()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"not within {timeout:g} s: {what or check}")
