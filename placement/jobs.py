"""Running jobs and the GPU-level bookkeeping every state change goes through.

``occupy``/``vacate`` are the only places that flip a node's GPU bits; they keep the counters of
the cells above the node and the tenants' slot index in step, so the rest of the package can
trust ``free_count()`` and the index without re-deriving them.
"""
from __future__ import annotations

from functools import lru_cache

from placement.cells import Cell
from placement.packing import SlotIndex, bit_positions
from placement.types import PodPlacement


@lru_cache(maxsize=1 << 16)
def gpu_indices(gpus: tuple[int, ...], mask: int) -> tuple[int, ...]:
    """GPU indices (as the config numbers them) of the node positions in ``mask``."""
    return tuple(gpus[p] for p in bit_positions(mask))


class Job:
    """One placed gang. ``regions`` counts its guaranteed GPUs per bound cell of its VC."""

    __slots__ = ("name", "vc", "priority", "lazy", "pods", "regions", "placement")

    def __init__(self, name: str, vc: str, priority: int, lazy: bool):
        self.name = name
        self.vc = vc
        self.priority = priority
        self.lazy = lazy
        self.pods: list[tuple[Cell, int]] = []  # (node, node mask) in request order
        self.regions: dict[Cell, int] = {}
        self.placement: tuple[PodPlacement, ...] = ()

    def __repr__(self) -> str:
        return f"Job({self.name}, p{self.priority})"

    def record(self) -> tuple[PodPlacement, ...]:
        return tuple(PodPlacement(node.name, gpu_indices(node.gpus, mask)) for node, mask in self.pods)


class Ledger:
    """Flips GPU bits for jobs and keeps counters, free totals and the slot index in step."""

    def __init__(self, index: SlotIndex, total_gpus: int):
        self.index = index
        self.free_total = total_gpus

    def occupy(self, job: Job, node: Cell, mask: int) -> None:
        k = mask.bit_count()
        node.free_mask &= ~mask
        node.nfree -= k
        if job.priority < 0:
            node.opp_mask |= mask
        jobs = node.jobs
        jobs[job] = jobs.get(job, 0) | mask
        cell = node.parent
        while cell is not None:
            cell.used += k
            cell = cell.parent
        self.free_total -= k
        if node.bkey >= 0:
            self.index.refresh(node)
        if node.slots:
            self._refresh_slots(node, mask)

    def vacate(self, job: Job, node: Cell, mask: int) -> None:
        k = mask.bit_count()
        node.free_mask |= mask
        node.nfree += k
        node.opp_mask &= ~mask
        left = node.jobs.pop(job) & ~mask
        if left:
            node.jobs[job] = left
        cell = node.parent
        while cell is not None:
            cell.used -= k
            cell = cell.parent
        self.free_total += k
        if node.bkey >= 0:
            self.index.refresh(node)
        if node.slots:
            self._refresh_slots(node, mask)

    def reprioritise(self, job: Job, priority: int) -> None:
        """Change the priority a job holds its GPUs at (lazy preemption's downgrade and undo)."""
        for node, mask in job.pods:
            if priority < 0:
                node.opp_mask |= mask
            else:
                node.opp_mask &= ~mask
        job.priority = priority

    def _refresh_slots(self, node: Cell, mask: int) -> None:
        for slot in node.slots:
            if slot.bkey >= 0 and slot.bits & mask:
                self.index.refresh(slot)
