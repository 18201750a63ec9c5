"""Holding placements that already exist: ``CellAllocator.reserve`` and the work-preserving restart.

Apart from ``allocate``, which chooses GPUs, the allocator can be told which GPUs a job already
holds (restored from a cluster manager's state, or still running across a restart on a changed
config). The work is the reverse of placing: map each named GPU back into a cell of the job's VC,
binding the lowest cells of the VC's unbound promise that hold it, and, after a restart, take
cells back from lower-priority jobs or hold the job lazily preempted when its GPUs no longer fit
its VC (HiveD's work-preserving reconfiguration, ../notes/hived.md §8). It lives apart from
:mod:`placement.allocator` because none of it is on the ``allocate`` path.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Iterable, Mapping

from placement.binding import Tenant, Tenants
from placement.buddy import FreeLists, feasible_after_take
from placement.cells import Cell, Topology, leaf_cells
from placement.jobs import Job, Ledger
from placement.planner import Candidate
from placement.preemption import downgrade, undo
from placement.types import Request, Result


@dataclass(frozen=True, slots=True)
class Restorer:
    """Maps held GPUs into VC cells against the allocator's state, and re-adds restarted jobs.

    It shares the allocator's state objects and ``jobs`` dict, and commits through the
    allocator's ``commit(request, candidate, tenant, downgraded)``.
    """

    topology: Topology
    tenants: Tenants
    free: FreeLists
    ledger: Ledger
    jobs: dict[str, Job]
    commit: Callable[[Request, Candidate, Tenant | None, tuple], Result]

    def readd(
        self,
        request: Request,
        placement: Mapping[str, Iterable[int]],
        cell_types: Mapping[str, Mapping[int, str]],
    ) -> Result:
        """``CellAllocator.reserve(restart=True)``: see there."""
        if request.job in self.jobs:
            return Result("error", reason=f"job {request.job} is already placed")
        if not -1 <= request.priority <= 1000:
            return Result("error", reason=f"priority {request.priority} is out of range -1..1000")
        positions = self.positions(placement, ignore_missing=True)
        if isinstance(positions, str):
            return Result("error", reason=positions)
        if not positions:
            return Result("error", reason="none of its GPUs is in the config any more")
        if request.priority < 0:
            return self.commit(request, self.map(request, None, positions, {}), None, ())
        tenant = self.tenants.by_name.get(request.vc)
        why = _unmappable(request, tenant, positions)
        if why:
            return self._hold_lazily_preempted(request, positions, why)
        types = {
            (node, gpu): t for node, per_gpu in cell_types.items() for gpu, t in per_gpu.items()
        }
        records = []
        while True:
            mapped = self.map(request, tenant, positions, types)
            if not isinstance(mapped, Unmapped):
                return self.commit(request, mapped, tenant, tuple(r.job.name for r in records))
            if mapped.blocker is None:
                break
            holders = sorted(
                (j for j in self.jobs.values() if mapped.blocker in j.regions), key=lambda j: j.name
            )
            records.extend(downgrade(j, self.ledger, self.tenants) for j in holders)
        for record in reversed(records):
            undo(record, self.ledger, self.tenants)
        return self._hold_lazily_preempted(request, positions, mapped.reason)

    def _hold_lazily_preempted(
        self, request: Request, positions: list[tuple[Cell, int]], why: str
    ) -> Result:
        held = replace(request, priority=-1)
        placed = self.commit(held, self.map(held, None, positions, {}), None, (request.job,))
        return replace(placed, reason=f"lazily preempted: {why}")

    def map(
        self,
        request: Request,
        tenant: Tenant | None,
        positions: list[tuple[Cell, int]],
        types: Mapping[tuple[str, int], str],
    ) -> Candidate | Unmapped:
        """The candidate that holds ``positions`` for ``request``, binding the VC cells the GPUs
        need
        (only cells of the type ``types`` names for a GPU, when it names one), or why it cannot."""
        binds: list[Cell] = []
        masks: dict[Cell, int] = {}
        sim: FreeLists | None = None
        need: dict[str, dict[int, int]] = {}
        taken: dict[tuple[str, int], int] = {}
        for node, pos in positions:
            slot = node
            if tenant is not None:
                region = next((c for c in binds if _covers(c, node, pos)), None) or bound_ancestor(
                    node, pos
                )
                if region is None:
                    sim = sim or self.free.clone()
                    want = types.get((node.name, node.gpus[pos]))
                    level = None
                    if want is not None:
                        level = self.topology.chains[node.chain].level_of.get(want)
                        if level is None:
                            return Unmapped(
                                f"cell type {want} of GPU {node.gpus[pos]} of node {node.name} "
                                f"is not in chain {node.chain}"
                            )
                    region = self._bind_for_gpu(tenant, node, pos, sim, need, taken, level)
                    if region is None:
                        blocker = (
                            None
                            if level is None
                            else self._taken_back(request, tenant, node, pos, level, sim, taken)
                        )
                        return Unmapped(
                            f"GPU {node.gpus[pos]} of node {node.name} is outside VC "
                            f"{tenant.name}'s "
                            f"cells and none of its promise can be bound there",
                            blocker,
                        )
                    binds.append(region)
                elif region.bound not in (None, tenant.name):  # None: bound by this candidate
                    return Unmapped(
                        f"GPU {node.gpus[pos]} of node {node.name} lies in VC {region.bound}'s "
                        f"cells"
                    )
                if region.node is not None and not region.is_node:
                    slot = region
            masks[slot] = masks.get(slot, 0) | 1 << (pos - slot.offset)
        pods = [(i, slot, mask) for i, (slot, mask) in enumerate(masks.items())]
        return Candidate(positions[0][0].chain, pods, binds, frozenset(), ())

    def _taken_back(
        self,
        request: Request,
        tenant: Tenant,
        node: Cell,
        pos: int,
        level: int,
        sim: FreeLists,
        taken: dict[tuple[str, int], int],
    ) -> Cell | None:
        """The VC's bound cell to take back so that GPU ``pos`` of ``node`` can have its level-
        ``level`` cell: only when that cell is free and the VC has no unbound promise left at
        the level; the lowest-priority bound cell of that level whose priority is below the
        request's (first bound among equals), as HiveD maps a physical cell back."""
        chain = node.chain
        cell = leaf_cells(node, 1 << pos)[0]
        while cell.level < level:
            cell = cell.parent
        if (
            sim.free_ancestor(cell) is None
            or tenant.unbound(chain, level) - taken.get((chain, level), 0) > 0
        ):
            return None
        best, lowest = None, request.priority
        for bound in tenant.bound.get((chain, level), ()):
            priority = max(
                (j.priority for j in self.jobs.values() if bound in j.regions), default=-1
            )
            if priority < lowest:
                best, lowest = bound, priority
        return best

    def positions(
        self, placement: Mapping[str, Iterable[int]], *, ignore_missing: bool = False
    ) -> list[tuple[Cell, int]] | str:
        """(node cell, position) of every GPU named, or why they cannot be held. With
        ``ignore_missing``, GPUs on nodes (or at indices) the config does not have are skipped."""
        out: list[tuple[Cell, int]] = []
        seen: set[tuple[str, int]] = set()
        for name, gpus in placement.items():
            cells = self.topology.node_cells.get(name)
            if cells is None:
                if ignore_missing:
                    continue
                return f"unknown node {name!r}"
            where = {g: (cell, p) for cell in cells for p, g in enumerate(cell.gpus)}
            for g in gpus:
                if g not in where:
                    if ignore_missing:
                        continue
                    return f"node {name} has no GPU {g}"
                if (name, g) in seen:
                    return f"GPU {g} of node {name} is listed twice"
                seen.add((name, g))
                cell, p = where[g]
                if not cell.free_mask >> p & 1:
                    holder = next(j.name for j, m in cell.jobs.items() if m >> p & 1)
                    return f"GPU {g} of node {name} is held by job {holder}"
                out.append((cell, p))
        return out

    def _bind_for_gpu(
        self,
        tenant: Tenant,
        node: Cell,
        pos: int,
        sim: FreeLists,
        need: dict[str, dict[int, int]],
        taken: dict[tuple[str, int], int],
        level: int | None = None,
    ) -> Cell | None:
        """The lowest cell holding GPU ``pos`` of ``node`` (the one at ``level``, if given) that
        the VC's unbound promise may bind. ``sim`` (free lists), ``need`` (unbound promises per
        chain) and ``taken`` (this VC's binds per chain and level) already count the binds
        planned so far, and are updated."""
        chain = self.topology.chains[node.chain]
        demand = need.setdefault(chain.name, self.tenants.demand(chain.name))
        cell: Cell | None = leaf_cells(node, 1 << pos)[0]
        while cell is not None:
            if level is not None and cell.level != level:
                cell = cell.parent if cell.level < level else None
                continue
            key = (chain.name, cell.level)
            holder = sim.free_ancestor(cell)
            if (
                tenant.unbound(*key) - taken.get(key, 0) > 0
                and holder is not None
                and feasible_after_take(chain, sim.counts(chain), demand, cell, holder)
            ):
                sim.take(cell)
                demand[cell.level] -= 1
                taken[key] = taken.get(key, 0) + 1
                return cell
            cell = cell.parent
        return None


