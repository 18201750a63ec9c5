"""Admission: which new jobs can be guaranteed alongside the jobs already in the problem.

First-come first-served, as in the artifact: candidates are tried in the order given, each packed
into the capacity the plan so far leaves (latest feasible slots, best option first); a candidate
that fits is admitted and stays admitted. That is one vectorised scan per candidate, so thousands
of arrivals cost milliseconds. Optionally a MILP backend then looks for the highest-value set of
the *rejected* candidates that can still be added: greedy admissions and existing guarantees
become fixed, so the MILP only ever adds guarantees, never revokes one.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Iterable, Sequence

import numpy as np

from solvers.check import check_assignment, require_feasible
from solvers.contract import Backend
from solvers.greedy import improve_slot0, place
from solvers.problem import LeaseJob, LeaseProblem, SolverError
from solvers.score import bounds, objective_value, proven_optimal, score
from solvers.solution import Assignment, LeaseSolution, Placement, SolveStats
from solvers.solve import MAX_VARIABLES, Hint, greedy_start, resolve_backend, solve


def admit(
    problem: LeaseProblem,
    candidates: Sequence[LeaseJob],
    *,
    backend: str | Backend | None = None,
    time_limit_s: float = 1.0,
    threads: int = 1,
    seed: int = 0,
    deterministic_time: float | None = None,
    hint: Hint = None,
    max_variables: int = MAX_VARIABLES,
) -> LeaseSolution:
    """Plan ``problem.with_jobs(candidates)``, admitting candidates first-come first-served.

    ``problem`` holds the current commitments (normally all ``fixed``); ``candidates`` must not be
    fixed. The result is a solution of ``problem.with_jobs(candidates)`` and passes ``check`` on it:
    ``option[c.id] is None`` means candidate ``c`` was rejected. ``backend=None`` (the default) is
    greedy only; a backend name (``"cpsat"``, ``"cbc"``) adds the MILP pass over the rejected
    candidates, within what is left of ``time_limit_s``. ``hint`` and ``max_variables`` are as in
    ``solve``.
    """
    started = time.perf_counter()
    if isinstance(candidates, LeaseJob) or not isinstance(candidates, Iterable):
        raise SolverError(
            "candidates", f"must be a sequence of LeaseJob, got {type(candidates).__name__}"
        )
    candidates = tuple(candidates)
    for k, job in enumerate(candidates):
        if not isinstance(job, LeaseJob):
            raise SolverError(f"candidates[{k}]", f"must be a LeaseJob, got {type(job).__name__}")
        if job.fixed:
            raise SolverError(
                f"candidates[{k}] ({job.id}).fixed", "a candidate cannot already be fixed"
            )
    name = None if backend is None else resolve_backend(backend)[0]
    combined = problem.with_jobs(candidates)
    start = greedy_start(problem, hint)
    assignment = dict(start.assignment)
    free = _residual(combined, assignment)
    rejected = []
    for i in range(len(problem.jobs), len(combined.jobs)):
        placed = place(combined, i, free)
        if placed is None:
            rejected.append(i)
        else:
            assignment[combined.jobs[i].id] = placed
    improve_slot0(combined, assignment, free)
    require_feasible(combined, assignment, start.dropped)
    greedy = _greedy_solution(combined, assignment, start.dropped, started)
    if name is None or not rejected:
        return greedy
    left = time_limit_s - (time.perf_counter() - started)
    if left <= 0:
        stats = dataclasses.replace(
            greedy.stats,
            backend=name,
            status="fallback",
            fallback_reason="time limit used up by the greedy pass",
        )
        return dataclasses.replace(greedy, stats=stats)
    return _improve(
        combined,
        problem,
        assignment,
        rejected,
        greedy,
        started,
        dict(
            backend=backend,
            time_limit_s=left,
            threads=threads,
            seed=seed,
            deterministic_time=deterministic_time,
            max_variables=max_variables,
        ),
    )


def _residual(problem: LeaseProblem, assignment: Assignment) -> np.ndarray:
    free = problem.capacity[: problem.horizon].copy()
    for job in problem.jobs:
        placed = assignment.get(job.id)
        if placed is not None:
            free[list(placed.slots)] -= job.gpus
    return free


def _greedy_solution(
    problem: LeaseProblem, assignment: Assignment, dropped: tuple[str, ...], started: float
) -> LeaseSolution:
    s = score(problem, assignment)
    obj = objective_value(problem, s)
    status = "optimal" if proven_optimal(problem, s, bounds(problem)) else "greedy"
    stats = SolveStats(
        backend="greedy",
        status=status,
        wall_s=time.perf_counter() - started,
        objective=obj,
        greedy_objective=obj,
        solver_status="first-come first-served greedy",
        slots=problem.horizon,
    )
    return LeaseSolution.build(tuple(j.id for j in problem.jobs), assignment, stats, dropped)


def _improve(
    combined: LeaseProblem,
    problem: LeaseProblem,
    assignment: dict[str, Placement],
    rejected: list[int],
    greedy: LeaseSolution,
    started: float,
    options: dict,
) -> LeaseSolution:
    """MILP over the rejected candidates, with every admission so far fixed to its chosen option."""
    n = len(problem.jobs)
    skip = set(rejected)
    pinned = {combined.jobs[i].id for i in range(n, len(combined.jobs)) if i not in skip}
    jobs = list(problem.jobs)
    for job in combined.jobs[n:]:
        if job.id in pinned:
            k = assignment[job.id].option
            job = dataclasses.replace(job, options=(job.options[k],), fixed=True)
        jobs.append(job)
    inner = LeaseProblem(combined.capacity, tuple(jobs), combined.objective)
    seed_plan = {j: (Placement(0, p.slots) if j in pinned else p) for j, p in assignment.items()}
    result = solve(inner, hint=seed_plan, **options)
    out = {
        j: Placement(assignment[j].option if j in pinned else k, result.slots[j])
        for j, k in result.option.items()
        if k is not None
    }
    dropped = tuple(result.dropped)
    if score(combined, out).key < score(combined, greedy.assignment()).key or check_assignment(
        combined, out, dropped
    ):
        stats = dataclasses.replace(
            greedy.stats,
            backend=result.stats.backend,
            status="fallback",
            wall_s=time.perf_counter() - started,
            fallback_reason=result.stats.fallback_reason or "MILP pass did not improve",
        )
        return dataclasses.replace(greedy, stats=stats)
    stats = dataclasses.replace(
        result.stats,
        wall_s=time.perf_counter() - started,
        objective=objective_value(combined, score(combined, out)),
        greedy_objective=greedy.stats.objective,
    )
    return LeaseSolution.build(tuple(j.id for j in combined.jobs), out, stats, dropped)
