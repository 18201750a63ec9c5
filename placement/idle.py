"""Where an opportunistic pod goes, without scanning the cluster.

An opportunistic pod of ``n`` GPUs takes, among healthy nodes with ``n`` free GPUs, the one that
no VC holds (not in a bound or pinned cell) before one that a VC holds, then the one with the
fewest GPUs of guaranteed jobs, then the busiest (fewest free GPUs), then the lowest id: idle
GPUs are used where they are least likely to be wanted back soon, and packed.

:class:`IdleNodes` keeps every node of each chain in a bucket per ``(held, guaranteed, free)``,
each bucket a heap by id with lazy deletion, so the choice is the first non-empty bucket in that
order. Re-bucketing is deferred: whatever changes a node's GPUs, binding, or health adds it to
``touched`` (one set insertion on the allocation path), and :meth:`IdleNodes.best` re-buckets the
touched nodes before it answers. An opportunistic request therefore costs O(nodes changed since
the last one x log n) plus a look at each bucket, not a pass over every node.
"""

from __future__ import annotations

from operator import attrgetter

from placement.cells import Cell, Chain
from placement.lazyheap import first_current, push

_version = attrgetter("iver")


class _ChainNodes:
    """One chain's nodes: a heap of (id, version, node) and a live count per bucket, and for
    each pod size the bucket numbers in preference order."""

    __slots__ = ("size", "heaps", "live", "order")

    def __init__(self, size: int):
        self.size = size
        width = size + 1
        self.heaps: list[list] = [[] for _ in range(2 * width * width)]
        self.live = [0] * (2 * width * width)
        self.order = [
            [
                (held * width + guaranteed) * width + free
                for held in (0, 1)
                for guaranteed in range(size + 1)
                for free in range(n, size - guaranteed + 1)
            ]
            for n in range(size + 1)
        ]

    def bucket(self, node: Cell) -> int:
        width = self.size + 1
        held = node.region is not None or bool(node.slots)
        guaranteed = node.size - node.nfree - node.opp_mask.bit_count()
        return (held * width + guaranteed) * width + node.nfree


class IdleNodes:
    """Healthy nodes per chain, bucketed for :meth:`best`; see the module docstring."""

    __slots__ = ("touched", "_chains")

    def __init__(self, chains: dict[str, Chain]):
        self.touched: set[Cell] = set()
        self._chains: dict[str, _ChainNodes] = {}
        for name, chain in chains.items():
            self._chains[name] = _ChainNodes(chain.leaves[chain.node_level])
            for top in chain.tops:
                self.touched.update(top.nodes)

    def best(self, chain: str, n: int) -> Cell | None:
        """The healthy node of ``chain`` an opportunistic pod of ``n`` GPUs should use, if any."""
        if self.touched:
            self._rebucket()
        nodes = self._chains[chain]
        if n > nodes.size:
            return None
        return first_current(nodes.heaps, nodes.live, nodes.order[n], _version)

    def _rebucket(self) -> None:
        for node in self.touched:
            nodes = self._chains[node.chain]
            b = -1 if node.bad else nodes.bucket(node)
            if b == node.ikey:
                continue
            if node.ikey >= 0:
                nodes.live[node.ikey] -= 1
            node.ikey = b
            node.iver += 1
            if b >= 0:
                live = nodes.live[b] = nodes.live[b] + 1
                push(nodes.heaps[b], live, node, node.iver, _version)
        self.touched.clear()
