"""Where a gang goes: a :class:`Candidate` per chain, compared by one score, nothing changed yet.

A guaranteed job of VC ``v`` may use GPUs of ``v``'s bound cells and cells the buddy allocator
would bind for ``v``'s unbound quota; an opportunistic job may use idle GPUs anywhere. Three shapes
of candidate are tried:

* **inside** one existing cell of the VC (the smallest one that holds the whole gang);
* **new cell**: one cell bound for the VC, the lowest level that holds the gang;
* **spread** (gangs only): pod by pod onto the busiest bound node, binding the smallest new cell
  a pod needs when none fits.

Candidates are compared by ``(victims, nodes, size of the lowest common cell, size of the free cells
split, chain order)``: no preemption if avoidable, fewest nodes, tightest topology, least
fragmentation, then config order. ``q`` is the priority below which GPUs count as usable
(``None``: free GPUs only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Sequence

from placement.binding import Tenant, Tenants
from placement.buddy import (
    FreeLists,
    by_fewest_opportunistic,
    descendants_by_fewest_opportunistic,
    feasible_after_take,
)
from placement.cells import Cell, Chain, Topology, lowest_common_cell
from placement.idle import IdleNodes
from placement.packing import containers, fit_pods, lca_size, pick, slots_of


@dataclass(slots=True)
class Candidate:
    chain: str
    pods: list[tuple[int, Cell, int]]  # (pod index in the request, slot, slot-relative mask)
    binds: list[Cell]
    victims: frozenset
    score: tuple


class Planner:
    """Computes candidate placements against the current state; it never mutates it."""

    def __init__(self, topology: Topology, tenants: Tenants, free: FreeLists, idle: IdleNodes):
        self.topology = topology
        self.tenants = tenants
        self.free = free
        self.idle = idle
        self.chain_index = {name: i for i, name in enumerate(topology.chains)}
        # (VC, chain) -> (level, GPUs per cell, GPUs per slot) of its promised levels, lowest first
        self._shapes: dict[tuple[str, str], list[tuple[int, int, int]]] = {}

    # -- masks ---------------------------------------------------------------------------------

    def _masker(self, q: int | None, allowed: Collection[str] | None):
        cache: dict[Cell, tuple[int, int]] = {}

        def masks(slot: Cell) -> tuple[int, int]:
            got = cache.get(slot)
            if got is None:
                node = slot.node
                if node.bad or (allowed is not None and node.name not in allowed):
                    got = (0, 0)
                else:
                    usable = free = node.free_mask
                    if q is not None:
                        for job, mask in node.jobs.items():
                            if job.priority < q:
                                usable |= mask
                    full = (1 << slot.size) - 1
                    got = ((usable >> slot.offset) & full, (free >> slot.offset) & full)
                cache[slot] = got
            return got

        return masks

    # -- scoring -------------------------------------------------------------------------------

    def _candidate(self, chain: str, fitted, binds: list[Cell], holders: list[Cell]) -> Candidate:
        victims = set()
        per_node: dict[Cell, int] = {}
        for _, slot, m in fitted:
            node = slot.node
            absolute = m << slot.offset
            per_node[node] = per_node.get(node, 0) | absolute
            for job, held in node.jobs.items():
                if held & absolute:
                    victims.add(job)
        nodes = list(per_node)
        if len(nodes) == 1:
            lca = lca_size(nodes[0].sizes, per_node[nodes[0]])
        else:
            common = lowest_common_cell(nodes)
            lca = (
                common.size
                if common is not None
                else sum(t.size for t in self.topology.chains[chain].tops)
            )
        score = (
            len(victims),
            len(nodes),
            lca,
            sum(h.size for h in holders),
            self.chain_index[chain],
        )
        return Candidate(chain, list(fitted), binds, frozenset(victims), score)

    # -- guaranteed ----------------------------------------------------------------------------

    def guaranteed(
        self,
        tenant: Tenant,
        chains: Sequence[str],
        pods,
        *,
        q: int | None,
        inside: bool,
        bind: bool,
        pinned: Cell | None,
        allowed: Collection[str] | None,
    ) -> Candidate | None:
        best: Candidate | None = None
        for chain in chains:
            candidate = self._guaranteed_in(
                tenant, self.topology.chains[chain], pods, q, inside, bind, pinned, allowed
            )
            if candidate is not None and (best is None or candidate.score < best.score):
                best = candidate
        return best

    def _guaranteed_in(
        self, tenant, chain: Chain, pods, q, inside, bind, pinned, allowed
    ) -> Candidate | None:
        masks = self._masker(q, allowed)
        usable_count = _counter(masks)
        total = sum(n for _, n in pods)
        regions = [pinned] if pinned is not None else tenant.regions(chain.name) if inside else []
        options: list[Candidate] = []
        if inside:
            for box in containers(
                regions, total, usable_count, self._cell_count(q, allowed, usable_count)
            ):
                fitted = self._fit(slots_of(box), pods, masks)
                if fitted:
                    options.append(self._candidate(chain.name, fitted, [], []))
                    break
        if bind and pinned is None:
            candidate = self._new_cell(tenant, chain, pods, total, masks, usable_count)
            if candidate is not None:
                options.append(candidate)
            if len(pods) > 1:
                if q is None and allowed is None:
                    # only slots with room for the smallest pod can take one: ask the index
                    slots = self.tenants.index.slots_with((tenant.name, chain.name), pods[-1][1])
                else:
                    slots = [s for r in tenant.regions(chain.name) for s in slots_of(r)]
                candidate = self._spread(tenant, chain, pods, slots, masks)
                if candidate is not None:
                    options.append(candidate)
        return min(options, key=lambda p: p.score) if options else None

    @staticmethod
    def _cell_count(q, allowed, usable_count):
        """Free GPUs of a cell above the nodes from its counters when that is exact (free GPUs
        only, no bad node below, every node allowed); otherwise summed over its nodes."""
        if q is not None or allowed is not None:
            return None

        def count(cell: Cell) -> int:
            return (
                cell.size - cell.used if not cell.bad else sum(usable_count(n) for n in cell.nodes)
            )

        return count

    def _fit(self, slots, pods, masks, key=None):
        usable = {}
        free = {}
        for s in slots:
            usable[s], free[s] = masks(s)
        return fit_pods(slots, pods, usable, free, key)

    def _shapes_of(self, tenant: Tenant, chain: Chain) -> list[tuple[int, int, int]]:
        """(level, GPUs per cell, GPUs per slot) of the VC's promised levels in ``chain``, lowest
        first (cached: quotas never change)."""
        shapes = self._shapes.get((tenant.name, chain.name))
        if shapes is None:
            shapes = self._shapes[(tenant.name, chain.name)] = [
                (level, chain.leaves[level], chain.leaves[min(level, chain.node_level)])
                for level in sorted(lv for (c, lv) in tenant.quota if c == chain.name)
            ]
        return shapes

    def _levels(self, tenant: Tenant, chain: Chain, need_cell: int, need_slot: int) -> list[int]:
        """The VC's unbound levels in ``chain`` (lowest first) whose cells can hold the request."""
        return [
            level
            for level, size, slot in self._shapes_of(tenant, chain)
            if size >= need_cell and slot >= need_slot and tenant.unbound(chain.name, level) > 0
        ]

    def _new_cell(self, tenant, chain: Chain, pods, total, masks, usable_count) -> Candidate | None:
        counts = self.free.counts(chain)
        demand = self.tenants.demand(chain.name)
        for level in self._levels(tenant, chain, total, pods[0][1]):
            for cell in self.free.candidates(chain, level):
                if sum(usable_count(s) for s in slots_of(cell)) < total:
                    continue
                holder = self.free.free_ancestor(cell)
                if not feasible_after_take(chain, counts, demand, cell, holder):
                    continue
                for box in containers([cell], total, usable_count):
                    fitted = self._fit(slots_of(box), pods, masks)
                    if fitted:
                        return self._candidate(chain.name, fitted, [cell], [holder])
        return None

    def new_cell_for_pod(
        self, tenant: Tenant, chain: Chain, n: int
    ) -> tuple[Cell, Cell, Cell, int] | None:
        """:meth:`_new_cell` for one pod of ``n`` GPUs on free healthy GPUs, every node allowed,
        without the general machinery (the common slow case when tenants are promised small
        cells): the same cell, holder, slot and GPUs, as ``(cell, holder, slot, slot mask)``.

        Cells are tried in :meth:`FreeLists.candidates` order (inlined: the holder of a cell is
        the free cell it was cut from). The slot is what :func:`containers` and
        :func:`fit_pods` would choose for one pod: the cell itself when it lies in a node,
        otherwise its busiest node with ``n`` free GPUs (lowest id among equals).
        """
        name = chain.name
        quota, bound = tenant.quota, tenant.bound
        levels = self.free.levels[name]
        counts = None
        for level, size, slot_size in self._shapes_of(tenant, chain):
            if (
                size < n
                or slot_size < n
                or quota[(name, level)] - len(bound.get((name, level), ())) <= 0
            ):
                continue
            for upper in range(level, chain.top_level + 1):
                for holder in by_fewest_opportunistic(levels[upper]):
                    for cell in (
                        (holder,)
                        if upper == level
                        else descendants_by_fewest_opportunistic(holder, level)
                    ):
                        node = cell.node
                        if node is not None:
                            if node.bad:
                                continue
                            avail = node.free_mask
                            if cell is not node:
                                avail = (avail >> cell.offset) & ((1 << cell.size) - 1)
                            if avail.bit_count() < n:
                                continue
                            slot = cell
                        else:
                            slot, least = None, 0
                            for x in cell.nodes:
                                if not x.bad and x.nfree >= n and (slot is None or x.nfree < least):
                                    slot, least = x, x.nfree
                            if slot is None:
                                continue
                            avail = slot.free_mask
                        if counts is None:
                            counts = list(map(len, levels))
                        if feasible_after_take(
                            chain, counts, self.tenants.demand_view(name), cell, holder
                        ):
                            return cell, holder, slot, pick(slot.sizes, avail, n)
        return None

    def _spread(self, tenant, chain: Chain, pods, slots: list[Cell], masks) -> Candidate | None:
        slots = list(slots)
        usable = {}
        free = {}
        for s in slots:
            usable[s], free[s] = masks(s)
        sim: FreeLists | None = None
        demand: dict[int, int] = {}
        taken: dict[int, int] = {}
        binds: list[Cell] = []
        holders: list[Cell] = []
        fitted = []
        for idx, n in pods:
            got = fit_pods(slots, [(idx, n)], usable, free)
            if got is None:
                if sim is None:
                    sim = self.free.clone()
                    demand = self.tenants.demand(chain.name)
                cell = self._bind_for_pod(tenant, chain, n, sim, demand, taken, masks)
                if cell is None:
                    return None
                holder = sim.free_ancestor(cell)
                sim.take(cell)
                demand[cell.level] -= 1
                taken[cell.level] = taken.get(cell.level, 0) + 1
                binds.append(cell)
                holders.append(holder)
                for s in slots_of(cell):
                    slots.append(s)
                    usable[s], free[s] = masks(s)
                got = fit_pods(slots, [(idx, n)], usable, free)
            _, slot, m = got[0]
            usable[slot] &= ~m
            free[slot] &= ~m
            fitted.append(got[0])
        return self._candidate(chain.name, fitted, binds, holders)

    def _bind_for_pod(
        self, tenant, chain: Chain, n, sim: FreeLists, demand, taken, masks
    ) -> Cell | None:
        for level in self._levels(tenant, chain, n, n):
            if tenant.unbound(chain.name, level) - taken.get(level, 0) <= 0:
                continue
            counts = sim.counts(chain)
            for cell in sim.candidates(chain, level):
                if not any(masks(s)[0].bit_count() >= n for s in slots_of(cell)):
                    continue
                if feasible_after_take(chain, counts, demand, cell, sim.free_ancestor(cell)):
                    return cell
        return None

    # -- opportunistic -------------------------------------------------------------------------

    def opportunistic(
        self, chains: Sequence[str], pods, allowed: Collection[str] | None
    ) -> Candidate | None:
        """Idle GPUs anywhere in the chain; prefer nodes no VC holds and with little guaranteed
        work.

        One pod: the node :class:`IdleNodes` names (or, with ``allowed``, the best of those nodes).
        A gang: the best cell that holds it (:func:`containers`, counting cells from their
        counters and skipping those with fewer wholly idle nodes than it has whole-node pods).
        """
        masks = self._masker(None, allowed)
        usable_count = _counter(masks)
        total = sum(n for _, n in pods)

        def key(slot: Cell) -> tuple:
            node = slot.node
            guaranteed = node.size - node.nfree - node.opp_mask.bit_count()
            return (node.region is not None or bool(node.slots), guaranteed)

        best: Candidate | None = None
        for name in chains:
            chain = self.topology.chains[name]
            candidate = None
            if len(pods) == 1 and allowed is None:
                idx, n = pods[0]
                node = self.idle.best(name, n)
                if node is not None:
                    candidate = self._candidate(
                        name, [(idx, node, pick(node.sizes, node.free_mask, n))], [], []
                    )
            elif len(pods) == 1:
                if allowed is None:
                    slots = [n for top in chain.tops for n in top.nodes]
                else:
                    slots = [
                        c
                        for a in allowed
                        for c in self.topology.node_cells.get(a, ())
                        if c.chain == name
                    ]
                fitted = self._fit(slots, pods, masks, key)
                if fitted:
                    candidate = self._candidate(name, fitted, [], [])
            else:
                cell_count = self._cell_count(None, allowed, usable_count)
                node_size = chain.leaves[chain.node_level]
                whole = sum(1 for _, n in pods if n == node_size)
                for box in containers(chain.tops, total, usable_count, cell_count, whole):
                    fitted = self._fit(slots_of(box), pods, masks, key)
                    if fitted:
                        candidate = self._candidate(name, fitted, [], [])
                        break
            if candidate is not None and (best is None or candidate.score < best.score):
                best = candidate
        return best


def _counter(masks):
    """Usable GPUs of a slot, from a masker."""

    def count(slot: Cell) -> int:
        return masks(slot)[0].bit_count()

    return count
