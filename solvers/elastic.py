"""Elastic lease planning with CP-SAT: can every task finish its work by its deadline on a
cluster of ``capacity`` GPUs, each running at one of its sizes at a time?

Where a greedy planner (fit jobs one by one in deadline order, each by its smallest sufficient
size, backwards from its deadline) says no, the exact question may still say yes: the greedy
order fixes every earlier job's shape before the next one is seen. This model decides all shapes
at once, and is only worth its cost when the greedy planner has refused.

Time is cut into *blocks* at slot 0's end and at every task's deadline slot (and each such
interval into ``split`` parts), so a deadline is always a block boundary; a task runs at one
size (or not at all) through a block. Work is in the tasks' own units (iterations); a block's
supply at a size is ``floor(rate x seconds)``, never more than the slots really give. Among the
feasible plans the one using the least GPU-time is preferred (more room for later arrivals).

This module knows nothing about traces or jobs beyond :class:`ElasticTask` (it never imports
``chronus_py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from solvers.problem import SolverError


@dataclass(frozen=True, slots=True)
class ElasticTask:
    """``sizes`` ascending GPU counts with ``rates`` work units per second; ``work`` to do before
    slot ``end`` (exclusive, relative to slot 0, which holds ``first_seconds`` usable seconds)."""

    id: str
    sizes: tuple[int, ...]
    rates: tuple[float, ...]
    work: float
    end: int


@dataclass(frozen=True, slots=True)
class Segment:
    """A task runs at ``gpus`` GPUs in slots ``[start, stop)``."""

    start: int
    stop: int
    gpus: int


def blocks(tasks: Sequence[ElasticTask], split: int) -> list[tuple[int, int]]:
    """Consecutive ``[start, stop)`` slot ranges covering slot 0 to the last deadline, with
    every task's deadline on a boundary."""
    edges = sorted({0, 1, *(t.end for t in tasks if t.end > 0)})
    out = []
    for lo, hi in zip(edges, edges[1:]):
        parts = min(split, hi - lo)
        cuts = [lo + (hi - lo) * i // parts for i in range(parts + 1)]
        out += [(a, b) for a, b in zip(cuts, cuts[1:]) if b > a]
    return out


def plan_elastic(
    tasks: Sequence[ElasticTask],
    capacity: int,
    slot_seconds: float,
    first_seconds: float,
    *,
    time_limit_s: float,
    threads: int = 1,
    split: int = 2,
) -> dict[str, list[Segment]] | None:
    """Segments per task that finish every task's work by its deadline within ``capacity``
    GPUs, or None if CP-SAT finds none within ``time_limit_s`` (infeasible or out of time)."""
    if capacity <= 0 or slot_seconds <= 0 or not 0 < first_seconds <= slot_seconds:
        raise SolverError("capacity, slot_seconds and first_seconds must be positive", "capacity")
    if time_limit_s <= 0 or threads < 1:
        raise SolverError("time_limit_s must be > 0 and threads >= 1", "time_limit_s")
    for t in tasks:
        if not t.sizes or len(t.sizes) != len(t.rates) or t.work < 0 or t.end < 0:
            raise SolverError(f"task {t.id}: sizes, rates, work or end is invalid", "tasks")
    from ortools.sat.python import cp_model

    cuts = blocks(tasks, split)
    seconds = [(b - a) * slot_seconds - (slot_seconds - first_seconds) * (a == 0) for a, b in cuts]
    model = cp_model.CpModel()
    chosen: dict[tuple[str, int, int], cp_model.IntVar] = {}
    usage: list[list[tuple[cp_model.IntVar, int]]] = [[] for _ in cuts]
    cost = []
    for t in tasks:
        supply = []
        for k, (a, b) in enumerate(cuts):
            if b > t.end:
                break
            picks = []
            for size, rate in zip(t.sizes, t.rates):
                if size > capacity:
                    continue
                var = model.new_bool_var(f"{t.id}:{k}:{size}")
                chosen[(t.id, k, size)] = var
                picks.append(var)
                usage[k].append((var, size))
                supply.append((var, math.floor(rate * seconds[k])))
                cost.append((var, size * (b - a)))
            if len(picks) > 1:
                model.add_at_most_one(picks)
        need = math.ceil(t.work)
        if need > 0:
            if not supply:
                return None
            model.add(sum(units * v for v, units in supply) >= need)
    for k, used in enumerate(usage):
        if used:
            model.add(sum(size * v for v, size in used) <= capacity)
    model.minimize(sum(c * v for v, c in cost))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = threads
    solver.parameters.random_seed = 0
    solver.parameters.max_time_in_seconds = time_limit_s
    code = solver.solve(model)
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    out: dict[str, list[Segment]] = {t.id: [] for t in tasks}
    for (task, k, size), var in chosen.items():
        if solver.value(var):
            out[task].append(Segment(cuts[k][0], cuts[k][1], size))
    for segments in out.values():
        segments.sort(key=lambda s: s.start)
    return out
