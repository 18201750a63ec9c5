"""``CellAllocator``: HiveD's cell model with atomic gang allocation, as a plain Python object.

* Tenants (VCs) are promised cells of given types; physical cells are bound to those promises
  lazily, by the buddy allocator, and no allocation by anyone can make a promise unobtainable
  (VC safety, checked from the free lists at every binding).
* Guaranteed jobs (priority 0..1000) stay inside their VC's cells; opportunistic jobs (-1) use
  idle GPUs anywhere and are evicted first.
* ``allocate`` decides and commits in one call: all pods or none, victims (whole gangs) evicted in
  the same call, lazy downgrades undone if they did not help.

Placement order for a guaranteed job: (1) inside cells the VC already holds, free GPUs only;
(2) also binding new cells, free GPUs only; (3) evicting opportunistic jobs, then the VC's own
jobs one priority level at a time. The common case (one pod that fits a node the VC already holds)
is a heap peek and a cached bitmask pick.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable, Mapping

from placement.binding import Tenant, Tenants
from placement.buddy import FreeLists, feasible, feasible_after_take
from placement.cells import Cell, Topology, leaf_cells
from placement.config import ClusterConfig, load_config
from placement.health import doomed_cells, mark_bad, mark_healthy
from placement.jobs import Job, Ledger, gpu_indices
from placement.packing import SlotIndex, best_fit, bit_positions, lca_size, pick
from placement.planner import Plan, Planner
from placement.preemption import downgrade, thresholds, undo
from placement.types import NodeUsage, PodPlacement, Request, Result


class CellAllocator:
    """Topology-aware, tenant-safe GPU allocator over a HiveD cell config.

    ``config`` is a :class:`ClusterConfig`, a path to a HiveD YAML file, or the parsed mapping.
    ``round_up`` (e.g. :func:`placement.batch.round_up`) maps each pod's GPU count to the count
    actually reserved, so odd sizes do not break switches and sockets.
    """

    def __init__(
        self,
        config: ClusterConfig | str | Path | Mapping,
        *,
        round_up: Callable[[int], int] | None = None,
    ):
        self.config = config if isinstance(config, ClusterConfig) else load_config(config)
        self.topology = Topology(self.config)
        self._free = FreeLists.initial(self.topology.chains)
        self._index = SlotIndex()
        self._tenants = Tenants(self.config, self.topology, self._free, self._index)
        self._ledger = Ledger(self._index, sum(n.size for n in self.topology.all_nodes()))
        self._planner = Planner(self.topology, self._tenants, self._free)
        self._jobs: dict[str, Job] = {}
        self._bad: set[Cell] = set()
        self._round_up = round_up
        self._chain_index = {name: i for i, name in enumerate(self.topology.chains)}
        self._chains_cache: dict[tuple[str, str | None], list[str]] = {}
        self._buckets_cache: dict[tuple[str, str | None], list] = {}

    # -- the Allocator protocol -----------------------------------------------------------------

    def allocate(self, request: Request, *, preempt: bool = True) -> Result:
        """Place the whole gang or nothing. ``preempt=False`` never evicts or downgrades anyone
        (what-if placement, e.g. :func:`placement.batch.consolidate`)."""
        pods = request.pods
        if (
            len(pods) == 1 and pods[0].count == 1 and request.pinned is None and request.nodes is None
            and 0 <= request.priority <= 1000 and pods[0].gpus >= 1 and request.job not in self._jobs
        ):
            tenant = self._tenants.by_name.get(request.vc)
            buckets = self._fast_buckets(tenant, request.sku) if tenant is not None else None
            if buckets:
                n = self._round_up(pods[0].gpus) if self._round_up else pods[0].gpus
                return self._fast(request, tenant, buckets, n) or self._guaranteed(
                    request, tenant, [(0, n)], [n], inside=False, preempt=preempt
                )
        why = self._invalid(request)
        if why:
            return Result("error", reason=why)
        sizes = [self._round_up(p.gpus) if self._round_up else p.gpus for p in pods for _ in range(p.count)]
        order = sorted(enumerate(sizes), key=lambda pod: (-pod[1], pod[0]))
        if request.priority < 0:
            chains = self._sku_chains(request.sku)
            plan = self._planner.opportunistic(chains, order, request.nodes)
            if plan is None:
                return Result("wait", reason=f"no idle GPUs for {_describe(sizes, request.sku)} on healthy nodes")
            return self._commit(request, plan, None, ())
        return self._guaranteed(request, self._tenants.by_name[request.vc], order, sizes, preempt=preempt)

    def release(self, job: str) -> None:
        record = self._jobs.get(job)
        if record is not None:
            self._release(record)

    def set_bad(self, node: str) -> None:
        for cell in self._node_cells(node):
            if mark_bad(cell, self._index):
                self._bad.add(cell)

    def set_healthy(self, node: str) -> None:
        for cell in self._node_cells(node):
            if mark_healthy(cell, self._index):
                self._bad.discard(cell)

    def free_gpus(self) -> int:
        """Free GPUs on healthy nodes."""
        return self._ledger.free_total - sum(n.nfree for n in self._bad)

    def placement_of(self, job: str) -> Mapping[str, tuple[int, ...]]:
        record = self._jobs.get(job)
        return {} if record is None else Result("placed", pods=record.placement).by_node()

    # -- restoring ------------------------------------------------------------------------------

    def reserve(self, request: Request, placement: Mapping[str, Iterable[int]]) -> Result:
        """Hold exactly ``placement`` (node -> GPU indices) for ``request``: a job already running
        there, e.g. restored from a cluster manager's state. All or nothing, nobody is evicted.

        A guaranteed job's GPUs must lie in cells of its VC. A GPU in no bound cell gets the lowest
        cell of the VC's unbound promise that holds it, bound only if every VC's promise can still
        be met afterwards (the same VC-safety test ``allocate`` uses); otherwise the reservation is
        an error, since a job outside its VC's cells would break the invariants ``audit`` checks.
        """
        why = self._invalid(request)
        if why:
            return Result("error", reason=why)
        positions = self._positions(placement)
        if isinstance(positions, str):
            return Result("error", reason=positions)
        if len(positions) != request.total_gpus:
            return Result("error", reason=f"placement holds {len(positions)} GPUs, the request {request.total_gpus}")
        tenant = self._tenants.by_name[request.vc] if request.priority >= 0 else None
        binds: list[Cell] = []
        masks: dict[Cell, int] = {}
        sim: FreeLists | None = None
        need: dict[str, dict[int, int]] = {}
        taken: dict[tuple[str, int], int] = {}
        for node, pos in positions:
            slot = node
            if tenant is not None:
                region = next((c for c in binds if _covers(c, node, pos)), None) or _bound_ancestor(node, pos)
                if region is None:
                    sim = sim or self._free.clone()
                    region = self._bind_for_gpu(tenant, node, pos, sim, need, taken)
                    if region is None:
                        return Result("error", reason=f"GPU {node.gpus[pos]} of node {node.name} is outside "
                                                      f"VC {tenant.name}'s cells and none of its promise can be bound there")
                    binds.append(region)
                elif region.bound not in (None, tenant.name):
                    return Result("error", reason=f"GPU {node.gpus[pos]} of node {node.name} lies in VC {region.bound}'s cells")
                if region.node is not None and not region.is_node:
                    slot = region
            masks[slot] = masks.get(slot, 0) | 1 << (pos - slot.offset)
        pods = [(i, slot, mask) for i, (slot, mask) in enumerate(masks.items())]
        chain = positions[0][0].chain
        return self._commit(request, Plan(chain, pods, binds, frozenset(), ()), tenant, ())

    def _positions(self, placement: Mapping[str, Iterable[int]]) -> list[tuple[Cell, int]] | str:
        """(node cell, position) of every GPU named, or why they cannot be held."""
        out: list[tuple[Cell, int]] = []
        seen: set[tuple[str, int]] = set()
        for name, gpus in placement.items():
            cells = self.topology.node_cells.get(name)
            if cells is None:
                return f"unknown node {name!r}"
            where = {g: (cell, p) for cell in cells for p, g in enumerate(cell.gpus)}
            for g in gpus:
                if g not in where:
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

    def _bind_for_gpu(self, tenant: Tenant, node: Cell, pos: int, sim: FreeLists,
                      need: dict[str, dict[int, int]], taken: dict[tuple[str, int], int]) -> Cell | None:
        """The lowest cell holding GPU ``pos`` of ``node`` that the VC's unbound promise may bind.
        ``sim`` (free lists), ``need`` (unbound promises per chain) and ``taken`` (this VC's binds
        per chain and level) already count the binds planned so far, and are updated."""
        chain = self.topology.chains[node.chain]
        demand = need.setdefault(chain.name, self._tenants.demand(chain.name))
        cell: Cell | None = leaf_cells(node, 1 << pos)[0]
        while cell is not None:
            key = (chain.name, cell.level)
            holder = sim.free_ancestor(cell)
            if (tenant.unbound(*key) - taken.get(key, 0) > 0 and holder is not None
                    and feasible_after_take(chain, sim.counts(chain), demand, cell, holder)):
                sim.take(cell)
                demand[cell.level] -= 1
                taken[key] = taken.get(key, 0) + 1
                return cell
            cell = cell.parent
        return None

    # -- queries --------------------------------------------------------------------------------

    def free_cells(self) -> dict[str, int]:
        """Cells of each type with no GPU in use, on healthy hardware (nested ones count too)."""
        out = {t: 0 for t in self._types_in_order()}
        for cell in self.topology.cells:
            if cell.node is None:
                idle = cell.used == 0 and cell.bad == 0
            elif cell.is_node:
                idle = cell.nfree == cell.size and not cell.bad
            else:
                idle = not cell.node.bad and cell.node.free_mask & cell.bits == cell.bits
            if idle:
                out[cell.type] += 1
        return out

    def doomed_cells(self) -> dict[str, dict[str, int]]:
        """Per VC and cell type, promised cells that healthy hardware cannot provide right now."""
        return doomed_cells(self.topology, self._free, self._tenants)

    def nodes(self) -> tuple[NodeUsage, ...]:
        """Every node (name, GPUs, free GPU indices), in config order."""
        out = []
        for name, cells in self.topology.node_cells.items():
            free = sorted(c.gpus[p] for c in cells for p in bit_positions(c.free_mask))
            out.append(NodeUsage(name, sum(c.size for c in cells), tuple(free)))
        return tuple(out)

    def jobs(self) -> dict[str, int]:
        """Placed jobs and the priority they now hold (-1 once lazily downgraded)."""
        return {name: job.priority for name, job in self._jobs.items()}

    def enclosing_types(self, placement: Mapping[str, Iterable[int]]) -> tuple[str, ...]:
        """Cell types of every cell that contains all the given GPUs, lowest first."""
        cell = self.topology.common_cell(placement)
        out = []
        while cell is not None:
            out.append(cell.type)
            cell = cell.parent
        return tuple(out)

    def free_list_cells(self) -> dict[str, dict[int, tuple[str, ...]]]:
        """The buddy free lists: chain -> level -> sorted cell addresses (for checks and tests)."""
        return {
            chain: {lv: tuple(sorted(c.address for c in cells)) for lv, cells in enumerate(levels) if cells}
            for chain, levels in self._free.levels.items()
        }

    def audit(self) -> list[str]:
        """Cross-check the internal state; an empty list means every invariant holds.

        Checked: per-cell usage counters, the buddy free lists against bound and pinned cells, VC
        safety (every unbound promise can still be cut from the free lists), and that every
        guaranteed GPU lies in a cell bound to its job's VC.
        """
        problems = []
        for cell in self.topology.cells:
            if cell.node is None and cell.used != sum(n.size - n.nfree for n in cell.nodes):
                problems.append(f"{cell}: used counter {cell.used} is stale")
        for chain in self.topology.chains.values():
            if not feasible(chain, self._free.counts(chain), self._tenants.demand(chain.name)):
                problems.append(f"chain {chain.name}: VC promises can no longer be met")
            for level_cells in self._free.levels[chain.name]:
                for cell in level_cells:
                    x: Cell | None = cell
                    while x is not None:
                        if x.bound is not None:
                            problems.append(f"{cell}: free but inside a cell bound to {x.bound}")
                        x = x.parent
        for node in self.topology.all_nodes():
            held = 0
            for job, mask in node.jobs.items():
                if held & mask or self._jobs.get(job.name) is not job:
                    problems.append(f"{node.name}: {job.name} holds GPUs held twice or is not placed")
                held |= mask
            if held != ((1 << node.size) - 1) & ~node.free_mask:
                problems.append(f"{node.name}: used GPUs do not match the jobs holding them")
        for job in self._jobs.values():
            for node, mask in job.pods:
                if node.jobs.get(job, 0) & mask != mask:
                    problems.append(f"{job.name}: its GPUs on {node.name} are not recorded as held")
                for p in bit_positions(mask):
                    if job.priority >= 0:
                        region = _bound_ancestor(node, p)
                        if region is None or region.bound != job.vc:
                            problems.append(f"{job.name}: GPU {node.gpus[p]} of {node.name} is outside {job.vc}'s cells")
        return problems

    # -- placing --------------------------------------------------------------------------------

    def _fast(self, request: Request, tenant: Tenant, buckets, n: int) -> Result | None:
        """One pod on the busiest node the VC already holds, free GPUs only: stage 1 of
        :meth:`_plan_guaranteed` for the common case, as a heap peek and a cached pick."""
        best = None
        for index, per_chain in buckets:
            slot = best_fit(per_chain, n)
            if slot is None:
                continue
            node = slot.node
            mask = pick(slot.sizes, (node.free_mask >> slot.offset) & ((1 << slot.size) - 1), n)
            if len(buckets) == 1:
                best = (None, slot, mask)
                break
            score = (lca_size(slot.sizes, mask), index)
            if best is None or score < best[0]:
                best = (score, slot, mask)
        if best is None:
            return None
        _, slot, mask = best
        job = Job(request.job, request.vc, request.priority, request.lazy_preempt)
        region = slot.region
        job.regions[region] = n
        tenant.refs[region] += n
        node = slot.node
        mask <<= slot.offset
        self._ledger.occupy(job, node, mask)
        job.pods.append((node, mask))
        job.placement = placement = (PodPlacement(node.name, gpu_indices(node.gpus, mask)),)
        self._jobs[job.name] = job
        return Result("placed", pods=placement)

    def _plan_guaranteed(
        self, request: Request, tenant: Tenant, pods, *, inside: bool = True, preempt: bool = True
    ) -> Plan | None:
        """Stages: inside the VC's cells, then binding new ones (free GPUs only), then evicting.

        ``inside=False`` skips the first stage when :meth:`_fast` has already found it empty.
        """
        pinned = tenant.pinned[request.pinned] if request.pinned else None
        chains = [pinned.chain] if pinned else self._tenant_chains(tenant, request.sku)
        plan = self._planner.guaranteed
        where = dict(pinned=pinned, allowed=request.nodes)
        found = inside and plan(tenant, chains, pods, q=None, inside=True, bind=False, **where)
        found = found or plan(tenant, chains, pods, q=None, inside=False, bind=True, **where)
        if found is not None or not preempt:
            return found
        for q in thresholds(self._jobs.values(), tenant.name, request.priority):
            found = plan(tenant, chains, pods, q=q, inside=True, bind=True, **where)
            if found is not None:
                return found
        return None

    def _guaranteed(
        self, request: Request, tenant: Tenant, pods, sizes: list[int], *, inside: bool = True, preempt: bool = True
    ) -> Result:
        plan = self._plan_guaranteed(request, tenant, pods, inside=inside, preempt=preempt)
        if plan is None:
            where = f"pinned cell {request.pinned}" if request.pinned else f"VC {tenant.name}'s cells"
            bad = " (bad nodes excluded)" if self._bad else ""
            return Result("wait", reason=f"no room for {_describe(sizes, request.sku)} in {where}{bad}")
        downgraded: tuple[str, ...] = ()
        lazy = sorted((j for j in plan.victims if j.lazy and j.priority >= 0), key=lambda j: j.name)
        if lazy:
            records = [downgrade(j, self._ledger, self._tenants) for j in lazy]
            again = self._plan_guaranteed(request, tenant, pods)
            if again is None:
                for record in reversed(records):
                    undo(record, self._ledger, self._tenants)
            else:
                plan = again
                downgraded = tuple(j.name for j in lazy if j not in again.victims)
        return self._commit(request, plan, tenant, downgraded)

    def _commit(self, request: Request, plan: Plan, tenant: Tenant | None, downgraded) -> Result:
        job = Job(request.job, request.vc, request.priority, request.lazy_preempt)
        for cell in plan.binds:
            self._tenants.bind(tenant, cell)
        if tenant is not None:
            for _, slot, mask in plan.pods:
                region = slot.region
                if not region.fixed:
                    k = mask.bit_count()
                    job.regions[region] = job.regions.get(region, 0) + k
                    tenant.refs[region] += k
        victims = sorted(plan.victims, key=lambda j: j.name)
        for victim in victims:
            self._release(victim)
        for _, slot, mask in sorted(plan.pods, key=lambda pod: pod[0]):
            node = slot.node
            mask <<= slot.offset
            self._ledger.occupy(job, node, mask)
            job.pods.append((node, mask))
        job.placement = job.record()
        self._jobs[job.name] = job
        return Result(
            "placed", pods=job.placement, preempted=tuple(v.name for v in victims), downgraded=downgraded
        )

    def _release(self, job: Job) -> None:
        for node, mask in job.pods:
            self._ledger.vacate(job, node, mask)
        if job.regions:
            tenant = self._tenants.by_name[job.vc]
            for region, k in job.regions.items():
                tenant.refs[region] -= k
                if tenant.refs[region] == 0:
                    self._tenants.unbind(tenant, region)
        del self._jobs[job.name]

    # -- validation and lookups -----------------------------------------------------------------

    def _invalid(self, request: Request) -> str:
        if request.job in self._jobs:
            return f"job {request.job} is already placed"
        if not request.pods or any(p.gpus < 1 or p.count < 1 for p in request.pods):
            return "a job needs at least one pod and every pod at least one GPU"
        if not -1 <= request.priority <= 1000:
            return f"priority {request.priority} is out of range -1..1000"
        tenant = self._tenants.by_name.get(request.vc)
        if tenant is None:
            return f"VC {request.vc} does not exist"
        if request.sku is not None and request.sku not in self.topology.leaf_chains:
            return f"the cluster has no GPU type {request.sku}"
        if request.nodes is not None:
            unknown = sorted(set(request.nodes) - set(self.topology.node_cells))
            if unknown:
                return f"unknown node {unknown[0]}"
        if request.pinned is not None:
            if request.priority < 0:
                return f"opportunistic jobs cannot use pinned cell {request.pinned}"
            cell = tenant.pinned.get(request.pinned)
            if cell is None:
                return f"VC {request.vc} does not have pinned cell {request.pinned}"
            if request.sku is not None and self.topology.chains[cell.chain].leaf_type != request.sku:
                return f"pinned cell {request.pinned} has no {request.sku} GPUs"
        elif request.priority >= 0 and not self._tenant_chains(tenant, request.sku):
            what = f"{request.sku} cells" if request.sku else "cells"
            return f"VC {request.vc} has no {what}"
        return ""

    def _sku_chains(self, sku: str | None) -> list[str]:
        if sku is None:
            return list(self.topology.chains)
        return self.topology.leaf_chains.get(sku, [])

    def _tenant_chains(self, tenant: Tenant, sku: str | None) -> list[str]:
        key = (tenant.name, sku)
        chains = self._chains_cache.get(key)
        if chains is None:
            own = set(tenant.chains())
            chains = self._chains_cache[key] = [c for c in self._sku_chains(sku) if c in own]
        return chains

    def _fast_buckets(self, tenant: Tenant, sku: str | None) -> list:
        """(chain order, slot buckets) of the chains a VC may use for ``sku``, cached."""
        key = (tenant.name, sku)
        out = self._buckets_cache.get(key)
        if out is None:
            out = self._buckets_cache[key] = [
                (self._chain_index[c], self._index.buckets((tenant.name, c), self._node_size(c)))
                for c in self._tenant_chains(tenant, sku)
            ]
        return out

    def _node_size(self, chain: str) -> int:
        info = self.topology.chains[chain]
        return info.leaves[info.node_level]

    def _node_cells(self, name: str) -> list[Cell]:
        cells = self.topology.node_cells.get(name)
        if cells is None:
            raise KeyError(f"unknown node {name!r}")
        return cells

    def _types_in_order(self) -> list[str]:
        out: dict[str, None] = {}
        for chain in self.topology.chains.values():
            for level in range(chain.top_level, 0, -1):
                out[chain.type_at[level]] = None
        return list(out)


def _bound_ancestor(node: Cell, pos: int) -> Cell | None:
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


def _describe(sizes: list[int], sku: str | None) -> str:
    gpus = "GPU" if sku is None else f"{sku} GPU"
    counts: dict[int, int] = {}
    for n in sizes:
        counts[n] = counts.get(n, 0) + 1
    parts = [f"{c} pod{'s' if c > 1 else ''} of {n} {gpus}{'s' if n > 1 else ''}" for n, c in counts.items()]
    return " + ".join(parts)
