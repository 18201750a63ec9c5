"""The time-indexed 0/1 model shared by the MILP backends, as flat numpy arrays.

Rows are (job, option) pairs that could fit if the job were alone; ``X[v]`` says row
``var_row[v]`` runs in slot ``var_slot[v]`` and exists only for slots inside the row's window with
capacity for the job; ``S[r]`` says row ``r`` is the chosen option. Constraints:

    sum_t X[r, t] = leases_needed[r] * S[r]                 (all leases of the chosen option)
    sum_{r of job} S[r] <= 1, or = 1 for a fixed job        (one option per job)
    sum_r gpus[r] * X[r, t] <= capacity[t]                  (only where the slot could overflow)

The objective is ``score.milp_weights`` applied to the tiers of ``solvers.score``. When the greedy
plan could not keep every fixed job, fixed jobs become soft (``<= 1`` with the large tier-0
weight) so the model stays feasible and keeps as many guarantees as possible.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from solvers.problem import LeaseProblem
from solvers.score import bounds, feasible_options, milp_weights, usable_slots
from solvers.solution import Assignment, Placement


@dataclass(frozen=True, slots=True)
class Formulation:
    row_job: np.ndarray
    row_option: np.ndarray
    row_need: np.ndarray
    row_weight: np.ndarray
    var_row: np.ndarray
    var_slot: np.ndarray
    var_gpus: np.ndarray
    var_weight: np.ndarray
    job_rows: tuple[tuple[int, np.ndarray], ...]
    """(job index, its row indices) for every job with at least one row."""
    hard_fixed: bool
    binding_slots: tuple[tuple[int, np.ndarray], ...]
    """(slot, indices of its X variables) for slots whose capacity could be exceeded."""

    @property
    def rows(self) -> int:
        return len(self.row_job)

    @property
    def variables(self) -> int:
        return len(self.var_row) + len(self.row_job)

    def hint(self, problem: LeaseProblem, start: Assignment) -> tuple[np.ndarray, np.ndarray]:
        """0/1 values of (S, X) for the plan ``start``."""
        s = np.zeros(self.rows, dtype=np.int64)
        x = np.zeros(len(self.var_row), dtype=np.int64)
        chosen = {}
        for r in range(self.rows):
            job = problem.jobs[self.row_job[r]]
            placed = start.get(job.id)
            if placed is not None and placed.option == self.row_option[r]:
                s[r] = 1
                chosen[r] = set(placed.slots)
        for v in np.flatnonzero(np.isin(self.var_row, list(chosen))):
            x[v] = int(self.var_slot[v]) in chosen[int(self.var_row[v])]
        return s, x

    def decode(self, problem: LeaseProblem, s: np.ndarray, x: np.ndarray) -> dict[str, Placement]:
        """The assignment encoded by 0/1 values of S and X (rounded at 0.5)."""
        taken = np.asarray(x) > 0.5
        slots_of: dict[int, list[int]] = {}
        for v in np.flatnonzero(taken):
            slots_of.setdefault(int(self.var_row[v]), []).append(int(self.var_slot[v]))
        out: dict[str, Placement] = {}
        for r in np.flatnonzero(np.asarray(s) > 0.5):
            job = problem.jobs[self.row_job[r]]
            out[job.id] = Placement(
                int(self.row_option[r]), tuple(sorted(slots_of.get(int(r), [])))
            )
        return out


def model_size(problem: LeaseProblem) -> int:
    """Number of 0/1 variables ``formulate`` would create (rows plus their usable slots)."""
    return sum(
        1 + usable_slots(problem, job, k)
        for job in problem.jobs
        for k in feasible_options(problem, job)
    )


def formulate(problem: LeaseProblem, *, hard_fixed: bool) -> Formulation:
    b = bounds(problem)
    w_fixed, w_value, w_slot0, w_run = milp_weights(b)
    sgn = 1 if problem.objective == "maximize" else -1
    cap = problem.capacity
    row_job, row_option, row_need, row_weight = [], [], [], []
    var_row, var_slot, var_gpus, var_weight = [], [], [], []
    job_rows = []
    for i, job in enumerate(problem.jobs):
        first = len(row_job)
        for k in feasible_options(problem, job):
            opt = job.options[k]
            lo = job.earliest_slot
            slots = np.flatnonzero(cap[lo : opt.deadline_slot] >= job.gpus) + lo
            r = len(row_job)
            row_job.append(i)
            row_option.append(k)
            row_need.append(opt.leases_needed)
            soft_bonus = w_fixed if job.fixed and not hard_fixed else 0
            row_weight.append(problem.value_units[i][k] * w_value + soft_bonus)
            weights = np.zeros(len(slots), dtype=np.int64)
            if len(slots) and slots[0] == 0:
                weights[0] = sgn * job.gpus * w_slot0 + (job.gpus * w_run if job.running else 0)
            var_row.append(np.full(len(slots), r, dtype=np.int64))
            var_slot.append(slots.astype(np.int64))
            var_gpus.append(np.full(len(slots), job.gpus, dtype=np.int64))
            var_weight.append(weights)
        if len(row_job) > first:
            job_rows.append((i, np.arange(first, len(row_job))))

    def cat(parts):
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    v_row, v_slot, v_gpus, v_weight = cat(var_row), cat(var_slot), cat(var_gpus), cat(var_weight)
    binding = []
    if len(v_slot):
        order = np.argsort(v_slot, kind="stable")
        slots, starts = np.unique(v_slot[order], return_index=True)
        for t, group in zip(slots, np.split(order, starts[1:])):
            if v_gpus[group].sum() > cap[t]:
                binding.append((int(t), group))
    return Formulation(
        np.asarray(row_job, dtype=np.int64),
        np.asarray(row_option, dtype=np.int64),
        np.asarray(row_need, dtype=np.int64),
        np.asarray(row_weight, dtype=np.int64),
        v_row,
        v_slot,
        v_gpus,
        v_weight,
        tuple(job_rows),
        hard_fixed,
        tuple(binding),
    )
