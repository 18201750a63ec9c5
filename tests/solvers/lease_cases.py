"""Shared helpers for the solver tests: random small instances and an exhaustive reference
optimum."""

from __future__ import annotations

import itertools

import numpy as np

from solvers import LeaseJob, LeaseOption, LeaseProblem
from solvers.score import score
from solvers.solution import Placement


def random_problem(
    rng: np.random.Generator,
    *,
    jobs: int,
    slots: int,
    objective: str = "maximize",
    fixed_share: float = 0.3,
    max_gpus: int = 4,
) -> LeaseProblem:
    """Oversubscribed instances with soft (several options) and strict jobs, some fixed or
    running."""
    out = []
    for j in range(jobs):
        gpus = int(rng.integers(1, max_gpus + 1))
        need = int(rng.integers(1, max(2, slots // 2) + 1))
        first = int(rng.integers(need, slots + 1))
        options = [LeaseOption(first, need, 10.0)]
        if rng.random() < 0.5 and first < slots:
            options.append(
                LeaseOption(
                    int(rng.integers(first + 1, slots + 1)), need, float(rng.choice([2, 5, 8]))
                )
            )
        out.append(
            LeaseJob(
                f"j{j}",
                gpus,
                tuple(options),
                fixed=bool(rng.random() < fixed_share),
                running=bool(rng.random() < 0.3),
                earliest_slot=int(rng.random() < 0.2),
            )
        )
    cap = rng.integers(max_gpus, 2 * max_gpus + 1, size=slots)
    return LeaseProblem(cap, tuple(out), objective)


def brute_force(problem: LeaseProblem) -> tuple[int, int, int, int] | None:
    """Best ``Score.key`` over every feasible plan that keeps all fixed jobs (None if there is
    none)."""
    choices = []
    for job in problem.jobs:
        mine = [] if job.fixed else [None]
        for k, opt in enumerate(job.options):
            window = range(job.earliest_slot, opt.deadline_slot)
            mine += [Placement(k, c) for c in itertools.combinations(window, opt.leases_needed)]
        choices.append(mine)
    best = None
    for combo in itertools.product(*choices):
        usage = np.zeros(len(problem.capacity), dtype=np.int64)
        for job, placed in zip(problem.jobs, combo):
            if placed is not None:
                usage[list(placed.slots)] += job.gpus
        if np.any(usage > problem.capacity):
            continue
        key = score(problem, {j.id: p for j, p in zip(problem.jobs, combo) if p is not None}).key
        best = key if best is None or key > best else best
    return best
