"""A job's estimate state, as ``chronus plan`` and the service show it in the job's answer.

A user who cannot tell a runtime must still be told what is known and what is promised:
- ``unknown``: nothing measured yet; the job is ranked like a short job (its probe) so it
  starts soon, and nothing is promised beyond that;
- ``measuring``: it runs and is being timed; the answer comes after ``window`` seconds of
  progress past warm-up (``answer_by`` if it keeps running);
- ``estimated``: an estimate with its band. Its promise is ``firm`` when the lease plan
  guaranteed a deadline option against that estimate (band and learned pad included), ``none``
  when it could not (the job still competes for its deadline, unguaranteed).
While unknown or measuring the promise is ``tentative``: the job is treated as an SLO job in the
pool, and the guarantee is decided when the estimate firms up.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from chronus_py.estimates.in_place import measured
from chronus_py.jobs.state import JobState, Status


class Phase(StrEnum):
    UNKNOWN = "unknown"
    MEASURING = "measuring"
    ESTIMATED = "estimated"


class Promise(StrEnum):
    TENTATIVE = "tentative"
    FIRM = "firm"
    NONE = "none"


@dataclass(frozen=True)
class EstimateState:
    """What is known of one job's runtime at ``now`` and what is promised to it.

    ``seconds``/``low``/``high``: the estimate of total work and its band (None until
    estimated). ``measured``: seconds of progress measured past warm-up. ``answer_by``: when the
    estimate firms up if the job keeps running (None once estimated or while it waits).
    ``guaranteed_deadline``: the deadline the firm promise is for."""

    job_id: str
    phase: Phase
    promise: Promise
    seconds: float | None = None
    low: float | None = None
    high: float | None = None
    measured: float = 0.0
    answer_by: float | None = None
    guaranteed_deadline: float | None = None

    def to_dict(self, *, with_id: bool = True) -> dict:
        out = {"job_id": self.job_id} if with_id else {}
        return out | {
            "phase": self.phase.value,
            "promise": self.promise.value,
            "seconds": self.seconds,
            "low": self.low,
            "high": self.high,
            "measured": self.measured,
            "answer_by": self.answer_by,
            "guaranteed_deadline": self.guaranteed_deadline,
        }


def describe(state: JobState, now: float, window: float) -> EstimateState:
    """The estimate state of a job the scheduler holds, at ``now``: what a job's answer shows.
    ``window`` is the measurement a first estimate needs (``InPlaceEstimation.window``)."""
    deadline = state.guaranteed.at if state.guaranteed else None
    done = measured(state, now)
    if not state.known:
        if state.status is Status.RUNNING:
            warm_up = max(state.starts * state.overhead - state.service_at(now), 0.0)
            return EstimateState(
                state.id,
                Phase.MEASURING,
                Promise.TENTATIVE,
                measured=done,
                answer_by=now + (warm_up + max(window - done, 0.0)) / state.speed,
            )
        return EstimateState(state.id, Phase.UNKNOWN, Promise.TENTATIVE, measured=done)
    band = state.estimate * state.uncertainty
    return EstimateState(
        state.id,
        Phase.ESTIMATED,
        Promise.FIRM if deadline else Promise.NONE,
        seconds=state.estimate,
        low=max(state.estimate - band, 0.0),
        high=state.estimate + band,
        measured=done,
        guaranteed_deadline=deadline,
    )
