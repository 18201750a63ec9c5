"""``solve``: greedy first, a MILP backend only to improve on it, and nothing unverified out.

The flow, whatever the backend:
  1. pack greedily (around the ``hint`` if one is given, and from scratch; keep the best);
  2. if that plan meets every objective bound (``score.proven_optimal``) return it: no model built;
  3. otherwise run the backend with the greedy plan as its hint and the time that is left;
  4. keep the backend's plan only if it passes ``check``, scores at least as well as greedy,
     and, where it gains only in slot 0 (the same guarantees and value), makes its jobs pay no
     more restarts (``solvers.restarts``); otherwise return the greedy plan with
     ``status="fallback"`` and the reason.

Why the restarts: the score does not see them, the selector pays them in leases. Under
``minimize`` CP-SAT emptied slot 0 by stopping running guarantees and splitting their work
around wide jobs; the re-plan charged the stops and gaps, and on random small clusters at the
usual start costs guarantees were demoted (``benchmarks/guarantee_scenarios.py --solver
cpsat``: 4 demotions in 3,000 scenarios, none with the greedy plans).
"""

from __future__ import annotations

import time
from typing import Mapping

from solvers.backends import BACKENDS, greedy_backend
from solvers.check import check_assignment, require_feasible
from solvers.contract import Backend, BackendResult, SolveParams
from solvers.formulation import model_size
from solvers.greedy import GreedyPlan, pack
from solvers.problem import LeaseProblem, SolverError
from solvers.restarts import total_restarts
from solvers.score import Bounds, Score, bounds, objective_value, proven_optimal, score
from solvers.solution import Assignment, LeaseSolution, Placement, SolveStats

MAX_VARIABLES = 50_000

Hint = Mapping[str, Placement | tuple[int, tuple[int, ...]]] | LeaseSolution | None


def resolve_backend(backend: str | Backend) -> tuple[str, Backend]:
    if callable(backend):
        return getattr(backend, "__name__", "custom"), backend
    if backend not in BACKENDS:
        raise SolverError(
            "backend", f"unknown backend {backend!r}; choose from {', '.join(BACKENDS)}"
        )
    return backend, BACKENDS[backend]


def as_assignment(hint: Hint) -> dict[str, Placement] | None:
    if hint is None:
        return None
    if isinstance(hint, LeaseSolution):
        return hint.assignment()
    return {
        j: p
        if isinstance(p, Placement)
        else Placement(int(p[0]), tuple(sorted(int(t) for t in p[1])))
        for j, p in hint.items()
    }


def greedy_start(problem: LeaseProblem, hint: Hint = None, b: Bounds | None = None) -> GreedyPlan:
    """The best of up to three greedy plans: packed around ``hint`` (if given), fixed jobs in the
    given order, fixed jobs least slack first. Stops at the first that keeps every fixed job and
    reaches the value bound, since another order could then only shuffle slot 0."""
    return _scored_greedy_start(problem, hint, b)[0]


def _scored_greedy_start(
    problem: LeaseProblem, hint: Hint = None, b: Bounds | None = None
) -> tuple[GreedyPlan, Score]:
    """``greedy_start`` and the plan's score, which ``solve`` needs again (scoring walks every
    job's slots)."""
    b = bounds(problem) if b is None else b
    seed = as_assignment(hint)
    attempts = ([lambda: pack(problem, seed)] if seed else []) + [
        lambda: pack(problem),
        lambda: pack(problem, by_slack=True),
    ]
    n_fixed = sum(job.fixed for job in problem.jobs)
    best, best_score = None, None
    for attempt in attempts:
        plan = attempt()
        scored = score(problem, plan.assignment)
        if best is None or scored.key > best_score.key:
            best, best_score = plan, scored
        if scored.key[0] == n_fixed and scored.key[1] == b.value_max:
            break
    return best, best_score


