"""Same input, same plan; a previous plan given as hint is kept while it stays valid."""

import numpy as np
from lease_cases import random_problem

from solvers import LeaseJob, LeaseOption, LeaseProblem, check, solve

J, Opt = LeaseJob, LeaseOption


def test_cpsat_with_one_thread_and_a_deterministic_budget_repeats_itself():
    p = random_problem(
        np.random.default_rng(11), jobs=30, slots=12, objective="maximize", max_gpus=8
    )
    # the wall-clock limit is only a safety cap here: if it cut the search, runs could differ
    runs = [
        solve(p, backend="cpsat", threads=1, seed=0, deterministic_time=0.3, time_limit_s=60)
        for _ in range(3)
    ]
    assert (
        runs[0].stats.solver_status != "greedy plan meets the objective bounds"
    )  # CP-SAT really ran
    assert all(
        dict(r.option) == dict(runs[0].option) and dict(r.slots) == dict(runs[0].slots)
        for r in runs
    )


def test_hint_placements_survive_when_still_valid():
    p = LeaseProblem(
        [4, 4, 4, 4],
        (J("a", 2, (Opt(4, 2, 10),), fixed=True), J("b", 2, (Opt(4, 2, 10),), fixed=True)),
        "minimize",
    )
    fresh = solve(p, backend="greedy")
    hinted = solve(p, backend="greedy", hint={"a": (0, (1, 2)), "b": (0, (1, 3))})
    assert fresh.slots["a"] == (2, 3)
    assert hinted.slots["a"] == (1, 2) and hinted.slots["b"] == (1, 3) and check(p, hinted) == []


def test_an_invalid_hint_is_ignored_not_trusted():
    p = LeaseProblem(
        [4, 4], (J("a", 4, (Opt(2, 1, 10),), fixed=True), J("b", 4, (Opt(2, 1, 10),), fixed=True))
    )
    s = solve(p, backend="greedy", hint={"a": (0, (0,)), "b": (0, (0,)), "ghost": (0, (1,))})
    assert check(p, s) == [] and sorted(s.slots.values()) == [(0,), (1,)]


def test_solution_feeds_back_as_the_next_hint():
    p = random_problem(
        np.random.default_rng(5), jobs=20, slots=10, objective="minimize", max_gpus=8
    )
    first = solve(p, backend="cpsat")
    again = solve(p, backend="greedy", hint=first)
    assert check(p, again) == [] and again.stats.objective >= first.stats.objective - 1e-9
