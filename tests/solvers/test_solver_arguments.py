"""What ``solve`` and ``admit`` take from a caller besides the problem: limits of the wrong type
are a SolverError naming them (not a TypeError from a comparison inside), numpy's numbers are
the ints and floats they stand for, and ``admit`` wants a sequence of candidates."""

from __future__ import annotations

import numpy as np
import pytest

from solvers import LeaseJob, LeaseOption, LeaseProblem, SolverError, admit, solve
from solvers.contract import SolveParams


def problem() -> LeaseProblem:
    return LeaseProblem(
        capacity=np.full(8, 16), jobs=(LeaseJob("a", 8, (LeaseOption(4, 2, 10.0),)),)
    )


@pytest.mark.parametrize(
    "limits, message",
    [
        ({"time_limit_s": "1"}, "time_limit_s: must be a number > 0, got '1'"),
        ({"time_limit_s": None}, "time_limit_s: must be a number > 0, got None"),
        ({"time_limit_s": float("nan")}, "time_limit_s: must be a number > 0, got nan"),
        ({"deterministic_time": "0.2"}, "deterministic_time: must be a number >= 0, got '0.2'"),
        ({"threads": 1.0}, "threads: must be an integer >= 1, got 1.0"),
        ({"seed": 1.5}, "seed: must be an integer, got 1.5"),
    ],
)
def test_a_limit_of_the_wrong_type_is_named(limits, message):
    # Before: a str time limit or deterministic budget was a TypeError ('>' not supported
    # between 'str' and 'int') from SolveParams.
    for backend in ("cpsat", "cbc", "greedy"):
        with pytest.raises(SolverError) as caught:
            solve(problem(), backend=backend, **limits)
        assert str(caught.value) == message


def test_numpy_limits_are_plain_numbers():
    # Before: np.int64 threads were "must be an integer >= 1", though they are one.
    params = SolveParams(np.float32(0.5), np.int64(2), np.int32(7), np.float64(0.2))
    assert (type(params.time_limit_s), type(params.threads), type(params.seed)) == (
        float,
        int,
        int,
    )
    assert type(params.deterministic_time) is float
    plan = solve(problem(), backend="cpsat", threads=np.int64(1), time_limit_s=np.float32(1.0))
    assert plan.option["a"] == 0


def test_admit_wants_a_sequence_of_candidates():
    # Before: admit(problem, job) was "TypeError: 'LeaseJob' object is not iterable".
    job = LeaseJob("b", 8, (LeaseOption(4, 2, 10.0),))
    with pytest.raises(SolverError, match="^candidates: must be a sequence of LeaseJob, got "):
        admit(problem(), job)
    with pytest.raises(SolverError, match=r"^candidates\[0\]: must be a LeaseJob, got dict$"):
        admit(problem(), [{"id": "b"}])
    assert admit(problem(), (j for j in [job])).option == {"a": 0, "b": 0}
