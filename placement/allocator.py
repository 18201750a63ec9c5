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
jobs one priority level at a time. One guaranteed pod first tries the shortcuts of
:mod:`placement.fastpath` (stages 1 and 2 without general plans); an opportunistic pod asks
:class:`placement.idle.IdleNodes` instead of scanning the nodes. Tests check that each shortcut
chooses what the general planner chooses.

``reserve`` holds a given placement for a running job; with ``restart=True`` (and
:meth:`CellAllocator.restart`) it re-adds jobs after a restart on a changed config. Both map GPUs
back into VC cells with :mod:`placement.restore`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable, Mapping

from placement.binding import Tenant, Tenants
from placement.buddy import FreeLists, feasible
from placement.cells import Cell, Topology
from placement.config import ClusterConfig, load_config
from placement.fastpath import FastPath
from placement.health import doomed_cells, mark_bad, mark_healthy
from placement.idle import IdleNodes
from placement.jobs import Job, Ledger
from placement.packing import SlotIndex, bit_positions
from placement.planner import Candidate, Planner
from placement.preemption import downgrade, thresholds, undo
from placement.restore import Restorer, Unmapped, bound_ancestor
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
        self._tenants = Tenants(
            self.config, self.topology, self._free, self._index, self._idle.touched
        )
        self._ledger = Ledger(
            self._index, sum(n.size for n in self.topology.all_nodes()), self._idle.touched
        )
        self._planner = Planner(self.topology, self._tenants, self._free, self._idle)
        self._jobs: dict[str, Job] = {}
        self._bad: set[Cell] = set()
        self._round_up = round_up
        self._chains_cache: dict[tuple[str, str | None], list[str]] = {}
        self._fast = FastPath(
            self.topology,
            self._tenants,
            self._planner,
            self._index,
            self._ledger,
            self._jobs,
            self._tenant_chains,
        )
        self._restorer = Restorer(
            self.topology, self._tenants, self._free, self._ledger, self._jobs, self._commit
        )

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
            job.request.job: allocator.reserve(
                job.request, job.placement, restart=True, cell_types=job.cell_types
            )
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
            pod is not None
            and pod.count == 1
            and pod.gpus >= 1
            and 0 <= request.priority <= 1000
            and request.pinned is None
            and request.nodes is None
            and request.job not in self._jobs
        ):
            tenant = self._tenants.by_name.get(request.vc)
            buckets = self._fast.cached.get((request.vc, request.sku))
            if buckets is None and tenant is not None:
                buckets = self._fast_buckets(tenant, request.sku)
            if buckets:
                n = self._round_up(pod.gpus) if self._round_up else pod.gpus
                return (
                    self._fast.held(request, tenant, buckets, n)
                    or self._fast.new_cell(request, tenant, n)
                    or self._guaranteed(
                        request, tenant, [(0, n)], [n], tried_free=True, preempt=preempt
                    )
                )
        why = self._invalid(request)
        if why:
            return Result("error", reason=why)
        sizes = [
            self._round_up(p.gpus) if self._round_up else p.gpus
            for p in pods
            for _ in range(p.count)
        ]
        order = sorted(enumerate(sizes), key=lambda pod: (-pod[1], pod[0]))
        if request.priority < 0:
            chains = self._sku_chains(request.sku)
            candidate = self._planner.opportunistic(chains, order, request.nodes)
            if candidate is None:
                return Result(
                    "wait",
                    reason=f"no idle GPUs for {_describe(sizes, request.sku)} on healthy nodes",
                )
            return self._commit(request, candidate, None, ())
        return self._guaranteed(
            request, self._tenants.by_name[request.vc], order, sizes, preempt=preempt
        )

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
            return self._restorer.readd(request, placement, cell_types or {})
        why = self._invalid(request)
        if why:
            return Result("error", reason=why)
        positions = self._restorer.positions(placement)
        if isinstance(positions, str):
            return Result("error", reason=positions)
        if len(positions) != request.total_gpus:
            return Result(
                "error",
                reason=f"placement holds {len(positions)} GPUs, the request {request.total_gpus}",
            )
        tenant = self._tenants.by_name[request.vc] if request.priority >= 0 else None
        mapped = self._restorer.map(request, tenant, positions, {})
        if isinstance(mapped, Unmapped):
            return Result("error", reason=mapped.reason)
        return self._commit(request, mapped, tenant, ())

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
                    per_gpu[node.gpus[p]] = bound_ancestor(node, p).type
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
            chain: {
                lv: tuple(sorted(c.address for c in cells))
                for lv, cells in enumerate(levels)
                if cells
            }
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
                    problems.append(
                        f"{node.name}: {job.name} holds GPUs held twice or is not placed"
                    )
                held |= mask
            if held != ((1 << node.size) - 1) & ~node.free_mask:
                problems.append(f"{node.name}: used GPUs do not match the jobs holding them")
        for job in self._jobs.values():
            for node, mask in job.pods:
                if node.jobs.get(job, 0) & mask != mask:
                    problems.append(f"{job.name}: its GPUs on {node.name} are not recorded as held")
                for p in bit_positions(mask):
                    if job.priority >= 0:
                        region = bound_ancestor(node, p)
                        if region is None or region.bound != job.vc:
                            problems.append(
                                f"{job.name}: GPU {node.gpus[p]} of {node.name} is outside "
                                f"{job.vc}'s cells"
                            )
        return problems

    # -- placing --------------------------------------------------------------------------------

    def _guaranteed_candidate(
        self,
        request: Request,
        tenant: Tenant,
        pods,
        *,
        tried_free: bool = False,
        preempt: bool = True,
    ) -> Candidate | None:
        """Stages: inside the VC's cells, then binding new ones (free GPUs only), then evicting.

        ``tried_free=True`` skips the two free-GPU stages when :meth:`FastPath.held` and
        :meth:`FastPath.new_cell` have already found them empty.
        """
        pinned = tenant.pinned[request.pinned] if request.pinned else None
        chains = [pinned.chain] if pinned else self._tenant_chains(tenant, request.sku)
        search = self._planner.guaranteed
        where = dict(pinned=pinned, allowed=request.nodes)
        found = None
        if not tried_free:
            found = search(tenant, chains, pods, q=None, inside=True, bind=False, **where)
            found = found or search(tenant, chains, pods, q=None, inside=False, bind=True, **where)
        if found is not None or not preempt:
            return found
        for q in thresholds(self._jobs.values(), tenant.name, request.priority):
            found = search(tenant, chains, pods, q=q, inside=True, bind=True, **where)
            if found is not None:
                return found
        return None

    def _guaranteed(
        self,
        request: Request,
        tenant: Tenant,
        pods,
        sizes: list[int],
        *,
        tried_free: bool = False,
        preempt: bool = True,
    ) -> Result:
        candidate = self._guaranteed_candidate(
            request, tenant, pods, tried_free=tried_free, preempt=preempt
        )
        if candidate is None:
            where = (
                f"pinned cell {request.pinned}" if request.pinned else f"VC {tenant.name}'s cells"
            )
            bad = " (bad nodes excluded)" if self._bad else ""
            return Result(
                "wait", reason=f"no room for {_describe(sizes, request.sku)} in {where}{bad}"
            )
        downgraded: tuple[str, ...] = ()
        lazy = sorted(
            (j for j in candidate.victims if j.lazy and j.priority >= 0), key=lambda j: j.name
        )
        if lazy:
            records = [downgrade(j, self._ledger, self._tenants) for j in lazy]
            again = self._guaranteed_candidate(request, tenant, pods)
            if again is None:
                for record in reversed(records):
                    undo(record, self._ledger, self._tenants)
            else:
                candidate = again
                downgraded = tuple(j.name for j in lazy if j not in again.victims)
        return self._commit(request, candidate, tenant, downgraded)

    def _commit(
        self, request: Request, candidate: Candidate, tenant: Tenant | None, downgraded
    ) -> Result:
        job = Job(request.job, request.vc, request.priority, request.lazy_preempt)
        for cell in candidate.binds:
            self._tenants.bind(tenant, cell)
        if tenant is not None:
            for _, slot, mask in candidate.pods:
                region = slot.region
                if not region.fixed:
                    k = mask.bit_count()
                    job.regions[region] = job.regions.get(region, 0) + k
                    tenant.refs[region] += k
        victims = sorted(candidate.victims, key=lambda j: j.name)
        for victim in victims:
            self._release(victim)
        for _, slot, mask in sorted(candidate.pods, key=lambda pod: pod[0]):
            node = slot.node
            mask <<= slot.offset
            self._ledger.occupy(job, node, mask)
            job.pods.append((node, mask))
        job.placement = job.record()
        self._jobs[job.name] = job
        return Result(
            "placed",
            pods=job.placement,
            preempted=tuple(v.name for v in victims),
            downgraded=downgraded,
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
            if (
                request.sku is not None
                and self.topology.chains[cell.chain].leaf_type != request.sku
            ):
                return f"pinned cell {request.pinned} has no {request.sku} GPUs"
        elif request.priority >= 0 and not self._tenant_chains(tenant, request.sku):
            what = f"{request.sku} cells" if request.sku else "cells"
            return f"VC {request.vc} has no {what}"
        return ""

    def _fast_buckets(self, tenant: Tenant, sku: str | None) -> list:
        """The one-pod shortcuts' slot buckets for ``tenant`` and ``sku`` (empty: no shortcut)."""
        return self._fast.buckets(tenant, sku)

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


def _describe(sizes: list[int], sku: str | None) -> str:
    gpus = "GPU" if sku is None else f"{sku} GPU"
    counts: dict[int, int] = {}
    for n in sizes:
        counts[n] = counts.get(n, 0) + 1
    parts = [
        f"{c} pod{'s' if c > 1 else ''} of {n} {gpus}{'s' if n > 1 else ''}"
        for n, c in counts.items()
    ]
    return " + ".join(parts)
