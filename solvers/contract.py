"""What every backend takes and returns (see ``solvers.backends`` for the registry).

A backend improves on the greedy plan: it gets the problem, that plan (its warm start / hint) and
the limits, and returns an assignment or nothing. It does not verify or compare: ``solve`` does,
so a backend can never hand an infeasible or worse plan to a caller.
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral, Real
from typing import Callable, Literal

import numpy as np

from solvers.greedy import GreedyPlan
from solvers.problem import LeaseProblem, SolverError
from solvers.solution import Placement


@dataclass(frozen=True, slots=True)
class SolveParams:
    """Limits for one backend call.

    ``time_limit_s`` is wall-clock and cuts the search wherever it is, so a plan found under it may
    differ between machines and runs. ``deterministic_time`` (CP-SAT's work units, roughly seconds)
    makes a limited search reproducible: with ``threads=1``, a fixed ``seed`` and a wall limit
    generous enough never to bind first, CP-SAT returns the same plan for the same input. CBC has
    no such budget and rejects it.
    """

    time_limit_s: float = 1.0
    threads: int = 1
    seed: int = 0
    deterministic_time: float | None = None

    def __post_init__(self) -> None:
        if not _real(self.time_limit_s) or not self.time_limit_s > 0:
            raise SolverError("time_limit_s", f"must be a number > 0, got {self.time_limit_s!r}")
        if not _integer(self.threads) or self.threads < 1:
            raise SolverError("threads", f"must be an integer >= 1, got {self.threads!r}")
        if not _integer(self.seed):
            raise SolverError("seed", f"must be an integer, got {self.seed!r}")
        if self.deterministic_time is not None and (
            not _real(self.deterministic_time) or not self.deterministic_time >= 0
        ):
            raise SolverError(
                "deterministic_time", f"must be a number >= 0, got {self.deterministic_time!r}"
            )
        # numpy's numbers as the plain ones the backends pass on to OR-Tools and CBC
        object.__setattr__(self, "time_limit_s", float(self.time_limit_s))
        object.__setattr__(self, "threads", int(self.threads))
        object.__setattr__(self, "seed", int(self.seed))
        if self.deterministic_time is not None:
            object.__setattr__(self, "deterministic_time", float(self.deterministic_time))


def _real(value: object) -> bool:
    """A real number (int, float, numpy scalar), not a bool, a string or a Decimal."""
    return isinstance(value, Real) and not isinstance(value, (bool, np.bool_))


def _integer(value: object) -> bool:
    return isinstance(value, Integral) and not isinstance(value, (bool, np.bool_))


@dataclass(frozen=True, slots=True)
class BackendResult:
    """``status``: ``optimal`` / ``feasible`` (a plan, proven optimal or not), ``greedy`` (the
    start plan, unchanged by design) or ``none`` (no plan: timeout, infeasible, error)."""

    assignment: dict[str, Placement] | None
    status: Literal["optimal", "feasible", "greedy", "none"]
    solver_status: str
    rows: int = 0
    variables: int = 0


Backend = Callable[[LeaseProblem, GreedyPlan, SolveParams], BackendResult]
