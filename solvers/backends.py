"""The backend registry: name -> function with the ``solvers.contract.Backend`` signature.

Solver libraries are imported inside the backend functions, so ``import solvers`` stays cheap and
a missing solver only fails the backend that needs it.
"""

from __future__ import annotations

from solvers import cbc, cpsat
from solvers.contract import Backend, BackendResult, SolveParams
from solvers.greedy import GreedyPlan
from solvers.problem import LeaseProblem


def greedy_backend(problem: LeaseProblem, start: GreedyPlan, params: SolveParams) -> BackendResult:
    """No search: the greedy plan as it is."""
    return BackendResult(dict(start.assignment), "greedy", "greedy")


BACKENDS: dict[str, Backend] = {"cpsat": cpsat.solve, "cbc": cbc.solve, "greedy": greedy_backend}
