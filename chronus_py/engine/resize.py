"""Moving an elastic job to a new size on the allocator: gangs, shrinking onto the GPUs it holds,
falling back to a smaller size that fits, and what the move costs.

A move goes through the allocator and pauses the job for the overhead model's seconds while it
holds its new GPUs (``chronus_py.jobs.overhead``); progress so far is banked at the old size
(``JobState``). The elastic scheduler (``chronus_py.engine.elastic``) applies a policy's sizes
with it: shrinks and stops first, then grows and starts, so the GPUs a grow needs are free.
"""

from __future__ import annotations

from enum import Enum

from chronus_py.jobs.overhead import Overhead
from chronus_py.jobs.state import JobState, Status
from placement import Allocator, PodSpec, Request


class Move(Enum):
    STARTED = "started"
    RESIZED = "resized"
    STOPPED = "stopped"


def pods_for(gpus: int, per_node: int) -> tuple[PodSpec, ...]:
    """Whole nodes first, then the remainder: how the rigid scheduler asks for a gang."""
    if gpus <= per_node:
        return (PodSpec(gpus),)
    whole, rest = PodSpec(per_node, gpus // per_node), PodSpec(gpus % per_node, 1)
    return tuple(p for p in (whole, rest) if p.gpus)


def subset(placement: dict[str, tuple[int, ...]], n: int) -> dict[str, tuple[int, ...]]:
    """``n`` of a job's GPUs, from the nodes where it holds the most (fewest nodes kept)."""
    out: dict[str, tuple[int, ...]] = {}
    for node, ids in sorted(placement.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        if n <= 0:
            break
        take = ids[:n]
        out[node] = take
        n -= len(take)
    return out


def placed_gpus(result) -> int:
    return sum(len(p.gpus) for p in result.pods)


class Resizer:
    """Applies size changes through ``allocator`` on a cluster of ``cluster_gpus`` GPUs with
    nodes of ``per_node``; ``placement_failures`` counts the sizes that did not fit."""

    def __init__(self, allocator: Allocator, per_node: int, cluster_gpus: int, overhead: Overhead):
        self.allocator = allocator
        self.per_node = per_node
        self.cluster_gpus = cluster_gpus
        self.overhead = overhead
        self.placement_failures = 0

    def stop(self, r: JobState, now: float) -> None:
        """Release the job's GPUs and bank its run (no-op if it is stopped)."""
        if r.size:
            self.allocator.release(r.id)
            r.gpu_seconds += r.size * (now - r.run_since)
            r.stop(now)
            r.status = Status.PENDING
            r.size = 0
            r.known_gpus = set()

    def resize(self, r: JobState, new: int, now: float) -> Move | None:
        """Move ``r`` to ``new`` GPUs (0: stop it, a preemption); None if nothing fits and the
        job keeps what it had."""
        old = r.size
        if new == 0:
            self.stop(r, now)
            r.preemptions += 1
            return Move.STOPPED
        before = self.allocator.placement_of(r.id) if old else {}
        if old:
            self.allocator.release(r.id)
        if new < old:
            request = Request(job=r.id, pods=pods_for(new, self.per_node))
            result = self.allocator.reserve(request, subset(before, new))
            if result.outcome != "placed":
                result = self.allocator.allocate(request)
                self.placement_failures += result.outcome != "placed"
        else:
            result = self._allocate_down(r, new, old)
        if result.outcome != "placed":
            if old:
                self.allocator.reserve(Request(job=r.id, pods=pods_for(old, self.per_node)), before)
            return None
        new = placed_gpus(result)
        gpus = {(node, g) for node, ids in result.by_node().items() for g in ids}
        from_stopped = old == 0
        known = not from_stopped and gpus <= r.known_gpus
        cost = self.overhead.seconds(
            new, self.cluster_gpus, from_stopped=from_stopped, known_gpus=known
        )
        if from_stopped:
            r.status = Status.RUNNING
        else:  # bank the run so far at the old size; the run goes on at the new one
            r.gpu_seconds += old * (now - r.run_since)
            r.service = r.service_at(now)
            r.wall += now - r.run_since
        r.run_since = now
        r.known_gpus = gpus if from_stopped else r.known_gpus | gpus
        r.size = new
        r.speed = r.rate_of[new]
        r.paused_until = now + cost
        r.overhead_seconds += cost
        r.overhead_gpu_seconds += cost * new
        if from_stopped:
            r.starts += 1
            if r.first_start is None:
                r.first_start = now
            return Move.STARTED
        r.resizes += 1
        return Move.RESIZED

    def _allocate_down(self, r: JobState, new: int, old: int):
        """Place ``new`` GPUs, or else the largest smaller size of the job above ``old``: a
        fragmented allocator (cells) may hold a smaller gang where the chosen one does not fit.
        Each size that does not fit counts as a placement failure."""
        result = None
        for size in [n for n in reversed(r.job.sizes) if old < n <= new]:
            result = self.allocator.allocate(Request(job=r.id, pods=pods_for(size, self.per_node)))
            if result.outcome == "placed":
                return result
            self.placement_failures += 1
        return result
