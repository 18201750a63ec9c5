"""Tenants (virtual clusters) and the lazy binding of their promised cells to physical ones.

A VC is promised ``quota[(chain, level)]`` cells. A promised cell is bound to a physical cell of
that level only while a guaranteed job of the VC uses a GPU in it; the binding is made by the
buddy allocator when a job needs a new cell, and undone when the cell's last such GPU is
released, so the physical cell returns to the free lists and may be a different one next time.
That is what keeps fragmentation low and lets a tenant route around bad hardware.

VC safety: a cell is bound only for the VC's own unbound quota and only if
:func:`placement.buddy.feasible` still holds for everyone's remaining promise afterwards.

The unbound promise per chain and level (``demand``) is kept up to date by ``bind``/``unbind``
because every binding decision asks for it; ``recount_demand`` derives it from the tenants'
bindings again, and ``CellAllocator.audit`` checks that the two agree. (The free side of the
safety test is never counted: it is read off the free lists.)
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
    """All VCs plus the free lists and slot index their bindings keep in step; nodes whose
    binding changes go into ``touched`` (see :class:`placement.idle.IdleNodes`)."""

    def __init__(
        self,
        config: ClusterConfig,
        topology: Topology,
        free: FreeLists,
        index: SlotIndex,
        touched: set[Cell],
    ):
        self.free = free
        self.index = index
        self.touched = touched
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
        self._demand = {chain: self.recount_demand(chain) for chain in topology.chains}

    def demand(self, chain: str) -> dict[int, int]:
        """Promised-but-unbound cells of all VCs in ``chain``, by level (a copy: callers may
        change it to simulate binds)."""
        return {level: n for level, n in self._demand[chain].items() if n}

    def demand_view(self, chain: str) -> dict[int, int]:
        """``demand`` without the copy, for callers that only read it."""
        return self._demand[chain]

    def recount_demand(self, chain: str) -> dict[int, int]:
        """``demand`` derived from every tenant's quota and bound cells."""
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
        cells = tenant.bound.get((cell.chain, cell.level))
        if cells is None:
            cells = tenant.bound[(cell.chain, cell.level)] = {}
        cells[cell] = None
        tenant.refs[cell] = 0
        demand = self._demand[cell.chain]
        demand[cell.level] = demand.get(cell.level, 0) - 1
        key = (tenant.name, cell.chain)
        touched = self.touched
        for slot in slots_of(cell):
            slot.region = cell
            node = slot.node
            if slot is not node:
                node.slots.append(slot)
            touched.add(node)
            if not node.bad:
                self.index.put(key, slot)

    def unbind(self, tenant: Tenant, cell: Cell) -> None:
        for slot in slots_of(cell):
            self.index.drop(slot)
            slot.region = None
            if slot is not slot.node:
                slot.node.slots.remove(slot)
            self.touched.add(slot.node)
        del tenant.bound[(cell.chain, cell.level)][cell]
        del tenant.refs[cell]
        demand = self._demand[cell.chain]
        demand[cell.level] = demand.get(cell.level, 0) + 1
        cell.bound = None
        self.free.give(cell)
