"""The greedy packer: latest feasible slots first, as in the Chronus artifact.

Each job takes the ``leases_needed`` latest slots before its deadline that still have room for
it, which leaves the early slots free for jobs with tighter deadlines. It is the fast feasibility
check for admission, the plan of last resort, and the warm start of every MILP.

Fixed jobs go first, in the order given (callers pass guarantees in admission order, the order in
which each was shown to fit) or least slack first; then candidates by value per GPU-lease. The
artifact's order (largest first) only ever packs a small batch around cached plans; re-packing a
whole guarantee set with it dropped 27-66 % of the jobs of sets that fit in admission order
(benchmarks/solver.py "plan" instances, 1,000-5,000 jobs), least slack first 0-13 %.
A final pass moves work into slot 0 (``maximize``) or out of it (``minimize``) wherever capacity
allows, preferring to keep running jobs in slot 0. It adds no gap to a waiting job's leases to do
so: the selector charges a restart for every gap in a job's plan, and a plan that pulled one
lease of a late block into slot 0 then asked for more leases than the job's window held
(``benchmarks/guarantee_scenarios.py --overhead-scale 10``, seed 1: 5 of the 7 demotions left
after the selector kept running jobs running).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from solvers.flat import flatten
from solvers.problem import LeaseJob, LeaseProblem
from solvers.solution import Assignment, Placement


@dataclass(frozen=True, slots=True)
class GreedyPlan:
    """A packing: admitted jobs, and fixed jobs that did not fit."""

    assignment: dict[str, Placement]
    dropped: tuple[str, ...]


def latest_slots(free: np.ndarray, gpus: int, lo: int, hi: int, need: int) -> np.ndarray | None:
    """The ``need`` latest slots in ``[lo, hi)`` with at least ``gpus`` free, or None."""
    if hi - lo < need:
        return None
    ok = (free[lo:hi] >= gpus).nonzero()[0]
    if ok.size < need:
        return None
    return ok[ok.size - need :] + lo


def option_order(problem: LeaseProblem, i: int) -> list[int]:
    """Options to try, best first: highest value, then fewest leases, then earliest deadline."""
    job = problem.jobs[i]
    if len(job.options) == 1:  # every guaranteed job: its promise is its only option
        return [0]
    units = problem.value_units[i]
    return sorted(
        range(len(job.options)),
        key=lambda k: (-units[k], job.options[k].leases_needed, job.options[k].deadline_slot, k),
    )


def place(problem: LeaseProblem, i: int, free: np.ndarray) -> Placement | None:
    """Pack job ``i`` with its best option that fits ``free`` (updated in place), or None."""
    job = problem.jobs[i]
    options = job.options
    for k in [0] if len(options) == 1 else option_order(problem, i):
        opt = options[k]
        lo, hi, need = job.earliest_slot, opt.deadline_slot, opt.leases_needed
        if hi - lo < need:  # latest_slots, inlined: the selector packs ~350,000 jobs a replay
            continue
        ok = (free[lo:hi] >= job.gpus).nonzero()[0]
        if ok.size < need:
            continue
        slots = ok[ok.size - need :] + lo
        free[slots] -= job.gpus
        return Placement(k, tuple(slots.tolist()))
    return None


def _order_key(problem: LeaseProblem, i: int, by_slack: bool) -> tuple:
    job = problem.jobs[i]
    k = option_order(problem, i)[0]
    opt = job.options[k]
    slack = opt.deadline_slot - job.earliest_slot - opt.leases_needed
    if job.fixed:
        return (0, slack, -job.gpus, i) if by_slack else (0, i)
    density = problem.value_units[i][k] / (job.gpus * opt.leases_needed)
    return (1, -density, slack, -job.gpus, i)


def _packing_order(problem: LeaseProblem, by_slack: bool) -> list[int]:
    """Job indices sorted by ``_order_key``. In problem order a fixed job's key is (0, i), so
    the fixed jobs come first as given and only the candidates need their keys."""
    jobs = problem.jobs
    if by_slack:
        return sorted(range(len(jobs)), key=lambda i: _order_key(problem, i, True))
    fixed = [i for i, job in enumerate(jobs) if job.fixed]
    if len(fixed) == len(jobs):
        return fixed
    rest = [i for i, job in enumerate(jobs) if not job.fixed]
    return fixed + sorted(rest, key=lambda i: _order_key(problem, i, False))


def _take_hint(problem: LeaseProblem, i: int, placed: Placement, free: np.ndarray) -> bool:
    """Keep a hinted placement if it is still valid here and fits ``free`` (updated in place)."""
    job = problem.jobs[i]
    if not 0 <= placed.option < len(job.options):
        return False
    opt = job.options[placed.option]
    slots = np.asarray(sorted(set(placed.slots)), dtype=np.int64)
    if (
        len(slots) != opt.leases_needed
        or len(slots) != len(placed.slots)
        or (slots.size and (slots[0] < job.earliest_slot or slots[-1] >= opt.deadline_slot))
        or np.any(free[slots] < job.gpus)
    ):
        return False
    free[slots] -= job.gpus
    return True


def _take_all_hints(
    problem: LeaseProblem, hint: Assignment, free: np.ndarray, assignment: dict[str, Placement]
) -> bool:
    """Keep every valid hinted placement at once when together they fit ``free`` (then updated
    in place). Invalid ones (wrong length, outside the window) are left for packing, as the
    one-by-one check would, so the result is the same from a few array operations. False
    (nothing changed): the valid ones overflow some slot; the caller goes one by one.

    A hint with the wrong number of slots is invalid whatever its slots are, so it is left out
    before its slots are flattened: the selector's hints are its previous plan, whose leases
    include the restarts it charged, and the first solve of a re-plan plans work alone (Philly
    MIX1, first 4,000 jobs: 2,036 of 58,718 hints had the right length)."""
    jobs, index = problem.jobs, problem.index()
    right = {}
    for j, p in hint.items():  # _right_length, inlined: it is asked for every hinted job
        i = index.get(j)
        if i is not None:
            options = jobs[i].options
            if 0 <= p[0] < len(options) and len(p[1]) == options[p[0]].leases_needed:
                right[j] = p
    flat = flatten(problem, right)
    used = flat.usage(flat.valid, free.size)
    if used.size > free.size or np.any(used > free):
        return False
    free -= used
    for i, placed in flat.placements(flat.valid).items():
        assignment[problem.jobs[i].id] = placed
    return True


def pack(
    problem: LeaseProblem, hint: Assignment | None = None, *, by_slack: bool = False
) -> GreedyPlan:
    """Greedy plan of ``problem``. Jobs named in ``hint`` keep their hinted placement when it is
    still valid and fits (checked in problem order, before anything else is packed). Fixed jobs
    are packed in problem order, or least slack first if ``by_slack``."""
    free = problem.capacity[: problem.horizon].copy()
    assignment: dict[str, Placement] = {}
    if hint and not _take_all_hints(problem, hint, free, assignment):
        for i, job in enumerate(problem.jobs):
            placed = hint.get(job.id)
            if placed is not None and _take_hint(problem, i, Placement(*placed), free):
                assignment[job.id] = Placement(placed[0], tuple(sorted(int(t) for t in placed[1])))
    dropped = []
    if not _pack_alone(problem, free, assignment):
        for i in _packing_order(problem, by_slack):
            job = problem.jobs[i]
            if job.id in assignment:
                continue
            placed = place(problem, i, free)
            if placed is not None:
                assignment[job.id] = placed
            elif job.fixed:
                dropped.append(job.id)
    improve_slot0(problem, assignment, free)
    return GreedyPlan(assignment, tuple(dropped))


def _pack_alone(problem: LeaseProblem, free: np.ndarray, assignment: dict[str, Placement]) -> bool:
    """Pack every job not in ``assignment`` as if it were alone, when that fits: each takes the
    last ``leases_needed`` slots of its window with its best option. If those blocks together
    fit ``free`` (then updated in place), the one-by-one packing gives each job exactly its
    block, in any order: at its turn, the GPUs left in each slot of its block are at least its
    own and those of the jobs after it. False (nothing changed): some job's block is outside
    its window or the blocks overflow a slot; the caller packs one by one.

    The selector re-plans a few hundred guarantees every lease on a cluster they seldom fill
    (Philly MIX2: 98 % of planned jobs get one block), and placing them one by one was the
    largest single step of a replay (issue 27, session 14)."""
    jobs = problem.jobs
    rows, his, needs, gpus = [], [], [], []
    for i, job in enumerate(jobs):
        if job.id in assignment:
            continue
        options = job.options
        k = 0 if len(options) == 1 else option_order(problem, i)[0]
        hi, need = options[k].deadline_slot, options[k].leases_needed
        if hi - need < job.earliest_slot:
            return False
        rows.append((job.id, k))
        his.append(hi)
        needs.append(need)
        gpus.append(job.gpus)
    if not rows:
        return True
    ends = np.array(his, dtype=np.int64)
    starts = ends - np.array(needs, dtype=np.int64)
    weights = np.array(gpus, dtype=np.int64)
    size = free.size + 1
    change = np.bincount(starts, weights, size) - np.bincount(ends, weights, size)
    used = np.cumsum(change[:-1]).astype(np.int64)
    if np.any(used > free):
        return False
    free -= used
    for (job_id, k), start, end in zip(rows, starts.tolist(), his):
        assignment[job_id] = Placement(k, tuple(range(start, end)))
    return True


def improve_slot0(
    problem: LeaseProblem, assignment: dict[str, Placement], free: np.ndarray
) -> None:
    """Shift one lease per job into slot 0 (maximize) or out of it (minimize) where capacity allows.

    Deadlines stay met: slot 0 is before every deadline, and a job leaving slot 0 moves to a later
    slot inside its own window. Running jobs move in first (maximize) or last (minimize). A
    waiting job moves in only if that adds no gap between its leases (it has one, or its first
    is slot 1): moved from a later block it would pay a restart for the gap (a running job pays
    one for leaving slot 0 anyway).
    ``assignment`` is the packer's (each placement's slots sorted, as every step here keeps
    them), so a job is in slot 0 when its first slot is 0: no scan of hundreds of slots a job.
    """
    if problem.horizon == 0:
        return
    jobs = [(i, job) for i, job in enumerate(problem.jobs) if job.id in assignment]
    if problem.objective == "maximize":
        movers = [
            (i, j)
            for i, j in jobs
            if j.earliest_slot == 0
            and assignment[j.id].slots[0] != 0
            and (j.running or assignment[j.id].slots[0] == 1 or len(assignment[j.id].slots) == 1)
        ]
        movers.sort(key=lambda ij: (not ij[1].running, -ij[1].gpus, ij[0]))
        for _, job in movers:
            if free[0] < job.gpus:
                continue
            k, slots = assignment[job.id]
            free[slots[-1]] += job.gpus
            free[0] -= job.gpus
            assignment[job.id] = Placement(k, (0,) + slots[:-1])
        _swap_in_running(problem, assignment, free)
        return
    movers = [(i, j) for i, j in jobs if assignment[j.id].slots[0] == 0]
    movers.sort(key=lambda ij: (ij[1].running, -ij[1].gpus, ij[0]))
    for _, job in movers:
        k, slots = assignment[job.id]
        target = _latest_unused(free, job, job.options[k].deadline_slot, slots)
        if target is None:
            continue
        free[0] += job.gpus
        free[target] -= job.gpus
        assignment[job.id] = Placement(k, tuple(sorted(slots[1:] + (target,))))


def _swap_in_running(
    problem: LeaseProblem, assignment: dict[str, Placement], free: np.ndarray
) -> None:
    """Trade a non-running job in slot 0 for a running one at least as large (maximize only).

    Slot-0 GPUs do not drop (the incoming job is no smaller) and one preemption is avoided. Each
    running job takes the smallest swappable partner, which keeps the most slot-0 GPUs.
    """
    index = problem.index()
    ins = sorted(
        (
            j
            for j in problem.jobs
            if j.running
            and j.earliest_slot == 0
            and j.id in assignment
            and assignment[j.id].slots[0] != 0
        ),
        key=lambda j: (-j.gpus, index[j.id]),
    )
    outs = sorted(
        (
            j
            for j in problem.jobs
            if not j.running and j.id in assignment and assignment[j.id].slots[0] == 0
        ),
        key=lambda j: (j.gpus, index[j.id]),
    )
    sizes = [a.gpus for a in outs]
    for b in ins:
        pos = bisect.bisect_left(sizes, b.gpus - int(free[0]))
        while pos < len(outs) and sizes[pos] <= b.gpus:
            a = outs[pos]
            k, slots = assignment[a.id]
            target = _latest_unused(free, a, a.options[k].deadline_slot, slots)
            del (
                outs[pos],
                sizes[pos],
            )  # moved now, or cannot leave slot 0 (not retried: stays linear)
            if target is None:
                continue
            free[0] += a.gpus
            free[target] -= a.gpus
            assignment[a.id] = Placement(k, tuple(sorted(slots[1:] + (target,))))
            kb, slots_b = assignment[b.id]
            free[slots_b[-1]] += b.gpus
            free[0] -= b.gpus
            assignment[b.id] = Placement(kb, (0,) + slots_b[:-1])
            break


def _latest_unused(
    free: np.ndarray, job: LeaseJob, deadline: int, used: tuple[int, ...]
) -> int | None:
    lo = max(1, job.earliest_slot)
    if deadline <= lo:
        return None
    ok = free[lo:deadline] >= job.gpus
    ok[[t - lo for t in used if t >= lo]] = False
    hits = np.flatnonzero(ok)
    return int(hits[-1]) + lo if hits.size else None
