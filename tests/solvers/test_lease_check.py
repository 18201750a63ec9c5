import random

import numpy as np

from solvers import LeaseJob, LeaseOption, LeaseProblem, check
from solvers.check import _plainly_feasible
from solvers.flat import flatten
from solvers.solution import LeaseSolution, Placement, SolveStats

STATS = SolveStats("test", "greedy", 0.0, 0.0, 0.0)
PROBLEM = LeaseProblem(
    np.array([4, 4, 4]),
    (
        LeaseJob("a", 4, (LeaseOption(2, 1, 10.0),), fixed=True),
        LeaseJob("b", 2, (LeaseOption(3, 2, 10.0),), earliest_slot=1),
        LeaseJob("c", 2, (LeaseOption(3, 1, 1.0),)),
    ),
)


def plan(assignment, dropped=()):
    ids = tuple(j.id for j in PROBLEM.jobs)
    return LeaseSolution.build(
        ids, {k: Placement(*v) for k, v in assignment.items()}, STATS, dropped
    )


def test_a_feasible_plan_has_no_violations():
    assert check(PROBLEM, plan({"a": (0, (0,)), "b": (0, (1, 2)), "c": (0, (2,))})) == []


def test_each_kind_of_violation_is_reported():
    cases = {
        "capacity": (
            {"a": (0, (1,)), "b": (0, (1, 2)), "c": (0, (0,))},
            "slot 1: 6 GPUs planned > capacity 4",
        ),
        "deadline": ({"a": (0, (2,)), "b": (0, (1, 2))}, "slots (2,) outside [0, 2)"),
        "earliest": ({"a": (0, (0,)), "b": (0, (0, 2))}, "slots (0,) outside [1, 3)"),
        "count": ({"a": (0, (0,)), "b": (0, (1,))}, "1 slots planned, option 0 needs 2"),
        "duplicate": ({"a": (0, (0,)), "b": (0, (1, 1))}, "duplicate slots (1, 1)"),
        "fixed": ({"b": (0, (1, 2))}, "'a': fixed (guaranteed) but not admitted"),
        "option": ({"a": (3, (0,))}, "option 3 does not exist"),
    }
    for name, (assignment, expected) in cases.items():
        errors = check(PROBLEM, plan(assignment))
        assert any(expected in e for e in errors), (name, errors)


def test_dropped_fixed_jobs_are_accepted_only_when_declared():
    assert check(PROBLEM, plan({}, dropped=("a",))) == []
    assert any(
        "not a fixed job" in e for e in check(PROBLEM, plan({"a": (0, (0,))}, dropped=("b",)))
    )


def test_unknown_and_missing_jobs_are_reported():
    bad = LeaseSolution({"a": 0, "zz": None}, {"a": (0,), "zz": ()}, STATS)
    errors = check(PROBLEM, bad)
    assert any("'zz': not in the problem" in e for e in errors)
    assert any("'b': missing from the solution" in e for e in errors)


def _flattened_feasible(problem, assignment):
    """The array check as it was before blocks were counted by their ends (``flatten``)."""
    flat = flatten(problem, assignment)
    if (
        not flat.complete
        or not flat.valid.all()
        or any(j.fixed and j.id not in assignment for j in problem.jobs)
    ):
        return False
    used = flat.usage(flat.valid, len(problem.capacity))
    return used.size <= len(problem.capacity) and not np.any(used > problem.capacity)


def test_the_quick_check_counting_blocks_by_their_ends_agrees_with_flattening_every_slot():
    rng = random.Random(16)
    verdicts = set()
    for _ in range(2_000):
        slots = rng.randint(1, 12)
        capacity = np.array([rng.randint(0, 8) for _ in range(slots)])
        jobs, assignment = [], {}
        for n in range(rng.randint(0, 6)):
            need = rng.randint(1, slots)
            lo = rng.randint(0, slots - need)
            hi = rng.randint(lo + need, slots)
            option = LeaseOption(hi, need, 1.0)
            fixed = rng.random() < 0.5
            job = LeaseJob(f"j{n}", rng.randint(1, 4), (option,), fixed, earliest_slot=lo)
            jobs.append(job)
            kind = rng.random()
            if kind < 0.5:  # a block in its window
                start = rng.randint(lo, hi - need)
                placed = tuple(range(start, start + need))
            elif kind < 0.75:  # distinct slots in its window, sorted or not
                placed = tuple(rng.sample(range(lo, hi), need))
                placed = tuple(sorted(placed)) if rng.random() < 0.6 else placed
            elif kind < 0.9:  # anything, maybe too many, outside or repeated
                placed = tuple(rng.randint(-1, slots) for _ in range(rng.randint(0, need + 1)))
            else:  # not admitted
                continue
            option = 0 if rng.random() < 0.95 else rng.choice((1, -1))
            assignment[job.id] = Placement(option, placed)
        if rng.random() < 0.05:
            assignment["stranger"] = Placement(0, (0,))
        problem = LeaseProblem(capacity, tuple(jobs))
        expected = _flattened_feasible(problem, assignment)
        assert _plainly_feasible(problem, assignment) == expected, (problem, assignment)
        verdicts.add(expected)
    assert verdicts == {True, False}
