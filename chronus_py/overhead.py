"""Restart overhead: what a (re)start of a job costs in extra work.

As the Chronus artifact charges it (chronus.md §e): checkpoint 0.1 min + resume 0.4 min, scaled by
``1 + log2 g``, for **every** start including the first. The replay world charges it for real; the
scheduler adds it to its estimates so both agree when the estimate is exact.
"""

from __future__ import annotations

import math

MINUTE = 60.0


def restart_overhead(gpus: int) -> float:
    """Seconds of extra work that one (re)start of a ``gpus``-GPU job costs."""
    return 0.5 * (1.0 + math.log2(max(gpus, 1))) * MINUTE
