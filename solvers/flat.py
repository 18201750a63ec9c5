"""An assignment as flat arrays, so plans of thousands of jobs and leases are checked with a few
array operations instead of a Python loop per job and slot (the selector re-plans every lease)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

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


def joined(parts: Sequence[Sequence[int]], sizes: Sequence[int]) -> np.ndarray:
    """The ``parts`` (of ``sizes[i]`` slots each) one after the other, as one int64 array.
    A part that is a block of consecutive slots (told by comparing it with the range its ends
    span, in C) is made from its first slot, not read slot by slot: a lease plan's parts are
    almost all blocks of up to hundreds of leases, and reading every slot into the array was
    most of flattening one (issue 27, session 16)."""
    counts = np.array(sizes, dtype=np.int64)
    ends = np.cumsum(counts)
    firsts = np.array([part[0] if len(part) else 0 for part in parts], dtype=np.int64)
    out = np.arange(int(counts.sum()), dtype=np.int64)
    out += np.repeat(firsts - ends + counts, counts)
    for part, size, end in zip(parts, sizes, ends.tolist()):
        if size and not is_block(part):
            out[end - size : end] = part
    return out


def is_block(part: Sequence[int]) -> bool:
    """Whether ``part`` (not empty) is the tuple of consecutive ints from its first to its last."""
    first, last = part[0], part[-1]
    try:
        return last - first == len(part) - 1 and part == tuple(range(first, last + 1))
    except TypeError:  # not ints: read one by one
        return False


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
    slots_a = joined([p[1] for _, p in rows], sizes)
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
