"""An assignment as flat arrays, so plans of thousands of jobs and leases are checked with a few
array operations instead of a Python loop per job and slot (the selector re-plans every lease)."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain

import numpy as np

from solvers.problem import LeaseProblem
from solvers.solution import Assignment, Placement


@dataclass(frozen=True, slots=True)
class FlatAssignment:
    """``rows``: (job index, placement) of each placement naming a job of the problem, an existing
    option and at least one slot; ``complete`` is False when any other placement was skipped.
    Per row: ``starts``/``ends`` delimit its run of ``slots``; ``valid`` says it has exactly
    ``leases_needed`` strictly rising slots inside ``[earliest_slot, deadline_slot)``.
    ``usage(mask)`` is the GPUs per slot of the rows in ``mask``."""

    rows: list[tuple[int, Placement]]
    complete: bool
    slots: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    sizes: np.ndarray
    gpus: np.ndarray
    valid: np.ndarray

    def usage(self, mask: np.ndarray, length: int) -> np.ndarray:
        taken = np.repeat(mask, self.sizes)
        weights = np.repeat(self.gpus, self.sizes)[taken]
        return np.bincount(self.slots[taken], weights=weights, minlength=length).astype(np.int64)

    def placements(self, mask: np.ndarray) -> dict[int, Placement]:
        """Job index -> placement with plain-int slot tuples, for the rows in ``mask``."""
        flat = self.slots.tolist()
        return {
            i: Placement(int(p[0]), tuple(flat[a:b]))
            for (i, p), a, b, ok in zip(
                self.rows, self.starts.tolist(), self.ends.tolist(), mask.tolist()
            )
            if ok
        }


def flatten(problem: LeaseProblem, assignment: Assignment) -> FlatAssignment:
    index = problem.index()
    jobs = problem.jobs
    rows: list[tuple[int, Placement]] = []
    sizes: list[int] = []
    needs: list[int] = []
    lo: list[int] = []
    hi: list[int] = []
    gpus: list[int] = []
    for j, p in assignment.items():  # one pass: the selector flattens plans twice a solve
        i = index.get(j)
        if i is None or not len(p[1]):
            continue
        job = jobs[i]
        if not 0 <= p[0] < len(job.options):
            continue
        opt = job.options[p[0]]
        rows.append((i, p))
        sizes.append(len(p[1]))
        needs.append(opt.leases_needed)
        lo.append(job.earliest_slot)
        hi.append(opt.deadline_slot)
        gpus.append(job.gpus)
    n = len(rows)
    sizes_a = np.array(sizes, dtype=np.int64)
    slots_a = np.fromiter(
        chain.from_iterable(p[1] for _, p in rows), dtype=np.int64, count=sum(sizes)
    )
    ends = np.cumsum(sizes_a)
    starts = ends - sizes_a
    valid = sizes_a == np.array(needs, dtype=np.int64)
    if n:
        rising = np.ones(slots_a.size, dtype=bool)
        rising[1:] = slots_a[1:] > slots_a[:-1]
        rising[starts] = True
        valid &= (
            np.logical_and.reduceat(rising, starts)
            & (slots_a[starts] >= np.array(lo, dtype=np.int64))
            & (slots_a[ends - 1] < np.array(hi, dtype=np.int64))
        )
    return FlatAssignment(
        rows,
        n == len(assignment),
        slots_a,
        starts,
        ends,
        sizes_a,
        np.array(gpus, dtype=np.int64),
        valid,
    )
