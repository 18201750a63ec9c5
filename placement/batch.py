"""Chronus's placement options on top of an allocator: request round-up and batch consolidation.

* :func:`round_up` maps a GPU count to {1, 2, 4, 8n} (configurable), so that a 3-GPU job takes a
  whole socket and a 6-GPU job a whole node instead of leaving odd holes; pass it to
  ``CellAllocator(config, round_up=round_up)``.
* :func:`consolidate` places a batch of jobs (one scheduling round). Chronus tries several greedy
  orderings and keeps the best; that is the floor here. Then a local search swaps pairs of jobs in
  the order and keeps a swap when the total placement score improves. The score of a placed job
  is its GPUs times :func:`~placement.slowdown.speed_factor` of its placement, so placing more
  GPUs wins first and tighter topology second. Trials never evict anyone.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import partial
from typing import Callable, Mapping, Sequence

from placement.allocator import CellAllocator
from placement.slowdown import speed_factor
from placement.types import Allocator, Request, Result


def round_up(gpus: int, *, small: Sequence[int] = (1, 2, 4), node: int = 8) -> int:
    """The smallest of ``small`` that holds ``gpus``, else the next multiple of ``node``."""
    for size in sorted(small):
        if gpus <= size:
            return size
    return -(-gpus // node) * node


@dataclass(frozen=True)
class BatchPlacement:
    """What :func:`consolidate` committed, and how it compared with the greedy orderings."""

    order: tuple[str, ...]
    results: Mapping[str, Result]
    score: float
    greedy_score: float
    greedy_ordering: str
    trials: int


ORDERINGS: dict[str, Callable[[Request], tuple]] = {
    "given": lambda r: (),
    "largest_first": lambda r: (-r.total_gpus,),
    "most_pods_first": lambda r: (-sum(p.count for p in r.pods), -r.total_gpus),
    "smallest_first": lambda r: (r.total_gpus,),
}


def consolidate(
    allocator: Allocator,
    requests: Sequence[Request],
    *,
    models: Mapping[str, str] | None = None,
    steps: int = 200,
    seed: int = 0,
) -> BatchPlacement:
    """Place ``requests`` in the best order found and return the committed results."""
    models = models or {}
    place = (
        partial(allocator.allocate, preempt=False)
        if isinstance(allocator, CellAllocator)
        else allocator.allocate
    )
    topology = allocator if isinstance(allocator, CellAllocator) else None

    def score_of(request: Request, result: Result) -> float:
        if result.outcome != "placed":
            return 0.0
        return request.total_gpus * speed_factor(
            result.by_node(), models.get(request.job), topology=topology
        )

    def run(order: Sequence[Request]) -> tuple[float, dict[str, Result]]:
        results = {r.job: place(r) for r in order}
        return sum(score_of(r, results[r.job]) for r in order), results

    def trial(order: Sequence[Request]) -> float:
        total, results = run(order)
        for request in reversed(order):
            if results[request.job].outcome == "placed":
                allocator.release(request.job)
        return total

    trials = 0
    best_name, best_order, best = "", list(requests), -1.0
    for name, key in ORDERINGS.items():
        order = sorted(requests, key=key)  # stable: ties keep the given order
        value = trial(order)
        trials += 1
        if value > best:
            best_name, best_order, best = name, order, value
    greedy = best
    rng = random.Random(seed)
    n = len(best_order)
    for _ in range(steps if n > 1 else 0):
        i, j = rng.sample(range(n), 2)
        order = list(best_order)
        order[i], order[j] = order[j], order[i]
        value = trial(order)
        trials += 1
        if value > best:
            best_order, best = order, value
    committed, results = run(best_order)
    return BatchPlacement(
        tuple(r.job for r in best_order),
        results,
        committed,
        greedy,
        best_name,
        trials,
    )
