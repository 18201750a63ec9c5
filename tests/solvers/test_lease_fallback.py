"""Whatever goes wrong in a backend, the caller gets a verified plan and the reason."""

import numpy as np
import pytest
from lease_cases import random_problem

from solvers import BackendResult, LeaseJob, LeaseOption, LeaseProblem, check, solve
from solvers.solution import Placement

J, Opt = LeaseJob, LeaseOption
# greedy admits only x (value 5); the optimum is y + z (value 8), so every backend really runs
TRAP = LeaseProblem(
    [2, 2], (J("x", 2, (Opt(2, 1, 5),)), J("y", 1, (Opt(2, 2, 4),)), J("z", 1, (Opt(2, 2, 4),)))
)


def test_cpsat_without_any_budget_falls_back_to_the_greedy_plan():
    s = solve(TRAP, backend="cpsat", deterministic_time=0.0)
    assert s.stats.fallback and "no plan" in s.stats.fallback_reason
    assert s.admitted == ("x",) and check(TRAP, s) == []


@pytest.mark.parametrize("backend", ["cpsat", "cbc"])
def test_a_tiny_time_limit_still_yields_a_verified_plan(backend):
    p = random_problem(
        np.random.default_rng(7), jobs=40, slots=24, objective="maximize", max_gpus=8
    )
    s = solve(p, backend=backend, time_limit_s=1e-3)
    assert check(p, s) == []
    assert s.stats.status in ("fallback", "feasible", "optimal")
    assert s.stats.fallback == (s.stats.fallback_reason is not None)
    assert s.stats.objective >= s.stats.greedy_objective


def broken(problem, start, params):
    raise RuntimeError("solver crashed")


def over_capacity(problem, start, params):
    return BackendResult(
        {j.id: Placement(0, (0, 1)[: j.options[0].leases_needed]) for j in problem.jobs},
        "optimal",
        "OPTIMAL",
    )


def nothing(problem, start, params):
    return BackendResult({}, "feasible", "FEASIBLE")


@pytest.mark.parametrize(
    "backend, reason",
    [
        (broken, "failed: RuntimeError: solver crashed"),
        (over_capacity, "failed check"),
        (nothing, "worse than the greedy plan"),
    ],
)
def test_misbehaving_backends_are_caught(backend, reason):
    s = solve(TRAP, backend=backend)
    assert s.stats.status == "fallback" and reason in s.stats.fallback_reason
    assert s.admitted == ("x",) and check(TRAP, s) == []


def test_models_above_max_variables_are_not_built():
    s = solve(TRAP, backend="cpsat", max_variables=3)
    assert (
        s.stats.fallback and "model too large" in s.stats.fallback_reason and check(TRAP, s) == []
    )


def test_guarantees_that_no_longer_fit_are_dropped_explicitly_and_as_few_as_possible():
    # capacity fell to 4 GPUs: the two 2-GPU jobs fit, the 4-GPU one cannot also fit
    p = LeaseProblem(
        [4, 4],
        (
            J("wide", 4, (Opt(2, 2, 10),), fixed=True),
            J("n1", 2, (Opt(2, 2, 10),), fixed=True),
            J("n2", 2, (Opt(2, 2, 10),), fixed=True),
        ),
    )
    greedy = solve(p, backend="greedy")
    assert check(p, greedy) == [] and greedy.dropped  # greedy keeps the big one, loses two
    for backend in ("cpsat", "cbc"):
        s = solve(p, backend=backend)
        assert check(p, s) == [] and s.dropped == ("wide",), backend
