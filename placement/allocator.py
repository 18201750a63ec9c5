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
is a heap peek and a cached bitmask pick; one pod that needs a newly bound cell takes the first
cell the buddy allocator offers without building general plans (``_fast_bind``); an
opportunistic pod asks :class:`placement.idle.IdleNodes` instead of scanning the nodes. Tests check
that each shortcut chooses what the general planner chooses.

``reserve`` holds a given placement for a running job; with ``restart=True`` (and
:meth:`CellAllocator.restart`) it re-adds jobs after a restart on a changed config.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterable, Mapping

from placement.binding import Tenant, Tenants
from placement.buddy import FreeLists, feasible, feasible_after_take
from placement.cells import Cell, Topology, leaf_cells
from placement.config import ClusterConfig, load_config
from placement.health import doomed_cells, mark_bad, mark_healthy
from placement.idle import IdleNodes
from placement.jobs import Job, Ledger, placed_on
from placement.packing import SlotIndex, best_fit, bit_positions, lca_size, pick
from placement.planner import Plan, Planner
from placement.preemption import downgrade, thresholds, undo
from placement.types import NodeUsage, Request, Result, RunningJob


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
        self._idle = IdleNodes(self.topology.chains)
        self._tenants = Tenants(self.config, self.topology, self._free, self._index, self._idle.touched)
        self._ledger = Ledger(self._index, sum(n.size for n in self.topology.all_nodes()), self._idle.touched)
        self._planner = Planner(self.topology, self._tenants, self._free, self._idle)
        self._jobs: dict[str, Job] = {}
        self._bad: set[Cell] = set()
        self._round_up = round_up
        self._chain_index = {name: i for i, name in enumerate(self.topology.chains)}
        self._chains_cache: dict[tuple[str, str | None], list[str]] = {}
        self._buckets_cache: dict[tuple[str, str | None], list] = {}

    @classmethod
    def restart(
        cls,
        config: ClusterConfig | str | Path | Mapping,
        running: Iterable[RunningJob],
        *,
        round_up: Callable[[int], int] | None = None,
    ) -> tuple["CellAllocator", dict[str, Result]]:
        """A new allocator on ``config`` (possibly changed) holding the jobs that kept running,
        re-added in the order given with ``reserve(restart=True)`` (HiveD's work-preserving
        restart). Returns it and each job's result: jobs that could not keep their VC cells,
        and jobs whose cells a later job took back, are lazily preempted (``jobs()`` shows -1;
        each is in the ``downgraded`` of the result that did it)."""
        allocator = cls(config, round_up=round_up)
        results = {
            job.request.job: allocator.reserve(job.request, job.placement, restart=True, cell_types=job.cell_types)
            for job in running
        }
        return allocator, results

    # -- the Allocator protocol -----------------------------------------------------------------

    def allocate(self, request: Request, *, preempt: bool = True) -> Result:
        """Place the whole gang or nothing. ``preempt=False`` never evicts or downgrades anyone
        (what-if placement, e.g. :func:`placement.batch.consolidate`)."""
        pods = request.pods
        pod = pods[0] if len(pods) == 1 else None
        if (
            pod is not None and pod.count == 1 and pod.gpus >= 1 and 0 <= request.priority <= 1000
            and request.pinned is None and request.nodes is None and request.job not in self._jobs
        ):
            tenant = self._tenants.by_name.get(request.vc)
            buckets = self._buckets_cache.get((request.vc, request.sku))
            if buckets is None and tenant is not None:
                buckets = self._fast_buckets(tenant, request.sku)
            if buckets:
                n = self._round_up(pod.gpus) if self._round_up else pod.gpus
                return (
                    self._fast(request, tenant, buckets, n)
                    or self._fast_bind(request, tenant, n)
                    or self._guaranteed(request, tenant, [(0, n)], [n], tried_free=True, preempt=preempt)
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
                self._idle.touched.add(cell)

    def set_healthy(self, node: str) -> None:
        for cell in self._node_cells(node):
            if mark_healthy(cell, self._index):
                self._bad.discard(cell)
                self._idle.touched.add(cell)

    def free_gpus(self) -> int:
        """Free GPUs on healthy nodes."""
        return self._ledger.free_total - sum(n.nfree for n in self._bad)

    def placement_of(self, job: str) -> Mapping[str, tuple[int, ...]]:
        record = self._jobs.get(job)
        return {} if record is None else Result("placed", pods=record.placement).by_node()

    # -- restoring ------------------------------------------------------------------------------

    def reserve(
        self,
        request: Request,
        placement: Mapping[str, Iterable[int]],
        *,
        restart: bool = False,
        cell_types: Mapping[str, Mapping[int, str]] | None = None,
    ) -> Result:
        """Hold exactly ``placement`` (node -> GPU indices) for ``request``: a job already running
        there, e.g. restored from a cluster manager's state. All or nothing, nobody is evicted.

        A guaranteed job's GPUs must lie in cells of its VC. A GPU in no bound cell gets the lowest
        cell of the VC's unbound promise that holds it, bound only if every VC's promise can still
        be met afterwards (the same VC-safety test ``allocate`` uses); otherwise the reservation is
        an error, since a job outside its VC's cells would break the invariants ``audit`` checks.

        ``restart=True`` re-adds a job that kept running while the allocator restarted, possibly
        with a changed config (HiveD's work-preserving reconfiguration, ../notes/hived.md §8):

        * GPUs (or nodes) the config no longer has are ignored; the job holds the rest;
        * ``cell_types`` (node -> GPU index -> type of the VC cell the GPU was in, as
          :meth:`cell_types_of` reported it; HiveD keeps it in the bind annotation) pins each
          GPU's new cell to that type; without it any cell of the VC's promise will do;
        * when a GPU's cell of that type is free but the VC has bound all its cells of that type
          elsewhere, the lowest-priority one of them whose priority (its highest guaranteed job)
          is below the job's is taken back: its jobs are lazily preempted (HiveD picks the same
          virtual cell when it maps a physical cell back);
        * a job that still cannot be mapped into its VC (VC or pinned cell gone, VC shrank, cell
          type gone from the GPU's chain, GPUs in another VC's cells, safety would break) is
          itself lazily preempted: it holds its GPUs as opportunistic (priority -1) and is
          listed in ``downgraded``, with ``reason`` saying why; lazy preemptions of others are
          undone if they did not let the job map.

        Jobs lazily preempted by this call (the job itself or others) are in ``downgraded``.
        """
        if restart:
            return self._readd(request, placement, cell_types or {})
        why = self._invalid(request)
        if why:
            return Result("error", reason=why)
        positions = self._positions(placement)
        if isinstance(positions, str):
            return Result("error", reason=positions)
        if len(positions) != request.total_gpus:
            return Result("error", reason=f"placement holds {len(positions)} GPUs, the request {request.total_gpus}")
        tenant = self._tenants.by_name[request.vc] if request.priority >= 0 else None
        mapped = self._map(request, tenant, positions, {})
        if isinstance(mapped, _Unmapped):
            return Result("error", reason=mapped.reason)
        return self._commit(request, mapped, tenant, ())

    def _readd(self, request: Request, placement: Mapping[str, Iterable[int]],
               cell_types: Mapping[str, Mapping[int, str]]) -> Result:
        """``reserve(restart=True)``: see there."""
        if request.job in self._jobs:
            return Result("error", reason=f"job {request.job} is already placed")
        if not -1 <= request.priority <= 1000:
            return Result("error", reason=f"priority {request.priority} is out of range -1..1000")
        positions = self._positions(placement, ignore_missing=True)
        if isinstance(positions, str):
            return Result("error", reason=positions)
        if not positions:
            return Result("error", reason="none of its GPUs is in the config any more")
        if request.priority < 0:
            return self._commit(request, self._map(request, None, positions, {}), None, ())
        tenant = self._tenants.by_name.get(request.vc)
        why = _unmappable(request, tenant, positions)
        if why:
            return self._hold_lazily_preempted(request, positions, why)
        types = {(node, gpu): t for node, per_gpu in cell_types.items() for gpu, t in per_gpu.items()}
        records = []
        while True:
            mapped = self._map(request, tenant, positions, types)
            if not isinstance(mapped, _Unmapped):
                return self._commit(request, mapped, tenant, tuple(r.job.name for r in records))
            if mapped.blocker is None:
                break
            holders = sorted((j for j in self._jobs.values() if mapped.blocker in j.regions), key=lambda j: j.name)
            records.extend(downgrade(j, self._ledger, self._tenants) for j in holders)
        for record in reversed(records):
            undo(record, self._ledger, self._tenants)
        return self._hold_lazily_preempted(request, positions, mapped.reason)

    def _hold_lazily_preempted(self, request: Request, positions: list[tuple[Cell, int]], why: str) -> Result:
        held = replace(request, priority=-1)
        placed = self._commit(held, self._map(held, None, positions, {}), None, (request.job,))
        return replace(placed, reason=f"lazily preempted: {why}")

    def _map(self, request: Request, tenant: Tenant | None, positions: list[tuple[Cell, int]],
             types: Mapping[tuple[str, int], str]) -> "Plan | _Unmapped":
        """The plan that holds ``positions`` for ``request``, binding the VC cells the GPUs need
        (only cells of the type ``types`` names for a GPU, when it names one), or why it cannot."""
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
                    want = types.get((node.name, node.gpus[pos]))
                    level = None
                    if want is not None:
                        level = self.topology.chains[node.chain].level_of.get(want)
                        if level is None:
                            return _Unmapped(f"cell type {want} of GPU {node.gpus[pos]} of node {node.name} "
                                             f"is not in chain {node.chain}")
                    region = self._bind_for_gpu(tenant, node, pos, sim, need, taken, level)
                    if region is None:
                        blocker = None if level is None else self._taken_back(request, tenant, node, pos, level, sim, taken)
                        return _Unmapped(f"GPU {node.gpus[pos]} of node {node.name} is outside VC {tenant.name}'s "
                                         f"cells and none of its promise can be bound there", blocker)
                    binds.append(region)
                elif region.bound not in (None, tenant.name):  # None: bound by this plan
                    return _Unmapped(f"GPU {node.gpus[pos]} of node {node.name} lies in VC {region.bound}'s cells")
                if region.node is not None and not region.is_node:
                    slot = region
            masks[slot] = masks.get(slot, 0) | 1 << (pos - slot.offset)
        pods = [(i, slot, mask) for i, (slot, mask) in enumerate(masks.items())]
        return Plan(positions[0][0].chain, pods, binds, frozenset(), ())

    def _taken_back(self, request: Request, tenant: Tenant, node: Cell, pos: int, level: int,
                    sim: FreeLists, taken: dict[tuple[str, int], int]) -> Cell | None:
        """The VC's bound cell to take back so that GPU ``pos`` of ``node`` can have its level-
        ``level`` cell: only when that cell is free and the VC has no unbound promise left at
        the level; the lowest-priority bound cell of that level whose priority is below the
        request's (first bound among equals), as HiveD maps a physical cell back."""
        chain = node.chain
        cell = leaf_cells(node, 1 << pos)[0]
        while cell.level < level:
            cell = cell.parent
        if sim.free_ancestor(cell) is None or tenant.unbound(chain, level) - taken.get((chain, level), 0) > 0:
            return None
        best, lowest = None, request.priority
        for bound in tenant.bound.get((chain, level), ()):
            priority = max((j.priority for j in self._jobs.values() if bound in j.regions), default=-1)
            if priority < lowest:
                best, lowest = bound, priority
        return best

    def _positions(self, placement: Mapping[str, Iterable[int]], *, ignore_missing: bool = False
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

    def _bind_for_gpu(self, tenant: Tenant, node: Cell, pos: int, sim: FreeLists,
                      need: dict[str, dict[int, int]], taken: dict[tuple[str, int], int],
                      level: int | None = None) -> Cell | None:
        """The lowest cell holding GPU ``pos`` of ``node`` (the one at ``level``, if given) that
        the VC's unbound promise may bind. ``sim`` (free lists), ``need`` (unbound promises per
        chain) and ``taken`` (this VC's binds per chain and level) already count the binds
        planned so far, and are updated."""
        chain = self.topology.chains[node.chain]
        demand = need.setdefault(chain.name, self._tenants.demand(chain.name))
        cell: Cell | None = leaf_cells(node, 1 << pos)[0]
        while cell is not None:
            if level is not None and cell.level != level:
                cell = cell.parent if cell.level < level else None
                continue
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

    def cell_types_of(self, job: str) -> dict[str, dict[int, str]]:
        """Node -> GPU index -> type of the VC cell (bound or pinned) each GPU of a guaranteed
        job lies in; empty for opportunistic or unknown jobs. What a restart needs
        (:class:`RunningJob`), as HiveD records it in the bind annotation."""
        record = self._jobs.get(job)
        out: dict[str, dict[int, str]] = {}
        if record is not None and record.priority >= 0:
            for node, mask in record.pods:
                per_gpu = out.setdefault(node.name, {})
                for p in bit_positions(mask):
                    per_gpu[node.gpus[p]] = _bound_ancestor(node, p).type
        return out

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
            if cell.node is None and cell.idle != sum(n.nfree == n.size for n in cell.nodes):
                problems.append(f"{cell}: idle-node counter {cell.idle} is stale")
        for chain in self.topology.chains.values():
            demand = self._tenants.recount_demand(chain.name)
            if demand != self._tenants.demand(chain.name):
                problems.append(f"chain {chain.name}: unbound promise count is stale")
            if not feasible(chain, self._free.counts(chain), demand):
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
        return self._place_one(request, tenant, best[1], best[2], n)

    def _fast_bind(self, request: Request, tenant: Tenant, n: int) -> Result | None:
        """One pod in a cell newly bound for the VC, free GPUs only: stage 2 of
        :meth:`_plan_guaranteed` for one pod (same cell, node and GPUs, same score across chains),
        without building general plans."""
        best = None
        chains = self._tenant_chains(tenant, request.sku)
        for name in chains:
            found = self._planner.new_cell_for_pod(tenant, self.topology.chains[name], n)
            if found is None:
                continue
            if len(chains) == 1:
                best = (None, found)
                break
            _, holder, slot, mask = found
            score = (lca_size(slot.node.sizes, mask << slot.offset), holder.size, self._chain_index[name])
            if best is None or score < best[0]:
                best = (score, found)
        if best is None:
            return None
        cell, _, slot, mask = best[1]
        return self._place_one(request, tenant, slot, mask, n, bind=cell)

    def _place_one(
        self, request: Request, tenant: Tenant, slot: Cell, mask: int, n: int, bind: Cell | None = None
    ) -> Result:
        """Commit a one-pod job on free GPUs ``mask`` (slot-relative) of a slot of the VC. A new
        cell ``bind`` is bound for the VC right after the GPUs are taken, so that its slots enter
        the VC's index once, with their final free counts."""
        job = Job(request.job, request.vc, request.priority, request.lazy_preempt)
        node = slot.node
        mask <<= slot.offset
        self._ledger.occupy(job, node, mask)
        if bind is not None:
            self._tenants.bind(tenant, bind)
        region = slot.region
        job.regions[region] = n
        tenant.refs[region] += n
        job.pods.append((node, mask))
        result = placed_on(node.name, node.gpus, mask)
        job.placement = result.pods
        self._jobs[job.name] = job
        return result

    def _plan_guaranteed(
        self, request: Request, tenant: Tenant, pods, *, tried_free: bool = False, preempt: bool = True
    ) -> Plan | None:
        """Stages: inside the VC's cells, then binding new ones (free GPUs only), then evicting.

        ``tried_free=True`` skips the two free-GPU stages when :meth:`_fast` and
        :meth:`_fast_bind` have already found them empty.
        """
        pinned = tenant.pinned[request.pinned] if request.pinned else None
        chains = [pinned.chain] if pinned else self._tenant_chains(tenant, request.sku)
        plan = self._planner.guaranteed
        where = dict(pinned=pinned, allowed=request.nodes)
        found = None
        if not tried_free:
            found = plan(tenant, chains, pods, q=None, inside=True, bind=False, **where)
            found = found or plan(tenant, chains, pods, q=None, inside=False, bind=True, **where)
        if found is not None or not preempt:
            return found
        for q in thresholds(self._jobs.values(), tenant.name, request.priority):
            found = plan(tenant, chains, pods, q=q, inside=True, bind=True, **where)
            if found is not None:
                return found
        return None

    def _guaranteed(
        self, request: Request, tenant: Tenant, pods, sizes: list[int], *, tried_free: bool = False,
        preempt: bool = True,
    ) -> Result:
        plan = self._plan_guaranteed(request, tenant, pods, tried_free=tried_free, preempt=preempt)
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
            refs = tenant.refs
            for region, k in job.regions.items():
                left = refs[region] = refs[region] - k
                if not left:
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


@dataclass(frozen=True, slots=True)
class _Unmapped:
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
        if any(_bound_ancestor(node, pos) is not cell for node, pos in positions):
            return f"its GPUs are not all in pinned cell {request.pinned}"
    return ""


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
