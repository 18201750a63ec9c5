import random

import numpy as np
import pytest

from solvers import LeaseJob, LeaseOption, LeaseProblem, SolverError, solve

OK = (LeaseOption(2, 1, 10.0),)


@pytest.mark.parametrize(
    "capacity, jobs, objective, field",
    [
        (np.array([[1, 2]]), (), "maximize", "capacity"),
        (np.array([1.5, 2]), (), "maximize", "capacity"),
        (np.array([4, -1]), (), "maximize", "capacity[1]"),
        (np.array([4, 4]), (), "adaptive", "objective"),
        (np.array([4, 4]), (LeaseJob("", 1, OK),), "maximize", "jobs[0].id"),
        (np.array([4, 4]), (LeaseJob("a", 0, OK),), "maximize", "jobs[0] (a).gpus"),
        (np.array([4, 4]), (LeaseJob("a", 1, ()),), "maximize", "jobs[0] (a).options"),
        (
            np.array([4, 4]),
            (LeaseJob("a", 1, (LeaseOption(3, 1, 1.0),)),),
            "maximize",
            "jobs[0] (a).options[0].deadline_slot",
        ),
        (
            np.array([4, 4]),
            (LeaseJob("a", 1, (LeaseOption(2, 0, 1.0),)),),
            "maximize",
            "jobs[0] (a).options[0].leases_needed",
        ),
        (
            np.array([4, 4]),
            (LeaseJob("a", 1, (LeaseOption(2, 1, float("nan")),)),),
            "maximize",
            "jobs[0] (a).options[0].value",
        ),
        (
            np.array([4, 4]),
            (LeaseJob("a", 1, OK, earliest_slot=-1),),
            "maximize",
            "jobs[0] (a).earliest_slot",
        ),
        (np.array([4, 4]), (LeaseJob("a", 1, OK), LeaseJob("a", 2, OK)), "maximize", "jobs[1].id"),
    ],
)
def test_bad_problem_names_the_field(capacity, jobs, objective, field):
    with pytest.raises(SolverError) as err:
        LeaseProblem(capacity, jobs, objective)
    assert err.value.field == field
    assert str(err.value).startswith(field + ": ")
    assert "\n" not in str(err.value)


def test_capacity_is_a_read_only_int_array_and_horizon_is_the_last_deadline():
    p = LeaseProblem(
        [4, 4, 4, 4], (LeaseJob("a", 1, (LeaseOption(3, 1, 1), LeaseOption(2, 1, 2))),)
    )
    assert p.capacity.dtype == np.int64 and not p.capacity.flags.writeable
    assert p.horizon == 3


def test_fractional_values_are_scaled_to_exact_integers():
    p = LeaseProblem([4, 4], (LeaseJob("a", 1, (LeaseOption(2, 1, 0.25), LeaseOption(2, 1, 1.5))),))
    assert p.value_scale == 100 and p.value_units == ((25, 150),)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(backend="gurobi"), "backend"),
        (dict(time_limit_s=0), "time_limit_s"),
        (dict(threads=0), "threads"),
        (dict(deterministic_time=-1.0), "deterministic_time"),
    ],
)
def test_bad_parameters_raise_solver_error(kwargs, field):
    p = LeaseProblem([4, 4], (LeaseJob("a", 1, OK),))
    with pytest.raises(SolverError) as err:
        solve(p, **kwargs)
    assert err.value.field == field


def test_cbc_rejects_a_deterministic_budget_instead_of_ignoring_it():
    # two 2-GPU jobs, room for one: greedy is not provably optimal, so the backend really runs
    p = LeaseProblem(
        [2], (LeaseJob("a", 2, (LeaseOption(1, 1, 1),)), LeaseJob("b", 2, (LeaseOption(1, 1, 1),)))
    )
    with pytest.raises(SolverError) as err:
        solve(p, backend="cbc", deterministic_time=1.0, max_variables=10**6)
    assert err.value.field == "deterministic_time"


def test_a_problem_sharing_a_checked_ones_jobs_is_built_as_if_from_scratch():
    rng = random.Random(16)
    values = (1.0, 2.0, 0.5, 0.25, 3.0)

    def job(n: int) -> LeaseJob:
        options = tuple(
            LeaseOption(rng.randint(1, 8), rng.randint(1, 3), rng.choice(values))
            for _ in range(rng.randint(1, 2))
        )
        return LeaseJob(f"j{n}", rng.randint(1, 4), options, rng.random() < 0.5)

    for _ in range(300):
        prior_jobs = [job(n) for n in range(rng.randint(0, 6))]
        prior = LeaseProblem(np.full(8, 4), tuple(prior_jobs))
        jobs = [j if rng.random() < 0.7 else job(int(j.id[1:])) for j in prior_jobs]
        slots = max((o.deadline_slot for j in jobs for o in j.options), default=1)
        fresh = LeaseProblem(np.full(slots, 4), tuple(jobs), "minimize")
        built = LeaseProblem(np.full(slots, 4), tuple(jobs), "minimize", prior)
        assert built.checked is None
        assert (built.value_scale, built.value_units, built.horizon, built.index()) == (
            fresh.value_scale,
            fresh.value_units,
            fresh.horizon,
            fresh.index(),
        )


def test_a_shared_job_past_the_new_capacity_is_still_refused_by_name():
    late = LeaseJob("late", 1, (LeaseOption(6, 1, 1.0),))
    prior = LeaseProblem(np.full(6, 4), (LeaseJob("a", 1, (LeaseOption(2, 1, 1.0),)), late))
    with pytest.raises(SolverError, match=r"jobs\[1\] \(late\)\.options\[0\]\.deadline_slot"):
        LeaseProblem(np.full(3, 4), prior.jobs, "maximize", prior)
