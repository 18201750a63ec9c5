"""Runtime estimates, in one place: what the scheduler believes a job's work is.

Every source of estimates implements :class:`Estimator` (``estimate(job)``: seconds of work at
the job's GPU count; ``uncertainty(job)``: the relative half-width of its band), so the scheduler
takes any of them:

- :class:`Oracle`: the trace's true duration, what the Chronus artifact's scheduler uses;
- :class:`Fixed`: figures a cluster manager already has (the state file's ``estimate_seconds``,
  or a profile's prediction resolved at read time);
- :class:`Profiled`: a fitted :class:`~chronus_py.profiler.Profile` per model, predicting the
  job's runtime from its iterations at its GPU count, with the profile's band;
- :class:`Noisy`: another estimator's figure times a seeded log-normal error (mean factor 1),
  the true runtimes of a robustness study;
- the replay's profiling pool (``chronus_py.engine.profiling.ProfilingPool``), which measures
  each job on a small pool first.

Beside them, :class:`EstimateErrors` learns online how far first estimates were off, which pads
the plans of jobs not observed yet.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping, Protocol

import numpy as np

from chronus_py.errors import JobIdError
from chronus_py.estimates.errors import EstimateErrors
from chronus_py.jobs.model import Job
from placement.loading import show

if TYPE_CHECKING:
    from chronus_py.profiler import Profile


class Estimator(Protocol):
    def estimate(self, job: Job) -> float:
        """Seconds of work the job needs at its GPU count."""

    def uncertainty(self, job: Job) -> float:
        """Relative half-width of the estimate's band (0: taken as exact)."""


class Oracle:
    """The trace's true duration (``Job.duration``)."""

    def estimate(self, job: Job) -> float:
        return float(job.duration or 0.0)

    def uncertainty(self, job: Job) -> float:
        return 0.0


@dataclass(frozen=True)
class Fixed:
    """Estimates known up front, by job id (a state file's jobs); ``bands`` are relative."""

    seconds: Mapping[str, float]
    bands: Mapping[str, float] = field(default_factory=dict)

    def estimate(self, job: Job) -> float:
        try:
            return self.seconds[job.id]
        except KeyError:
            raise JobIdError(
                "Fixed", f"no estimate for job {show(job.id)}", field="seconds"
            ) from None

    def uncertainty(self, job: Job) -> float:
        return self.bands.get(job.id, 0.0)


@dataclass(frozen=True)
class Profiled:
    """A fitted profile per model name predicts each job's runtime from its ``iterations`` at its
    GPU count; the band is the profile's (relative, upper side). Jobs whose model has no profile,
    or that do not say their iterations, fall back to ``fallback`` (default: the oracle)."""

    profiles: Mapping[str, Profile]
    fallback: Estimator = field(default_factory=Oracle)

    def _runtime(self, job: Job):
        profile = self.profiles.get(job.model or "")
        if profile is None or not job.iterations:
            return None
        return profile.runtime(job.iterations, job.gpus)

    def estimate(self, job: Job) -> float:
        runtime = self._runtime(job)
        return self.fallback.estimate(job) if runtime is None else runtime.seconds

    def uncertainty(self, job: Job) -> float:
        runtime = self._runtime(job)
        if runtime is None:
            return self.fallback.uncertainty(job)
        return (runtime.high - runtime.seconds) / runtime.seconds if runtime.seconds > 0 else 0.0


def draw(seed: int, job_id: str, salt: str) -> np.random.Generator:
    """A generator for one job, independent of every other job in the trace: a job gets the same
    error whatever else is in the trace."""
    digest = hashlib.blake2b(f"{seed}:{salt}:{job_id}".encode(), digest_size=8).digest()
    return np.random.default_rng(int.from_bytes(digest, "little"))


@dataclass(frozen=True)
class Noisy:
    """``base``'s figure times ``exp(e)``, ``e ~ Normal(-sigma^2/2, sigma)`` (mean factor 1), drawn
    per job from ``seed`` and the job id. As a replay's truth it makes true runtimes deviate from
    the estimates the scheduler gets."""

    sigma: float
    seed: int = 0
    base: Estimator = field(default_factory=Oracle)

    def __post_init__(self) -> None:
        if isinstance(self.sigma, bool) or not math.isfinite(self.sigma) or self.sigma < 0:
            raise ValueError(f"sigma must be a finite number >= 0, got {self.sigma!r}")

    def estimate(self, job: Job) -> float:
        if self.sigma == 0:
            return self.base.estimate(job)
        error = draw(self.seed, job.id, "truth").normal(-self.sigma * self.sigma / 2, self.sigma)
        return self.base.estimate(job) * float(np.exp(error))

    def uncertainty(self, job: Job) -> float:
        return self.base.uncertainty(job)


__all__ = ["Estimator", "Oracle", "Fixed", "Profiled", "Noisy", "EstimateErrors", "draw"]
