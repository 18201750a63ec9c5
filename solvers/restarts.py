"""Restarts a plan makes its jobs pay.

A job planned in two blocks of leases is stopped at the gap and started again after it; a job
running now but not planned in slot 0 is stopped and started again later. Each costs it a
restart (its checkpoint and warm-up), which the caller must find time for: the selector charges
them as more leases, and a guarantee whose window cannot hold them is demoted.

The score (``solvers.score``) does not count them, so ``solve`` weighs them itself when a
searched plan beats the greedy one only in slot 0.
"""

from __future__ import annotations

from operator import sub

from solvers.flat import is_block
from solvers.problem import LeaseProblem
from solvers.solution import Assignment


def restarts(slots: tuple[int, ...], *, running: bool) -> int:
    """Restarts a job pays on its planned ``slots``: one per gap between them, and one more if
    it runs now but is not planned in slot 0 (it is stopped, then started again). ``slots``
    are distinct (a plan's), so one block of them is told by its two ends once sorted; most
    are one block already in order, told without sorting them (``is_block``)."""
    if slots and is_block(slots):
        return int(running and slots[0] != 0)
    ordered = sorted(slots)
    if not ordered:
        return 0
    stopped = int(running and ordered[0] != 0)
    if ordered[-1] - ordered[0] == len(ordered) - 1:
        return stopped
    steps = list(map(sub, ordered[1:], ordered))
    return len(steps) - steps.count(1) + stopped


def total_restarts(problem: LeaseProblem, assignment: Assignment) -> int:
    """The restarts ``assignment`` makes its jobs pay, all together."""
    jobs, index = problem.jobs, problem.index()
    return sum(
        restarts(placed.slots, running=jobs[index[job_id]].running)
        for job_id, placed in assignment.items()
    )