def solve(
    problem: LeaseProblem,
    *,
    backend: str | Backend = "cpsat",
    time_limit_s: float = 1.0,
    threads: int = 1,
    seed: int = 0,
    deterministic_time: float | None = None,
    hint: Hint = None,
    max_variables: int = MAX_VARIABLES,
) -> LeaseSolution:
    """Plan ``problem``; the result always passes ``check(problem, result)``.

    ``backend``: ``"cpsat"`` (default), ``"cbc"``, ``"greedy"`` or a function with the
    ``solvers.contract.Backend`` signature. ``time_limit_s`` bounds the whole call (greedy, model
    build and search) except that a model build, once started, is not interrupted. ``threads=1``
    with a fixed ``seed`` and a ``deterministic_time`` (and a ``time_limit_s`` that never binds
    first) gives the same plan for the same input on any machine (plans of record); a wall-clock
    limit alone may cut the search at different points.
    ``hint``: a previous plan (``LeaseSolution`` or id → (option, slots)); jobs it names keep their
    placement if still valid and if that is not worse than packing from scratch.

    ``max_variables``: above this many 0/1 variables (job-option rows × their usable slots) the MILP
    is not attempted and the greedy plan is returned with ``status="fallback"``: measured on this
    machine, CP-SAT could not improve on greedy within seconds at 100k+ variables, and building the
    model alone took longer than a round may.

    Fixed jobs that cannot all be planned are reported in ``dropped`` (fewest possible when the
    backend finishes); nothing else about the plan is relaxed.
    """
    started = time.perf_counter()
    name, fn = resolve_backend(backend)
    params = SolveParams(time_limit_s, threads, seed, deterministic_time)
    b = bounds(problem)
    start, start_score = _scored_greedy_start(problem, hint, b)
    return _finish(problem, name, fn, params, start, start_score, b, started, max_variables)


def _finish(
    problem: LeaseProblem,
    name: str,
    fn: Backend,
    params: SolveParams,
    start: GreedyPlan,
    start_score: Score,
    b: Bounds,
    started: float,
    max_variables: int,
) -> LeaseSolution:
    """Steps 2-4 of the module docstring for an already packed greedy plan."""
    ids = tuple(job.id for job in problem.jobs)
    greedy_obj = objective_value(problem, start_score)
    require_feasible(problem, start.assignment, start.dropped)

    def out(
        assignment: Assignment,
        status: str,
        solver_status: str,
        result: BackendResult | None = None,
        reason: str | None = None,
    ) -> LeaseSolution:
        dropped = tuple(j.id for j in problem.jobs if j.fixed and j.id not in assignment)
        final = start_score if assignment is start.assignment else score(problem, assignment)
        stats = SolveStats(
            backend=name,
            status=status,
            wall_s=time.perf_counter() - started,
            objective=objective_value(problem, final),
            greedy_objective=greedy_obj,
            fallback_reason=reason,
            solver_status=solver_status,
            rows=result.rows if result else 0,
            slots=problem.horizon,
            variables=result.variables if result else 0,
        )
        return LeaseSolution.build(ids, assignment, stats, dropped)

    if proven_optimal(problem, start_score, b):
        return out(start.assignment, "optimal", "greedy plan meets the objective bounds")
    left = params.time_limit_s - (time.perf_counter() - started)
    if fn is not greedy_backend:
        if left <= 0:
            return out(
                start.assignment,
                "fallback",
                "not run",
                reason="time limit used up by the greedy pass",
            )
        size = model_size(problem)
        if size > max_variables:
            return out(
                start.assignment,
                "fallback",
                "not run",
                reason=f"model too large: {size} variables > max_variables={max_variables}",
            )
    params = SolveParams(max(left, 1e-3), params.threads, params.seed, params.deterministic_time)
    try:
        result = fn(problem, start, params)
    except SolverError:
        raise
    except Exception as exc:  # a solver failure must never cost the round its plan
        return out(
            start.assignment,
            "fallback",
            "error",
            reason=f"{name} failed: {type(exc).__name__}: {exc}",
        )
    if result.assignment is None:
        return out(
            start.assignment,
            "fallback",
            result.solver_status,
            result,
            reason=f"{name} returned no plan ({result.solver_status})",
        )
    if result.status == "greedy":
        return out(start.assignment, "greedy", result.solver_status, result)
    dropped = tuple(j.id for j in problem.jobs if j.fixed and j.id not in result.assignment)
    errors = check_assignment(problem, result.assignment, dropped)
    if errors:
        return out(
            start.assignment,
            "fallback",
            result.solver_status,
            result,
            reason=f"{name} plan failed check ({len(errors)} violations): {errors[0]}",
        )
    theirs = score(problem, result.assignment)
    if theirs.key < start_score.key:
        return out(
            start.assignment,
            "fallback",
            result.solver_status,
            result,
            reason=f"{name} plan ({result.solver_status}) is worse than the greedy plan",
        )
    same_promises = (theirs.kept_fixed, theirs.value) == (start_score.kept_fixed, start_score.value)
    if same_promises and total_restarts(problem, result.assignment) > total_restarts(
        problem, start.assignment
    ):
        return out(
            start.assignment,
            "fallback",
            result.solver_status,
            result,
            reason=f"{name} plan ({result.solver_status}) gains in slot 0 only, by restarts",
        )
    return out(result.assignment, result.status, result.solver_status, result)
