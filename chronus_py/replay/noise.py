"""Estimation error for robustness studies: true runtimes that differ from the estimates.

The scheduler keeps estimating from the trace duration; the world runs each job for
``duration x exp(e)`` with ``e ~ Normal(-sigma^2/2, sigma)`` (mean factor 1). The draw depends
only on the seed and the job id, so a job gets the same error whatever else is in the trace.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from chronus_py.model import Job
from chronus_py.replay.profiling import draw


def lognormal_truth(sigma: float, seed: int = 0) -> Callable[[Job], float]:
    if sigma < 0:
        raise ValueError("sigma must be >= 0")

    def truth(job: Job) -> float:
        error = draw(seed, job.id, "truth").normal(-sigma * sigma / 2, sigma)
        return float(job.duration or 0.0) * float(np.exp(error))

    return truth
