"""Lease-slot admission and planning, as data plus interchangeable solver backends.

This package knows nothing about traces, profiles or clusters (it never imports ``chronus_py``):
it speaks slots, GPUs, options and values. Slot 0 is the lease about to start.

    problem = LeaseProblem(capacity=np.full(48, 960), jobs=(
        LeaseJob("a", gpus=8, options=(LeaseOption(deadline_slot=6, leases_needed=3, value=10),),
        fixed=True),
        LeaseJob("b", gpus=4, options=(LeaseOption(4, 2, 10), LeaseOption(8, 2, 5))),
    ), objective="maximize")
    plan = solve(problem, backend="cpsat", time_limit_s=1.0)   # greedy first, MILP only improves
    assert check(problem, plan) == []                          # always true for solve()/admit()
    plan.option["b"], plan.slots["b"], plan.stats.status

    decision = admit(committed, new_jobs)                      # FCFS greedy admission
    latest_slots(free, gpus=8, lo=0, hi=6, need=3)             # one job's latest fitting slots
    decision.option[new_jobs[0].id] is None                    # rejected

Backends (``BACKENDS``): ``cpsat`` (OR-Tools CP-SAT, default), ``cbc`` (PuLP + CBC), ``greedy``.
Bad input raises ``SolverError`` (a ``ValueError`` with ``.field``), never a solver traceback.
"""

from solvers.admit import admit
from solvers.backends import BACKENDS
from solvers.check import check
from solvers.contract import Backend, BackendResult, SolveParams
from solvers.greedy import latest_slots
from solvers.problem import OBJECTIVES, LeaseJob, LeaseOption, LeaseProblem, Objective, SolverError
from solvers.solution import Assignment, LeaseSolution, Placement, SolveStats, Status
from solvers.solve import solve

__all__ = [
    "BACKENDS",
    "OBJECTIVES",
    "Assignment",
    "Backend",
    "BackendResult",
    "LeaseJob",
    "LeaseOption",
    "LeaseProblem",
    "LeaseSolution",
    "Objective",
    "Placement",
    "SolveParams",
    "SolveStats",
    "SolverError",
    "Status",
    "admit",
    "check",
    "latest_slots",
    "solve",
]
