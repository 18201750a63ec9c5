"""Bad and healthy nodes, and which promised cells bad hardware currently dooms.

A bad node leaves every tenant's slot index, so nothing new lands on it; jobs already there keep
running. Nothing else is recorded: whether a tenant's promise can be met on healthy hardware
(:func:`doomed_cells`) is recomputed from the free lists and the tree each time it is asked.
HiveD instead keeps "doomed" lists next to its counters, and when a doomed cell's node recovers
while a job runs on its healthy half, the cell is never returned to the free list and the next
request panics with "VC Safety Broken" (../shared/notes/hived.md §7). Recomputing cannot leak.
"""

from __future__ import annotations

from placement.binding import Tenants
from placement.buddy import FreeLists
from placement.cells import Cell, Topology
from placement.packing import SlotIndex


def _slots_on(node: Cell) -> list[Cell]:
    own = [node] if node.region is not None else []
    return own + list(node.slots)


def _indexed(slot: Cell) -> bool:
    """Slots of cells bound on demand are indexed; pinned cells are reached only by name."""
    return slot.region is not None and not slot.region.fixed


def mark_bad(node: Cell, index: SlotIndex) -> bool:
    """Mark one node cell bad; returns False when it already was."""
    if node.bad:
        return False
    node.bad = 1
    cell = node.parent
    while cell is not None:
        cell.bad += 1
        cell = cell.parent
    for slot in _slots_on(node):
        if _indexed(slot):
            index.drop(slot)
    return True


def mark_healthy(node: Cell, index: SlotIndex) -> bool:
    """Mark one node cell healthy again; returns False when it already was."""
    if not node.bad:
        return False
    node.bad = 0
    cell = node.parent
    while cell is not None:
        cell.bad -= 1
        cell = cell.parent
    for slot in _slots_on(node):
        if _indexed(slot):
            index.put((slot.region.bound, slot.chain), slot)
    return True


def doomed_cells(
    topology: Topology, free: FreeLists, tenants: Tenants
) -> dict[str, dict[str, int]]:
    """Per VC, how many of its unbound promised cells (by cell type) cannot be bound right now on
    wholly healthy hardware.

    Serves the promises the way the buddy allocator would: top level first, VCs in config order,
    each from the lowest free level, on a copy of the free lists. A cell whose node is bad is
    doomed until the node recovers or other healthy cells free up.
    """
    sim = free.clone()
    out: dict[str, dict[str, int]] = {}
    for chain in topology.chains.values():
        for level in range(chain.top_level, 0, -1):
            for tenant in tenants.by_name.values():
                for _ in range(tenant.unbound(chain.name, level)):
                    cell = next((c for c in sim.candidates(chain, level) if c.healthy()), None)
                    if cell is None:
                        per_vc = out.setdefault(tenant.name, {})
                        cell_type = chain.type_at[level]
                        per_vc[cell_type] = per_vc.get(cell_type, 0) + 1
                    else:
                        sim.take(cell)
    return out
