"""Property: no returned plan ever exceeds capacity or runs a job outside its window, whatever the
input, backend or time limit; fixed jobs are planned in full unless explicitly dropped."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from solvers import LeaseJob, LeaseOption, LeaseProblem, admit, check, solve
from solvers.greedy import _packing_order, improve_slot0, pack, place
from solvers.restarts import total_restarts
from solvers.score import bounds, score

SLOTS = 6


@st.composite
def problems(draw):
    n = draw(st.integers(0, 7))
    capacity = np.array(draw(st.lists(st.integers(0, 8), min_size=SLOTS, max_size=SLOTS)))
    jobs = []
    for j in range(n):
        options = draw(
            st.lists(
                st.builds(
                    LeaseOption,
                    st.integers(0, SLOTS),
                    st.integers(1, 4),
                    st.sampled_from([0, 1, 2.5, 10]),
                ),
                min_size=1,
                max_size=3,
            )
        )
        jobs.append(
            LeaseJob(
                f"j{j}",
                draw(st.integers(1, 9)),
                tuple(options),
                fixed=draw(st.booleans()),
                running=draw(st.booleans()),
                earliest_slot=draw(st.integers(0, 2)),
            )
        )
    return LeaseProblem(capacity, tuple(jobs), draw(st.sampled_from(["maximize", "minimize"])))


def assert_sound(p, s):
    assert check(p, s) == []
    usage = np.zeros(len(p.capacity), dtype=int)
    for job in p.jobs:
        k = s.option[job.id]
        if k is None:
            assert not s.slots[job.id]
            assert not job.fixed or job.id in s.dropped
            continue
        slots = s.slots[job.id]
        assert len(set(slots)) == len(slots) == job.options[k].leases_needed
        assert all(job.earliest_slot <= t < job.options[k].deadline_slot for t in slots)
        usage[list(slots)] += job.gpus
    assert np.all(usage <= p.capacity)


@settings(max_examples=60, deadline=None)
@given(problems(), st.sampled_from(["greedy", "cpsat", "cbc"]), st.sampled_from([1e-3, 5.0]))
def test_solve_never_returns_an_infeasible_plan(p, backend, limit):
    s = solve(p, backend=backend, time_limit_s=limit)
    assert_sound(p, s)
    greedy = solve(p, backend="greedy")
    assert score(p, s.assignment()).key >= score(p, greedy.assignment()).key


@settings(max_examples=150, deadline=None)
@given(problems(), st.sampled_from(["cpsat", "cbc"]))
def test_a_searched_plan_kept_for_its_slot_0_tiers_costs_no_more_restarts(p, backend):
    """Restarts (a gap, or a running job stopped) are not in the score; the selector pays
    them in leases. A search that only moves GPUs in or out of slot 0 must not buy that with
    restarts the greedy plan did not make."""
    s = solve(p, backend=backend, time_limit_s=5.0)
    greedy = solve(p, backend="greedy")
    if score(p, s.assignment()).key[:2] == score(p, greedy.assignment()).key[:2]:
        assert total_restarts(p, s.assignment()) <= total_restarts(p, greedy.assignment())


@settings(max_examples=40, deadline=None)
@given(problems(), st.sampled_from([None, "cpsat"]))
def test_admit_never_returns_an_infeasible_plan(p, backend):
    committed = LeaseProblem(p.capacity, tuple(j for j in p.jobs if j.fixed), p.objective)
    candidates = [j for j in p.jobs if not j.fixed]
    s = admit(committed, candidates, backend=backend)
    assert_sound(committed.with_jobs(candidates), s)


@settings(max_examples=200, deadline=None)
@given(problems())
def test_bounds_equal_a_count_of_each_jobs_usable_slots(p):
    """``bounds`` counts usable slots from prefix sums in one pass; recounted here slot by slot
    from the capacity, job by job, option by option."""

    def usable(job, k, start):
        opt = job.options[k]
        return sum(p.capacity[t] >= job.gpus for t in range(start, opt.deadline_slot))

    c0 = int(p.capacity[0]) if p.horizon > 0 else 0
    value = eligible = running = forced = idle = 0
    for i, job in enumerate(p.jobs):
        ks = [
            k
            for k, o in enumerate(job.options)
            if usable(job, k, job.earliest_slot) >= o.leases_needed
        ]
        if not ks:
            continue
        best = max(p.value_units[i][k] for k in ks)
        value += best
        if job.earliest_slot == 0 and job.gpus <= c0:
            eligible += job.gpus
            running += job.gpus * job.running
        start = max(1, job.earliest_slot)
        if (job.fixed or best > 0) and all(
            usable(job, k, start) < job.options[k].leases_needed
            for k in ks
            if p.value_units[i][k] == best
        ):
            forced += job.gpus
            idle += 0 if job.running else job.gpus
    b = bounds(p)
    assert b.value_max == value
    assert (b.slot0_max, b.running0_max) == (min(c0, eligible), min(c0, running))
    assert (b.slot0_min, b.running0_best) == (forced, min(c0 - idle, running))


def _one_by_one(p, by_slack):
    """The greedy plan as the packer's docstring defines it: each job in packing order with its
    best option that fits what the jobs before it left, then the slot-0 pass."""
    free = p.capacity[: p.horizon].copy()
    assignment, dropped = {}, []
    for i in _packing_order(p, by_slack):
        placed = place(p, i, free)
        if placed is not None:
            assignment[p.jobs[i].id] = placed
        elif p.jobs[i].fixed:
            dropped.append(p.jobs[i].id)
    improve_slot0(p, assignment, free)
    return assignment, tuple(dropped)


@settings(max_examples=300, deadline=None)
@given(problems(), st.booleans(), st.integers(0, 8))
def test_packing_every_job_alone_gives_the_one_by_one_plan(p, by_slack, room):
    """``pack`` places all jobs at once as if each were alone when their blocks fit together;
    its plan is the one-by-one packing's, whichever path it took (``room`` GPUs added to every
    slot make the blocks fit more often)."""
    p = LeaseProblem(p.capacity + room, p.jobs, p.objective)
    plan = pack(p, by_slack=by_slack)
    assert (dict(plan.assignment), plan.dropped) == _one_by_one(p, by_slack)


@settings(max_examples=300, deadline=None)
@given(problems())
def test_running_work_early_never_splits_a_waiting_jobs_block(p):
    """The maximize pass pulls a lease into slot 0 only where that costs no restart: a job that
    waits and holds one block keeps one block (a gap costs it a restart, which the selector
    then charges as more leases); a running job may move, since leaving slot 0 stops it anyway."""
    p = LeaseProblem(p.capacity, p.jobs, "maximize")
    free = p.capacity[: p.horizon].copy()
    before = {}
    for i in _packing_order(p, False):
        placed = place(p, i, free)
        if placed is not None:
            before[p.jobs[i].id] = placed
    after = dict(before)
    improve_slot0(p, after, free)
    for job in p.jobs:
        slots = before.get(job.id, (0, ()))[1]
        if job.running or not slots or slots[-1] - slots[0] != len(slots) - 1:
            continue
        moved = after[job.id].slots
        assert moved[-1] - moved[0] == len(moved) - 1, (job.id, slots, moved)
