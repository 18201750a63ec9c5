"""The objective as an exact lexicographic score, its bounds, and the MILP weights derived from
them.

Tiers, most important first:
  0. fixed jobs kept (only below its maximum when the guarantees themselves do not fit);
  1. total value of the admitted options (in integer units, see ``LeaseProblem.value_scale``);
  2. GPUs planned in slot 0, counted + for ``maximize`` and - for ``minimize``;
  3. GPUs of ``running`` jobs kept in slot 0 (fewer preemptions among otherwise equal plans).
Comparing ``Score.key`` tuples is exact. The MILPs get one integer objective whose weights are
products of the tier ranges, so no lower tier can ever outweigh one unit of a higher one.
"""

from __future__ import annotations

from dataclasses import dataclass

from solvers.problem import LeaseJob, LeaseProblem
from solvers.solution import Assignment


@dataclass(frozen=True, slots=True)
class Score:
    kept_fixed: int
    value: int
    slot0: int
    running0: int

    @property
    def key(self) -> tuple[int, int, int, int]:
        return (self.kept_fixed, self.value, self.slot0, self.running0)


@dataclass(frozen=True, slots=True)
class Bounds:
    """Per-tier limits that hold for every feasible plan (``slot0_min`` only for plans whose value
    is ``value_max``). They size the MILP weights and let ``proven_optimal`` skip the MILP."""

    value_max: int
    slot0_max: int
    running0_max: int
    slot0_min: int
    running0_best: int
    """Bound on running GPUs in slot 0 for plans of value ``value_max`` (non-running jobs that must
    be in slot 0 take their share of its capacity)."""


def _sgn(problem: LeaseProblem) -> int:
    return 1 if problem.objective == "maximize" else -1


def score(problem: LeaseProblem, assignment: Assignment) -> Score:
    kept = value = used0 = run0 = 0
    for i, job in enumerate(problem.jobs):
        placed = assignment.get(job.id)
        if placed is None:
            continue
        kept += job.fixed
        value += problem.value_units[i][placed.option]
        if 0 in placed.slots:
            used0 += job.gpus
            run0 += job.gpus if job.running else 0
    return Score(kept, value, _sgn(problem) * used0, run0)


def slot0_capacity(problem: LeaseProblem) -> int:
    return int(problem.capacity[0]) if problem.horizon > 0 else 0


def objective_value(problem: LeaseProblem, s: Score) -> float:
    """``value + sgn·GPUs_in_slot0/(C0+1) + running_GPUs_in_slot0/(C0+1)²`` — the artifact's
    objective (value ± slot-0 usage over capacity) with the preemption tie-break appended."""
    c = slot0_capacity(problem) + 1
    return s.value / problem.value_scale + s.slot0 / c + s.running0 / (c * c)


def usable_slots(problem: LeaseProblem, job: LeaseJob, k: int, *, start: int | None = None) -> int:
    """Slots option ``k`` could use if the job were alone: in its window, with capacity >= gpus."""
    lo = job.earliest_slot if start is None else max(start, job.earliest_slot)
    return problem.slots_fitting(job.gpus, lo, job.options[k].deadline_slot)


def feasible_options(problem: LeaseProblem, job: LeaseJob) -> list[int]:
    """Options that fit the job's window and the capacity when the job is alone."""
    return [
        k for k, o in enumerate(job.options) if usable_slots(problem, job, k) >= o.leases_needed
    ]


def bounds(problem: LeaseProblem) -> Bounds:
    """One pass over the jobs and their options, counting usable slots from cached prefix sums
    (``usable_slots`` without a call per option: the selector bounds every re-plan)."""
    c0 = slot0_capacity(problem)
    value_max = eligible = eligible_running = forced = forced_idle = 0
    for i, job in enumerate(problem.jobs):
        prefix = problem.fitting_prefix(job.gpus)
        units = problem.value_units[i]
        lo = job.earliest_slot
        later = max(1, lo)
        best, late = -1, True  # the best feasible value; whether all its options miss slot 0
        for k, opt in enumerate(job.options):
            hi, need = opt.deadline_slot, opt.leases_needed
            if (prefix[hi] - prefix[lo] if hi > lo else 0) < need:
                continue
            misses = (prefix[hi] - prefix[later] if hi > later else 0) < need
            if units[k] > best:
                best, late = units[k], misses
            elif units[k] == best:
                late = late and misses
        if best < 0:
            continue
        value_max += best
        if job.earliest_slot == 0 and job.gpus <= c0:
            eligible += job.gpus
            eligible_running += job.gpus if job.running else 0
        if (job.fixed or best > 0) and late:
            forced += job.gpus
            forced_idle += 0 if job.running else job.gpus
    return Bounds(
        value_max,
        min(c0, eligible),
        min(c0, eligible_running),
        forced,
        min(c0 - forced_idle, eligible_running),
    )


def proven_optimal(problem: LeaseProblem, s: Score, b: Bounds) -> bool:
    """True if ``s`` meets every tier's bound, so no MILP can do better."""
    if s.kept_fixed != sum(job.fixed for job in problem.jobs) or s.value != b.value_max:
        return False
    if problem.objective == "maximize":
        return s.slot0 == b.slot0_max and s.running0 == b.running0_best
    return -s.slot0 == b.slot0_min


def milp_weights(b: Bounds) -> tuple[int, int, int, int]:
    """Integer weights (fixed kept, value unit, sgn·slot-0 GPU, running slot-0 GPU)."""
    w_run = 1
    w_slot0 = b.running0_max + 1
    w_value = w_slot0 * (b.slot0_max + 1)
    w_fixed = w_value * (b.value_max + 1)
    return w_fixed, w_value, w_slot0, w_run
