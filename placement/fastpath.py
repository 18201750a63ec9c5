"""The shortcuts for the commonest request: one guaranteed pod, no pinned cell, no node list.

Most requests in a trace are single pods of a VC that already holds a node with room, so
``CellAllocator.allocate`` tries two cheap answers before the general
:class:`placement.planner.Planner`:

* :meth:`FastPath.held`: the busiest node (or slot) the VC already holds that has ``n`` free GPUs,
  as a heap peek in the VC's :class:`placement.packing.SlotIndex` buckets and a cached bitmask pick;
* :meth:`FastPath.new_cell`: the first cell the buddy allocator would bind for the VC
  (:meth:`Planner.new_cell_for_pod`), without building general plans.

Each gives exactly what stages 1 and 2 of the general planner give for one pod (the same cell, node
and GPUs, the same score across chains; tests/placement/test_placement_fastpaths.py checks it), and
commits it directly. It is kept apart so that the allocator reads as the general algorithm.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from placement.binding import Tenant, Tenants
from placement.cells import Cell, Topology
from placement.jobs import Job, Ledger, placed_on
from placement.packing import SlotIndex, best_fit, lca_size, pick
from placement.planner import Planner
from placement.types import Request, Result


@dataclass(frozen=True, slots=True)
class FastPath:
    """One-pod placement on free GPUs, committed straight into the allocator's state.

    ``chains_of(tenant, sku)`` gives the chains a VC may use for a GPU type, in config order;
    ``cached`` maps (VC, GPU type) to :meth:`buckets`' answer.
    """

    topology: Topology
    tenants: Tenants
    planner: Planner
    index: SlotIndex
    ledger: Ledger
    jobs: dict[str, Job]
    chains_of: Callable[[Tenant, str | None], list[str]]
    cached: dict[tuple[str, str | None], list] = field(default_factory=dict, init=False)

    def buckets(self, tenant: Tenant, sku: str | None) -> list:
        """(chain order, slot buckets) of the chains a VC may use for ``sku``, cached."""
        key = (tenant.name, sku)
        out = self.cached.get(key)
        if out is None:
            order = self.planner.chain_index
            out = self.cached[key] = [
                (order[c], self.index.buckets((tenant.name, c), self._node_size(c)))
                for c in self.chains_of(tenant, sku)
            ]
        return out

    def held(self, request: Request, tenant: Tenant, buckets, n: int) -> Result | None:
        """One pod on the busiest node the VC already holds, free GPUs only: stage 1 of
        ``CellAllocator._guaranteed_candidate`` for the common case, as a heap peek and a cached
        pick."""
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

    def new_cell(self, request: Request, tenant: Tenant, n: int) -> Result | None:
        """One pod in a cell newly bound for the VC, free GPUs only: stage 2 of
        ``CellAllocator._guaranteed_candidate`` for one pod (same cell, node and GPUs, same score
        across
        chains), without building general plans."""
        best = None
        chains = self.chains_of(tenant, request.sku)
        for name in chains:
            found = self.planner.new_cell_for_pod(tenant, self.topology.chains[name], n)
            if found is None:
                continue
            if len(chains) == 1:
                best = (None, found)
                break
            _, holder, slot, mask = found
            score = (
                lca_size(slot.node.sizes, mask << slot.offset),
                holder.size,
                self.planner.chain_index[name],
            )
            if best is None or score < best[0]:
                best = (score, found)
        if best is None:
            return None
        cell, _, slot, mask = best[1]
        return self._place_one(request, tenant, slot, mask, n, bind=cell)

    def _place_one(
        self,
        request: Request,
        tenant: Tenant,
        slot: Cell,
        mask: int,
        n: int,
        bind: Cell | None = None,
    ) -> Result:
        """Commit a one-pod job on free GPUs ``mask`` (slot-relative) of a slot of the VC. A new
        cell ``bind`` is bound for the VC right after the GPUs are taken, so that its slots enter
        the VC's index once, with their final free counts."""
        job = Job(request.job, request.vc, request.priority, request.lazy_preempt)
        node = slot.node
        mask <<= slot.offset
        self.ledger.occupy(job, node, mask)
        if bind is not None:
            self.tenants.bind(tenant, bind)
        region = slot.region
        job.regions[region] = n
        tenant.refs[region] += n
        job.pods.append((node, mask))
        result = placed_on(node.name, node.gpus, mask)
        job.placement = result.pods
        self.jobs[job.name] = job
        return result

    def _node_size(self, chain: str) -> int:
        info = self.topology.chains[chain]
        return info.leaves[info.node_level]
