"""Independent verification of a plan: no plan leaves ``solve`` or ``admit`` without passing this.

The check is written against the problem statement, not against any backend's model, so a bug in
a formulation, a solver's tolerance or a stale hint shows up here instead of in a cluster.
"""

from __future__ import annotations

import numpy as np

from solvers.flat import is_block
from solvers.problem import LeaseProblem
from solvers.solution import Assignment, LeaseSolution, Placement


def check(problem: LeaseProblem, solution: LeaseSolution) -> list[str]:
    """Every violated constraint as one line; an empty list means the plan is feasible.

    Checks: each job of the problem is in the solution and no other; an admitted job's option
    exists and gets exactly ``leases_needed`` distinct slots in ``[earliest_slot, deadline_slot)``;
    a job that is not admitted has no slots; fixed jobs are admitted unless listed in ``dropped``;
    GPUs planned per slot do not exceed capacity.
    """
    errors: list[str] = []
    ids = {job.id for job in problem.jobs}
    for key in sorted((set(solution.option) | set(solution.slots)) - ids):
        errors.append(f"job {key!r}: not in the problem")
    for job in problem.jobs:
        if job.id not in solution.option or job.id not in solution.slots:
            errors.append(f"job {job.id!r}: missing from the solution")
        elif solution.option[job.id] is None and solution.slots[job.id]:
            errors.append(f"job {job.id!r}: not admitted but has slots {solution.slots[job.id]}")
    assignment = {
        j: Placement(o, tuple(solution.slots.get(j, ())))
        for j, o in solution.option.items()
        if o is not None and j in ids
    }
    return errors + check_assignment(problem, assignment, solution.dropped)


def check_assignment(
    problem: LeaseProblem, assignment: Assignment, dropped: tuple[str, ...] = ()
) -> list[str]:
    """``check`` for a bare assignment (admitted jobs only), as backends produce it."""
    if not dropped and _plainly_feasible(problem, assignment):
        return []
    errors: list[str] = []
    dropped_set = set(dropped)
    index = problem.index()
    for name in sorted(set(assignment) - set(index)):
        errors.append(f"job {name!r}: not in the problem")
    for name in dropped:
        if name not in index or not problem.jobs[index[name]].fixed:
            errors.append(f"job {name!r}: listed as dropped but is not a fixed job of the problem")
        elif name in assignment:
            errors.append(f"job {name!r}: listed as dropped but admitted")
    used_slots: list[int] = []
    used_gpus: list[int] = []
    for job in problem.jobs:
        placed = assignment.get(job.id)
        if placed is None:
            if job.fixed and job.id not in dropped_set:
                errors.append(f"job {job.id!r}: fixed (guaranteed) but not admitted")
            continue
        k, slots = placed
        if not isinstance(k, (int, np.integer)) or not 0 <= k < len(job.options):
            errors.append(f"job {job.id!r}: option {k!r} does not exist")
            continue
        opt = job.options[k]
        distinct = set(slots)
        if len(distinct) != len(slots):
            errors.append(f"job {job.id!r}: duplicate slots {tuple(slots)}")
        if len(slots) != opt.leases_needed:
            errors.append(
                f"job {job.id!r}: {len(slots)} slots planned, option {k} needs {opt.leases_needed}"
            )
        if distinct and (min(distinct) < job.earliest_slot or max(distinct) >= opt.deadline_slot):
            bad = tuple(
                sorted(t for t in distinct if not job.earliest_slot <= t < opt.deadline_slot)
            )
            errors.append(
                f"job {job.id!r}: slots {bad} outside [{job.earliest_slot}, "
                f"{opt.deadline_slot}) allowed by option {k}"
            )
        used_slots.extend(distinct)
        used_gpus.extend([job.gpus] * len(distinct))
    slots_arr = np.asarray(used_slots, dtype=np.int64)
    inside = (slots_arr >= 0) & (slots_arr < len(problem.capacity))
    usage = np.bincount(
        slots_arr[inside],
        weights=np.asarray(used_gpus, dtype=np.int64)[inside],
        minlength=len(problem.capacity),
    ).astype(np.int64)
    over = np.flatnonzero(usage > problem.capacity)
    for t in over:
        errors.append(
            f"slot {int(t)}: {int(usage[t])} GPUs planned > capacity {int(problem.capacity[t])}"
        )
    return errors


def _plainly_feasible(problem: LeaseProblem, assignment: Assignment) -> bool:
    """The common case in a few array operations: every placement valid, every fixed job
    admitted, capacity kept. False only means the line-by-line check has to say what is
    wrong."""
    if any(j.fixed and j.id not in assignment for j in problem.jobs):
        return False
    used = _usage(problem, assignment)
    return used is not None and not np.any(used > problem.capacity)


def _usage(problem: LeaseProblem, assignment: Assignment) -> np.ndarray | None:
    """GPUs planned per slot (as long as the capacity), if every placement names a job of the
    problem and an option of it and has exactly ``leases_needed`` strictly rising slots in
    ``[earliest_slot, deadline_slot)``; None if any does not.

    A block of consecutive slots is told by comparing them with the range its ends span, in
    C, and counted by its ends alone; only other placements have their slots read one by one.
    The selector's plans are almost all blocks (Philly MIX2: 98 % of planned jobs) of up to
    hundreds of leases, and turning every slot into an array element (``flatten``) was 1.7 %
    of a replay (issue 27, session 16)."""
    index, jobs = problem.index(), problem.jobs
    starts, ends, widths = [], [], []
    loose, weights = [], []
    for job_id, placed in assignment.items():
        i, k, slots = index.get(job_id), placed[0], placed[1]
        if i is None or not len(slots):
            return None
        job = jobs[i]
        if not 0 <= k < len(job.options):
            return None
        option = job.options[k]
        first, last = slots[0], slots[-1]
        if (
            len(slots) != option.leases_needed
            or first < job.earliest_slot
            or last >= option.deadline_slot
        ):
            return None
        if is_block(slots):
            starts.append(first)
            ends.append(last + 1)
            widths.append(job.gpus)
        elif all(a < b for a, b in zip(slots, slots[1:])):
            loose.extend(slots)
            weights.extend([job.gpus] * len(slots))
        else:
            return None
    # Every slot is below a deadline slot, and those are at most the capacity's length.
    length = len(problem.capacity)
    change = np.bincount(np.array(starts, dtype=np.int64), widths, length + 1)
    change -= np.bincount(np.array(ends, dtype=np.int64), widths, length + 1)
    used = np.cumsum(change[:-1]) + np.bincount(np.array(loose, dtype=np.int64), weights, length)
    return used.astype(np.int64)


def require_feasible(
    problem: LeaseProblem, assignment: Assignment, dropped: tuple[str, ...] = ()
) -> None:
    """For plans feasible by construction (the greedy ones): verify anyway, since they are the last
    resort. A violation here is a bug in this package, not bad input."""
    errors = check_assignment(problem, assignment, dropped)
    if errors:
        raise RuntimeError(f"internal error: greedy plan infeasible: {errors[0]}")
