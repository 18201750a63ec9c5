"""Tenants (virtual clusters) and the lazy binding of their promised cells to physical ones.

A VC is promised ``quota[(chain, level)]`` cells. A promised cell is bound to a physical cell of
that level only while a guaranteed job of the VC uses a GPU in it; the binding is made by the
buddy allocator when a job needs a new cell, and undone when the cell's last such GPU is
released, so the physical cell returns to the free lists and may be a different one next time.
That is what keeps fragmentation low and lets a tenant route around bad hardware.

VC safety: a cell is bound only for the VC's own unbound quota and only if
:func:`placement.buddy.feasible` still holds for everyone's remaining promise afterwards.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from placement.buddy import FreeLists
from placement.cells import Cell, Topology
from placement.config import ClusterConfig
from placement.packing import SlotIndex, slots_of


@dataclass
class Tenant:
    """One VC: what it was promised and which physical cells currently hold its promise."""

    name: str
    quota: dict[tuple[str, int], int]
    bound: dict[tuple[str, int], dict[Cell, None]] = field(default_factory=dict)
    refs: dict[Cell, int] = field(default_factory=dict)
    pinned: dict[str, Cell] = field(default_factory=dict)

    def unbound(self, chain: str, level: int) -> int:
        return self.quota.get((chain, level), 0) - len(self.bound.get((chain, level), ()))

    def chains(self) -> list[str]:
        return list(dict.fromkeys(chain for chain, _ in self.quota))

    def regions(self, chain: str) -> list[Cell]:
        """Bound (non-pinned) cells of this VC in ``chain``, lowest level first, in bind order."""
        out: list[Cell] = []
        for (c, _), cells in sorted(self.bound.items(), key=lambda kv: kv[0][1]):
            if c == chain:
                out.extend(cells)
        return out


class Tenants:
    """All VCs plus the free lists and slot index their bindings keep in step."""

    def __init__(self, config: ClusterConfig, topology: Topology, free: FreeLists, index: SlotIndex):
        self.free = free
        self.index = index
        self.by_name: dict[str, Tenant] = {}
        for name, spec in config.virtual_clusters.items():
            quota: dict[tuple[str, int], int] = {}
            for cell in spec.cells:
                k = (cell.chain, config.level(cell.cell_type))
                quota[k] = quota.get(k, 0) + cell.count
            tenant = Tenant(name, {k: v for k, v in quota.items() if v > 0})
            for pid in spec.pinned:
                cell = topology.pinned[pid]
                free.take(cell)
                cell.bound = name
                cell.fixed = True
                for slot in slots_of(cell):
                    slot.region = cell
                    if slot is not slot.node:
                        slot.node.slots.append(slot)
                tenant.pinned[pid] = cell
            self.by_name[name] = tenant

    def demand(self, chain: str) -> dict[int, int]:
        """Promised-but-unbound cells of all VCs in ``chain``, by level."""
        out: dict[int, int] = {}
        for tenant in self.by_name.values():
            for (c, level), n in tenant.quota.items():
                if c == chain:
                    left = n - len(tenant.bound.get((c, level), ()))
                    if left:
                        out[level] = out.get(level, 0) + left
        return out

    def bind(self, tenant: Tenant, cell: Cell) -> None:
        self.free.take(cell)
        cell.bound = tenant.name
        tenant.bound.setdefault((cell.chain, cell.level), {})[cell] = None
        tenant.refs[cell] = 0
        key = (tenant.name, cell.chain)
        for slot in slots_of(cell):
            slot.region = cell
            if slot is not slot.node:
                slot.node.slots.append(slot)
            if slot.healthy():
                self.index.put(key, slot)

    def unbind(self, tenant: Tenant, cell: Cell) -> None:
        for slot in slots_of(cell):
            self.index.drop(slot)
            slot.region = None
            if slot is not slot.node:
                slot.node.slots.remove(slot)
        del tenant.bound[(cell.chain, cell.level)][cell]
        del tenant.refs[cell]
        cell.bound = None
        self.free.give(cell)
