"""PuLP + CBC backend (the CBC binary bundled with PuLP 3.x; runs as a subprocess on an MPS file).

The greedy plan is passed as a MIP start. PuLP's ``LpStatus`` says "Optimal" for a run stopped by
the time limit, and a run without any integer solution can still carry LP values, so only
``prob.sol_status`` is trusted: optimal (1) or integer feasible (2) yield a plan, nothing else.
The wall-clock limit covers the model build too (CBC gets what is left); writing the MPS file and
starting the process are not interruptible.
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from solvers.contract import BackendResult, SolveParams
from solvers.formulation import formulate
from solvers.greedy import GreedyPlan
from solvers.problem import LeaseProblem, SolverError


def solve(problem: LeaseProblem, start: GreedyPlan, params: SolveParams) -> BackendResult:
    # PuLP 3.x warns that LpVariable(...) and PULP_CBC_CMD change in PuLP 4; the replacements do
    # not exist in the 2.x releases the package also supports, so the warnings are muted here only.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return _solve(problem, start, params)


def _solve(problem: LeaseProblem, start: GreedyPlan, params: SolveParams) -> BackendResult:
    if params.deterministic_time is not None:
        raise SolverError(
            "deterministic_time", "the cbc backend has no deterministic budget; use time_limit_s"
        )
    entered = time.perf_counter()
    import pulp

    f = formulate(problem, hard_fixed=not start.dropped)
    prob = pulp.LpProblem("lease_plan", pulp.LpMaximize)
    s = [pulp.LpVariable(f"s{r}", cat=pulp.LpBinary) for r in range(f.rows)]
    x = [pulp.LpVariable(f"x{v}", cat=pulp.LpBinary) for v in range(len(f.var_row))]
    paid = np.flatnonzero(f.var_weight)
    prob.setObjective(
        pulp.LpAffineExpression(
            list(zip(s, f.row_weight.tolist())) + [(x[v], int(f.var_weight[v])) for v in paid]
        )
    )
    ends = np.searchsorted(f.var_row, np.arange(f.rows + 1))
    for r in range(f.rows):
        terms = [(x[v], 1) for v in range(ends[r], ends[r + 1])] + [(s[r], -int(f.row_need[r]))]
        prob += pulp.LpConstraint(
            pulp.LpAffineExpression(terms), pulp.LpConstraintEQ, f"need{r}", 0
        )
    for i, rows in f.job_rows:
        sense = (
            pulp.LpConstraintEQ if f.hard_fixed and problem.jobs[i].fixed else pulp.LpConstraintLE
        )
        prob += pulp.LpConstraint(
            pulp.LpAffineExpression([(s[r], 1) for r in rows]), sense, f"one{i}", 1
        )
    for t, group in f.binding_slots:
        terms = [(x[v], int(f.var_gpus[v])) for v in group]
        prob += pulp.LpConstraint(
            pulp.LpAffineExpression(terms), pulp.LpConstraintLE, f"cap{t}", int(problem.capacity[t])
        )
    hint_s, hint_x = f.hint(problem, start.assignment)
    for var, val in zip(s + x, hint_s.tolist() + hint_x.tolist()):
        var.setInitialValue(val)

    left = max(0.01, params.time_limit_s - (time.perf_counter() - entered))
    # "-threads 1" would switch CBC into its parallel mode with one worker thread; serial CBC is the
    # deterministic one, so a thread count is only passed when more than one is asked for.
    threads = params.threads if params.threads > 1 else None
    cmd = pulp.PULP_CBC_CMD(
        msg=False,
        timeLimit=left,
        threads=threads,
        warmStart=True,
        options=[f"randomCbcSeed {params.seed}"],
    )
    prob.solve(cmd)
    name = f"{pulp.LpStatus[prob.status]}/{pulp.LpSolution[prob.sol_status]}"
    if prob.sol_status not in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible):
        return BackendResult(None, "none", name, f.rows, f.variables)

    def value(v) -> float:
        return v.varValue if v.varValue is not None else 0.0

    assignment = f.decode(problem, np.array([value(v) for v in s]), np.array([value(v) for v in x]))
    status = "optimal" if prob.sol_status == pulp.LpSolutionOptimal else "feasible"
    return BackendResult(assignment, status, name, f.rows, f.variables)
