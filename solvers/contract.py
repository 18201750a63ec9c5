"""What every backend takes and returns (see ``solvers.backends`` for the registry).

A backend improves on the greedy plan: it gets the problem, that plan (its warm start / hint) and
the limits, and returns an assignment or nothing. It does not verify or compare: ``solve`` does,
so a backend can never hand an infeasible or worse plan to a caller.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

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
        if not self.time_limit_s > 0:
            raise SolverError("time_limit_s", f"must be > 0, got {self.time_limit_s!r}")
        if not isinstance(self.threads, int) or self.threads < 1:
            raise SolverError("threads", f"must be an integer >= 1, got {self.threads!r}")
        if self.deterministic_time is not None and not self.deterministic_time >= 0:
            raise SolverError(
                "deterministic_time", f"must be >= 0, got {self.deterministic_time!r}"
            )


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
