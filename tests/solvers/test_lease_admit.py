import numpy as np
import pytest

from solvers import LeaseJob, LeaseOption, LeaseProblem, SolverError, admit, check

J, Opt = LeaseJob, LeaseOption


def test_first_come_first_served_even_against_a_more_valuable_later_job():
    base = LeaseProblem([4, 4], ())
    s = admit(base, [J("early", 4, (Opt(2, 2, 1),)), J("late", 4, (Opt(2, 2, 10),))])
    assert s.admitted == ("early",) and s.option["late"] is None


def test_guarantees_are_kept_and_only_free_capacity_is_offered():
    committed = LeaseProblem([8, 8, 8], (J("g", 8, (Opt(2, 2, 10),), fixed=True),))
    s = admit(committed, [J("tight", 1, (Opt(2, 1, 10),)), J("loose", 8, (Opt(3, 1, 10),))])
    assert s.option == {"g": 0, "tight": None, "loose": 0}
    assert s.slots["g"] == (0, 1) and s.slots["loose"] == (2,)
    assert (
        check(
            committed.with_jobs([J("tight", 1, (Opt(2, 1, 10),)), J("loose", 8, (Opt(3, 1, 10),))]),
            s,
        )
        == []
    )


def test_a_later_option_is_used_when_the_best_one_does_not_fit():
    committed = LeaseProblem([4, 4, 4], (J("g", 4, (Opt(1, 1, 10),), fixed=True),))
    s = admit(committed, [J("soft", 4, (Opt(1, 1, 10), Opt(3, 2, 5)))])
    assert s.option["soft"] == 1 and s.slots["soft"] == (1, 2)


def test_milp_pass_admits_what_first_fit_missed_and_revokes_nothing():
    # FCFS greedy: a -> slot 1, b -> slot 0, leaving 1 GPU per slot, so c (2 GPUs) is rejected;
    # moving a next to b frees slot 1 for c
    base = LeaseProblem([2, 2], (), "minimize")
    jobs = [J("a", 1, (Opt(2, 1, 10),)), J("b", 1, (Opt(1, 1, 10),)), J("c", 2, (Opt(2, 1, 10),))]
    greedy = admit(base, jobs)
    assert greedy.admitted == ("a", "b")
    for backend in ("cpsat", "cbc"):
        s = admit(
            base, jobs, backend=backend, time_limit_s=10.0
        )  # a loaded machine must not time it out
        assert s.admitted == ("a", "b", "c") and check(base.with_jobs(jobs), s) == [], backend
        assert s.stats.objective > greedy.stats.objective


def test_fixed_candidates_and_duplicate_ids_are_rejected():
    base = LeaseProblem([2, 2], (J("a", 1, (Opt(2, 1, 10),), fixed=True),))
    with pytest.raises(SolverError, match="candidates\\[0\\] \\(x\\).fixed"):
        admit(base, [J("x", 1, (Opt(2, 1, 1),), fixed=True)])
    with pytest.raises(SolverError, match="duplicate job id 'a'"):
        admit(base, [J("a", 1, (Opt(2, 1, 1),))])


def test_thousands_of_candidates_are_one_pass():
    rng = np.random.default_rng(3)
    jobs = [
        J(
            f"c{i}",
            int(rng.choice([1, 2, 4, 8])),
            (Opt(int(rng.integers(5, 48)), int(rng.integers(1, 5)), 10.0),),
        )
        for i in range(3000)
    ]
    p = LeaseProblem(np.full(48, 256), ())
    s = admit(p, jobs)
    assert check(p.with_jobs(jobs), s) == [] and 0 < len(s.admitted) < len(jobs)
