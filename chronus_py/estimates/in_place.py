"""Realistic estimation for a replay: every job is measured in place, on its own GPUs, as its
first lease; there is no profiling pool and nobody is told a runtime.

The world this stage simulates (README, "Deadlines without oracle runtimes"):
- A new job's runtime is unknown, so the scheduler plans nothing on it: it gets no guarantee and
  is never written off as hopeless. It is ranked like a job with ``window`` seconds of work
  left (its *probe*), which in a pool ordered by remaining GPU-time (Chronus, srtf-gpu) starts a
  small job at once and a wide one when GPUs allow (Tiresias-like: unknown means "serve soon").
- Measuring costs real GPU time and needs real iterations: the first ``window`` seconds of
  progress count only after each start's warm-up (the restart overhead) and accrue on the job's
  own GPUs. A job that ends before that simply ends; it never needed an estimate.
- Once ``window`` seconds are measured the job has a first estimate: its true work times
  ``exp(e)``, ``e ~ Normal(0, sqrt(sigma^2 + cv^2 / n))`` (``n`` iterations observed, ``cv`` the
  per-iteration spread, ``sigma`` the profiler's error on top), with the band the profiler knows
  (``z * cv / sqrt(n)``), exactly the error model of the profiling pool
  (``chronus_py.engine.profiling``), so the two are compared like for like. The job is then
  offered admission (the promise becomes firm or is refused: see ``report``).
- Online re-estimation, as the engine does it: every ``recheck`` seconds, a job whose measured
  progress reached ``window + confirm`` reports its iteration rate, which with its iteration
  count gives its true work. That first correction is a sample of the estimate error, from which
  the scheduler learns the pad it plans unobserved jobs with (``chronus_py.estimates.errors``).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

import numpy as np

from chronus_py.estimates import draw
from chronus_py.jobs.model import Job
from chronus_py.jobs.state import JobState, Status

MEASURE_WINDOW = 300.0
"""Seconds of progress past warm-up a first estimate needs (the default ``window``)."""


@dataclass
class InPlaceEstimation:
    sigma: float = 0.1
    seed: int = 0
    window: float = MEASURE_WINDOW
    confirm: float = 300.0
    recheck: float = 300.0
    cv: float = 0.03
    z: float = 2.0
    _work: dict[str, float] = field(default_factory=dict, repr=False)
    _due: list[tuple[float, int, str, int]] = field(default_factory=list, repr=False)
    _confirming: set[str] = field(default_factory=set, repr=False)
    _next_check: float = math.inf

    def __post_init__(self) -> None:
        if self.sigma < 0 or self.window <= 0 or self.confirm < 0 or self.recheck <= 0:
            raise ValueError("sigma and confirm must be >= 0, window and recheck > 0")

    # -- what the scheduler is told ---------------------------------------------------------------
    def estimate(self, job: Job) -> float:
        """The work a new, unmeasured job is ranked by: its probe (the stage is the scheduler's
        :class:`~chronus_py.estimates.Estimator` until a job is measured)."""
        return self.window

    def uncertainty(self, job: Job) -> float:
        return 0.0

    def arrive(self, state: JobState, work: float) -> None:
        """A job just submitted: unknown to the planner until measured."""
        state.known = False
        self._work[state.id] = work

    def started(self, state: JobState, now: float) -> None:
        """A job (re)started: if still unmeasured, its measurement completes when its progress
        past this start's warm-up reaches ``window`` (if it is not stopped before)."""
        if state.known:
            return
        left = self.window + state.starts * state.overhead - state.service
        heapq.heappush(
            self._due, (now + max(left, 0.0) / state.speed, state.seq, state.id, state.starts)
        )

    def next_time(self) -> float:
        return min(self._due[0][0] if self._due else math.inf, self._next_check)

    def update(self, scheduler, now: float) -> None:
        """Give every job whose measurement completed by ``now`` its first estimate, and, at a
        re-estimation check, the confirmed work of jobs measured long enough."""
        while self._due and self._due[0][0] <= now:
            _, _, job_id, starts = heapq.heappop(self._due)
            state = scheduler.running.get(job_id)
            if state is None or state.starts != starts or state.known:
                continue
            estimate, band = self._measure(state.job, self._work[job_id])
            scheduler.firm_estimate(job_id, estimate, now, band)
            self._confirming.add(job_id)
        if now >= self._next_check:
            self._next_check = math.inf
            for job_id in sorted(self._confirming, key=lambda i: scheduler.jobs[i].seq):
                state = scheduler.jobs[job_id]
                if state.status is Status.FINISHED:
                    self._confirming.discard(job_id)
                elif measured(state, now) >= self.window + self.confirm:
                    scheduler.reestimate(job_id, self._work[job_id], now)
                    self._confirming.discard(job_id)
        if self._confirming and self._next_check == math.inf:
            self._next_check = now + self.recheck

    def _measure(self, job: Job, work: float) -> tuple[float, float]:
        """The first estimate from ``window`` seconds of iterations, and its known band."""
        observed = max(1.0, self.window * job.iterations / work) if job.iterations and work else 1.0
        spread = math.sqrt(self.sigma**2 + self.cv**2 / observed)
        error = draw(self.seed, job.id, "in-place").normal(0.0, spread)
        return work * float(np.exp(error)), self.z * self.cv / math.sqrt(observed)


def measured(state: JobState, now: float) -> float:
    """Seconds of progress past warm-up: service so far minus one restart overhead per start."""
    return max(state.service_at(now) - state.starts * state.overhead, 0.0)
