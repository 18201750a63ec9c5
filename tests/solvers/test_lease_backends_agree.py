"""Greedy, CP-SAT and CBC on instances whose optimum is known (by hand, or by enumeration)."""

import numpy as np
import pytest
from lease_cases import brute_force, random_problem

from solvers import LeaseJob, LeaseOption, LeaseProblem, check, solve
from solvers.backends import BACKENDS
from solvers.contract import SolveParams
from solvers.greedy import pack
from solvers.restarts import total_restarts
from solvers.score import score

J, Opt = LeaseJob, LeaseOption
MILPS = ("cpsat", "cbc")


def test_milp_beats_greedy_where_value_density_misleads():
    # x is densest, so greedy takes it and then neither y nor z fits; y + z is worth 8 > 5
    p = LeaseProblem(
        [2, 2], (J("x", 2, (Opt(2, 1, 5),)), J("y", 1, (Opt(2, 2, 4),)), J("z", 1, (Opt(2, 2, 4),)))
    )
    greedy = solve(p, backend="greedy")
    assert greedy.admitted == ("x",) and greedy.stats.status == "greedy"
    for backend in MILPS:
        s = solve(p, backend=backend)
        assert s.admitted == ("y", "z") and s.stats.status == "optimal" and check(p, s) == []
        assert s.stats.objective > s.stats.greedy_objective


def test_soft_job_takes_its_later_cheaper_option_when_the_early_one_is_full():
    p = LeaseProblem(
        [4, 4, 4],
        (J("busy", 4, (Opt(1, 1, 10),), fixed=True), J("soft", 2, (Opt(1, 1, 10), Opt(3, 1, 5)))),
    )
    for backend in ("greedy",) + MILPS:
        s = solve(p, backend=backend)
        assert s.option["soft"] == 1 and s.slots["busy"] == (0,), backend


@pytest.mark.parametrize("objective, in_slot0", [("maximize", ("a", "b")), ("minimize", ())])
def test_secondary_objective_moves_guaranteed_work_into_or_out_of_slot0(objective, in_slot0):
    p = LeaseProblem(
        [8, 8, 8],
        (J("a", 4, (Opt(3, 1, 10),), fixed=True), J("b", 4, (Opt(3, 2, 10),), fixed=True)),
        objective,
    )
    for backend in ("greedy",) + MILPS:
        s = solve(p, backend=backend)
        assert s.in_slot(0) == in_slot0 and s.stats.status == "optimal", backend


@pytest.mark.parametrize("objective", ["maximize", "minimize"])
def test_running_job_keeps_slot0_among_otherwise_equal_plans(objective):
    # one of the two must run in slot 0 (capacity 4 each slot); the running one should
    p = LeaseProblem(
        [4, 4],
        (
            J("new", 4, (Opt(2, 1, 10),), fixed=True),
            J("old", 4, (Opt(2, 1, 10),), fixed=True, running=True),
        ),
        objective,
    )
    for backend in ("greedy",) + MILPS:
        assert solve(p, backend=backend).in_slot(0) == ("old",), backend


def test_value_always_outweighs_slot0_usage():
    # "big" alone in slot 0 would fill it (8 GPUs) but leave no room for "small", which can only
    # run in slot 0; one unit of value must beat any amount of slot-0 usage
    p = LeaseProblem(
        [8, 8], (J("big", 8, (Opt(2, 1, 1),)), J("small", 1, (Opt(1, 1, 2),))), "maximize"
    )
    for backend in MILPS:
        s = solve(p, backend=backend)
        assert s.admitted == ("big", "small") and s.slots["big"] == (1,), backend


@pytest.mark.parametrize("seed", range(12))
def test_backends_reach_the_enumerated_optimum(seed):
    rng = np.random.default_rng(seed)
    objective = ("maximize", "minimize")[seed % 2]
    p = random_problem(rng, jobs=4, slots=5, objective=objective)
    best = brute_force(p)
    start = pack(p)
    greedy_key = score(p, start.assignment).key
    if best is not None:
        assert greedy_key <= best
    for name in MILPS:
        result = BACKENDS[name](p, start, SolveParams(time_limit_s=20))
        assert result.assignment is not None
        key = score(p, result.assignment).key
        if best is None:  # the guarantees do not all fit: the MILP keeps as many as possible
            assert key[0] < sum(j.fixed for j in p.jobs)
        else:
            assert key == best, name
        s = solve(p, backend=name, time_limit_s=20)
        assert check(p, s) == []
        kept = score(p, s.assignment()).key
        if kept != key:  # the greedy plan: the backend's gains only in slot 0, by restarts
            assert kept[:2] == key[:2] and s.stats.fallback, name
            assert total_restarts(p, s.assignment()) < total_restarts(p, result.assignment)