@dataclass(frozen=True, slots=True)
class Unmapped:
    """Why a held placement cannot be mapped into its VC; ``blocker``: a bound cell of the VC
    whose jobs a restarted job may lazily preempt to map (see ``reserve(restart=True)``)."""

    reason: str
    blocker: Cell | None = None


def _unmappable(request: Request, tenant: Tenant | None, positions: list[tuple[Cell, int]]) -> str:
    """Why a restarted guaranteed job cannot be in its VC whatever cells are bound, or ''."""
    if tenant is None:
        return f"VC {request.vc} does not exist"
    if len({node.chain for node, _ in positions}) > 1:
        return "its GPUs are in more than one chain"
    if request.pinned is not None:
        cell = tenant.pinned.get(request.pinned)
        if cell is None:
            return f"VC {request.vc} does not have pinned cell {request.pinned}"
        if any(bound_ancestor(node, pos) is not cell for node, pos in positions):
            return f"its GPUs are not all in pinned cell {request.pinned}"
    return ""


def bound_ancestor(node: Cell, pos: int) -> Cell | None:
    """The bound (or pinned) cell containing position ``pos`` of ``node``, if any."""
    cell: Cell | None = node
    while cell is not None and cell.bound is None:
        cell = cell.parent
    if cell is not None:
        return cell
    for slot in node.slots:
        if slot.bits >> pos & 1:
            return slot.region
    return None


def _covers(cell: Cell, node: Cell, pos: int) -> bool:
    """Does ``cell`` contain position ``pos`` of ``node``?"""
    if cell.node is node:
        return bool(cell.bits >> pos & 1)
    x = node.parent
    while x is not None and x is not cell:
        x = x.parent
    return x is cell
