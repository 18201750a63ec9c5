"""Running jobs and the GPU-level bookkeeping every state change goes through.

``occupy``/``vacate`` are the only places that flip a node's GPU bits; they keep the counters of
the cells above the node and the tenants' slot index in step, so the rest of the package can
trust ``free_count()`` and the index without re-deriving them.
"""

from __future__ import annotations

from functools import lru_cache

from placement.cells import Cell
from placement.packing import SlotIndex, bit_positions
from placement.types import PodPlacement, Result


@lru_cache(maxsize=1 << 16)
def gpu_indices(gpus: tuple[int, ...], mask: int) -> tuple[int, ...]:
    """GPU indices (as the config numbers them) of the node positions in ``mask``."""
    return tuple(gpus[p] for p in bit_positions(mask))


@lru_cache(maxsize=1 << 15)
def placed_on(node: str, gpus: tuple[int, ...], mask: int) -> Result:
    """The result of placing a one-pod job on positions ``mask`` of a node (its name and GPU
    numbering), nobody evicted.

    Results are immutable, and building one (with its pod record) costs a fifth of a fast
    allocate + release, so equal ones are shared. The key holds no cell, so a cache entry never
    keeps an allocator's cell tree alive; the size bound caps the memory (a few MB)."""
    return Result("placed", (PodPlacement(node, gpu_indices(gpus, mask)),))


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
        return tuple(
            PodPlacement(node.name, gpu_indices(node.gpus, mask)) for node, mask in self.pods
        )


class Ledger:
    """Flips GPU bits for jobs and keeps counters, free totals and the slot index in step, and
    adds every node it changes to ``touched`` (see :class:`placement.idle.IdleNodes`)."""

    def __init__(self, index: SlotIndex, total_gpus: int, touched: set[Cell]):
        self.index = index
        self.free_total = total_gpus
        self.touched = touched

    def occupy(self, job: Job, node: Cell, mask: int) -> None:
        k = mask.bit_count()
        was_idle = node.nfree == node.size
        node.free_mask &= ~mask
        node.nfree -= k
        if job.priority < 0:
            node.opp_mask |= mask
        jobs = node.jobs
        jobs[job] = jobs.get(job, 0) | mask
        cell = node.parent
        while cell is not None:
            cell.used += k
            cell.idle -= was_idle
            cell = cell.parent
        self.free_total -= k
        self.touched.add(node)
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
        now_idle = node.nfree == node.size
        cell = node.parent
        while cell is not None:
            cell.used -= k
            cell.idle += now_idle
            cell = cell.parent
        self.free_total += k
        self.touched.add(node)
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
            self.touched.add(node)
        job.priority = priority

    def _refresh_slots(self, node: Cell, mask: int) -> None:
        for slot in node.slots:
            if slot.bkey >= 0 and slot.bits & mask:
                self.index.refresh(slot)
