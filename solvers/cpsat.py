"""OR-Tools CP-SAT backend (the default).

The greedy plan is given as a complete solution hint, so CP-SAT starts from it and only searches
for something better. Threads and the random seed are always set explicitly: CP-SAT's default is
a parallel portfolio over all cores, whose result under a time limit changes from run to run.
The wall-clock limit covers the model build too (the solver gets what is left).
"""

from __future__ import annotations

import time

import numpy as np

from solvers.contract import BackendResult, SolveParams
from solvers.formulation import formulate
from solvers.greedy import GreedyPlan
from solvers.problem import LeaseProblem


def solve(problem: LeaseProblem, start: GreedyPlan, params: SolveParams) -> BackendResult:
    entered = time.perf_counter()
    from ortools.sat.python import cp_model

    f = formulate(problem, hard_fixed=not start.dropped)
    model = cp_model.CpModel()
    s = [model.new_bool_var("") for _ in range(f.rows)]
    x = [model.new_bool_var("") for _ in range(len(f.var_row))]
    ends = np.searchsorted(f.var_row, np.arange(f.rows + 1))
    for r in range(f.rows):
        model.add(cp_model.LinearExpr.sum(x[ends[r] : ends[r + 1]]) == int(f.row_need[r]) * s[r])
    for i, rows in f.job_rows:
        members = [s[r] for r in rows]
        if f.hard_fixed and problem.jobs[i].fixed:
            model.add_exactly_one(members)
        elif len(members) > 1:
            model.add_at_most_one(members)
    for t, group in f.binding_slots:
        model.add(
            cp_model.LinearExpr.weighted_sum([x[v] for v in group], f.var_gpus[group].tolist())
            <= int(problem.capacity[t])
        )
    paid = np.flatnonzero(f.var_weight)
    model.maximize(
        cp_model.LinearExpr.weighted_sum(
            s + [x[v] for v in paid], f.row_weight.tolist() + f.var_weight[paid].tolist()
        )
    )
    index = np.asarray([v.index for v in s + x], dtype=np.int64)
    hint = model.proto.solution_hint
    hint.vars.extend(index.tolist())
    hint.values.extend(np.concatenate(f.hint(problem, start.assignment)).tolist())

    solver = cp_model.CpSolver()
    solver.parameters.num_workers = params.threads
    solver.parameters.random_seed = params.seed
    solver.parameters.max_time_in_seconds = max(
        1e-3, params.time_limit_s - (time.perf_counter() - entered)
    )
    # One presolve pass without probing: the full presolve costs more than the whole search on
    # these models (0.5-1 s at 300 rows x 200 slots) and delays the hinted first solution.
    solver.parameters.max_presolve_iterations = 1
    solver.parameters.cp_model_probing_level = 0
    if params.deterministic_time is not None:
        solver.parameters.max_deterministic_time = params.deterministic_time
    code = solver.solve(model)
    name = solver.status_name(code)
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return BackendResult(None, "none", name, f.rows, f.variables)
    values = np.asarray(solver.response_proto.solution, dtype=np.int64)[index]
    assignment = f.decode(problem, values[: f.rows], values[f.rows :])
    status = "optimal" if code == cp_model.OPTIMAL else "feasible"
    return BackendResult(assignment, status, name, f.rows, f.variables)
