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
    rows = [
        (index[j], p)
        for j, p in assignment.items()
        if j in index and len(p[1]) and 0 <= p[0] < len(jobs[index[j]].options)
    ]
    n = len(rows)
    sizes = np.fromiter((len(p[1]) for _, p in rows), dtype=np.int64, count=n)
    slots = np.fromiter(
        chain.from_iterable(p[1] for _, p in rows), dtype=np.int64, count=int(sizes.sum())
    )
    ends = np.cumsum(sizes)
    starts = ends - sizes
    needs = np.fromiter(
        (jobs[i].options[p[0]].leases_needed for i, p in rows), dtype=np.int64, count=n
    )
    lo = np.fromiter((jobs[i].earliest_slot for i, _ in rows), dtype=np.int64, count=n)
    hi = np.fromiter(
        (jobs[i].options[p[0]].deadline_slot for i, p in rows), dtype=np.int64, count=n
    )
    gpus = np.fromiter((jobs[i].gpus for i, _ in rows), dtype=np.int64, count=n)
    valid = sizes == needs
    if n:
        rising = np.ones(slots.size, dtype=bool)
        rising[1:] = slots[1:] > slots[:-1]
        rising[starts] = True
        valid &= (
            np.logical_and.reduceat(rising, starts) & (slots[starts] >= lo) & (slots[ends - 1] < hi)
        )
    return FlatAssignment(rows, n == len(assignment), slots, starts, ends, sizes, gpus, valid)
