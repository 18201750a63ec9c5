"""Topology choice: which GPUs inside a node, which node, which cell for a gang.

* Inside a node (or any cell below it) a pod takes the GPUs whose lowest common cell is lowest:
  same switch before same socket before same node. Among equally low cells it takes the one with
  the fewest free GPUs (best fit, like a buddy allocator), so whole switches and sockets stay free
  for larger pods. The choice depends only on the cell shape and its free-GPU bitmask, so it is
  computed once per (shape, mask, n) and cached.
* Among nodes, a pod goes to the busiest node that fits (fewest free GPUs, then tree order).
  :class:`SlotIndex` keeps every tenant's nodes bucketed by free GPUs so that this is a heap peek,
  not a scan of the cluster.
* A gang goes into the smallest cell that holds all of it (one node, then one rack ...), and
  inside that cell each pod, largest first, onto the busiest node that fits.
"""

from __future__ import annotations

from functools import lru_cache
from operator import attrgetter
from typing import Callable, Iterable, Sequence

from placement.cells import Cell
from placement.lazyheap import first_current, push

_version = attrgetter("bver")


def _count(mask: int, lo: int, size: int) -> int:
    return ((mask >> lo) & ((1 << size) - 1)).bit_count()


@lru_cache(maxsize=1 << 17)
def pick(sizes: tuple[int, ...], mask: int, n: int) -> int:
    """``n`` of the positions set in ``mask`` with the lowest common cell; 0 if fewer are set.

    ``sizes`` are the leaf counts of the cell's levels from one GPU upwards, e.g. ``(1, 2, 4, 8)``
    for a node of 2 sockets x 2 switches x 2 GPUs; positions are the node's leaves in tree order.
    """
    if n <= 0 or mask.bit_count() < n:
        return 0
    return _take(sizes, mask, len(sizes) - 1, 0, n)


def _take(sizes: tuple[int, ...], mask: int, li: int, lo: int, n: int) -> int:
    size = sizes[li]
    group = mask & (((1 << size) - 1) << lo)
    if group.bit_count() == n:
        return group
    for lj in range(li):
        sz = sizes[lj]
        if sz < n:
            continue
        best, best_key = -1, None
        for g in range(lo, lo + size, sz):
            c = _count(mask, g, sz)
            if c >= n:
                key = (
                    c,
                    *(_count(mask, g // sizes[k] * sizes[k], sizes[k]) for k in range(lj + 1, li)),
                    g,
                )
                if best_key is None or key < best_key:
                    best, best_key = g, key
        if best_key is not None:
            return _take(sizes, mask, lj, best, n)
    csz = sizes[li - 1]
    children = [(g, _count(mask, g, csz)) for g in range(lo, lo + size, csz)]
    out, remaining = 0, n
    while remaining:
        fits = [(c, g) for g, c in children if c >= remaining]
        if fits:
            _, g = min(fits)
            return out | _take(sizes, mask, li - 1, g, remaining)
        g, c = max(children, key=lambda gc: (gc[1], -gc[0]))
        out |= mask & (((1 << csz) - 1) << g)
        remaining -= c
        children.remove((g, c))
    return out


def lca_size(sizes: tuple[int, ...], mask: int) -> int:
    """Leaf count of the smallest cell (of this shape) holding every position in ``mask``."""
    lo = (mask & -mask).bit_length() - 1
    hi = mask.bit_length() - 1
    for sz in sizes:
        if lo // sz == hi // sz:
            return sz
    return sizes[-1]


@lru_cache(maxsize=1 << 16)
def bit_positions(mask: int) -> tuple[int, ...]:
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return tuple(out)


class _Buckets:
    """One tenant's slots in one chain: a heap of (slot id, version, slot) per free-GPU count."""

    __slots__ = ("heaps", "live")

    def __init__(self, size: int):
        self.heaps: list[list] = [[] for _ in range(size + 1)]
        self.live = [0] * (size + 1)


class SlotIndex:
    """Each tenant's (VC, chain) healthy slots bucketed by free GPUs; best fit in O(log n).

    A slot is a node of a tenant's cell (or the cell itself when it is smaller than a node).
    Heaps use lazy deletion: a slot that moves gets a new version, and stale entries are dropped
    when they surface or when a heap holds more stale entries than live ones.
    """

    __slots__ = ("_buckets",)

    def __init__(self) -> None:
        self._buckets: dict[tuple[str, str], _Buckets] = {}

    def buckets(self, key: tuple[str, str], size: int) -> _Buckets:
        """The buckets of one tenant and chain, for slots of up to ``size`` GPUs."""
        buckets = self._buckets.get(key)
        if buckets is None:
            buckets = self._buckets[key] = _Buckets(size)
        return buckets

    def put(self, key: tuple[str, str], slot: Cell) -> None:
        buckets = self.buckets(key, slot.node.size)
        slot.bucket = buckets
        self._push(buckets, slot)

    @staticmethod
    def _push(buckets: _Buckets, slot: Cell) -> None:
        free = slot.nfree if slot.is_node else slot.free_count()
        slot.bkey = free
        slot.bver += 1
        live = buckets.live[free] = buckets.live[free] + 1
        push(buckets.heaps[free], live, slot, slot.bver, _version)

    def drop(self, slot: Cell) -> None:
        if slot.bkey >= 0:
            slot.bucket.live[slot.bkey] -= 1
            slot.bkey = -1
            slot.bver += 1

    def refresh(self, slot: Cell) -> None:
        """Re-bucket an indexed slot whose free GPU count changed (``_push`` inlined: every
        allocation and release calls this)."""
        buckets = slot.bucket
        live = buckets.live
        live[slot.bkey] -= 1
        free = slot.nfree if slot.is_node else slot.free_count()
        slot.bkey = free
        ver = slot.bver = slot.bver + 1
        live[free] += 1
        push(buckets.heaps[free], live[free], slot, ver, _version)

    def slots_with(self, key: tuple[str, str], n: int) -> list[Cell]:
        """Every indexed slot with at least ``n`` free GPUs, in id order."""
        buckets = self._buckets.get(key)
        if buckets is None:
            return []
        found = {
            slot.id: slot
            for free in range(n, len(buckets.heaps))
            for _, ver, slot in buckets.heaps[free]
            if slot.bkey == free and slot.bver == ver
        }
        return [found[i] for i in sorted(found)]

    def best_fit(self, key: tuple[str, str], n: int) -> Cell | None:
        """The slot with the fewest free GPUs >= ``n`` (lowest id among equals)."""
        buckets = self._buckets.get(key)
        return None if buckets is None else best_fit(buckets, n)


def best_fit(buckets: _Buckets, n: int) -> Cell | None:
    """The slot in ``buckets`` with the fewest free GPUs >= ``n`` (lowest id among equals)."""
    heaps = buckets.heaps
    return first_current(heaps, buckets.live, range(n, len(heaps)), _version)


Pods = Sequence[tuple[int, int]]  # (pod index in the request, GPUs), largest first


def fit_pods(
    slots: Sequence[Cell],
    pods: Pods,
    usable: dict[Cell, int],
    free: dict[Cell, int],
    key: Callable[[Cell], tuple] | None = None,
) -> list[tuple[int, Cell, int]] | None:
    """Place each pod, largest first, on the busiest slot that holds it; all or nothing.

    ``usable`` and ``free`` are slot-relative masks: positions the pod may take (free or
    preemptible) and positions that are free. A slot whose free GPUs suffice beats one that needs
    victims. Returns ``(pod index, slot, slot-relative mask)`` per pod.
    """
    avail = {s: usable[s] for s in slots}
    idle = {s: free[s] for s in slots}
    out = []
    for idx, n in pods:
        best, best_key = None, None
        for s in slots:
            u = avail[s].bit_count()
            if u < n:
                continue
            f = idle[s].bit_count()
            k = (f < n, *(key(s) if key else ()), u, s.id)
            if best_key is None or k < best_key:
                best, best_key = s, k
        if best is None:
            return None
        m = pick(best.sizes, idle[best], n) if not best_key[0] else pick(best.sizes, avail[best], n)
        avail[best] &= ~m
        idle[best] &= ~m
        out.append((idx, best, m))
    return out


def containers(
    roots: Iterable[Cell],
    total: int,
    usable_count: Callable[[Cell], int],
    cell_count: Callable[[Cell], int] | None = None,
    idle_nodes: int = 0,
) -> list[Cell]:
    """Cells (at or above a slot) inside ``roots`` with at least ``total`` usable GPUs, best first:
    single slots by fewest usable GPUs, then larger cells by size and fewest usable GPUs.

    ``usable_count`` counts a slot; ``cell_count`` may count a cell above the nodes faster (from
    its counters) than summing its nodes. Nodes smaller than ``total`` are not looked at, nor are
    cells above the nodes with fewer than ``idle_nodes`` wholly free nodes (a gang of free GPUs
    only, with that many whole-node pods, cannot fit there; their idle counters say so at once).
    """
    found: list[tuple[tuple, Cell]] = []
    stack = list(roots)
    while stack:
        cell = stack.pop()
        if cell.node is not None:  # a node or a cell inside one: a single slot
            if cell.size < total:
                continue
            u = usable_count(cell)
            if u >= total:
                found.append(((0, u, cell.id), cell))
            continue
        if cell.idle < idle_nodes:
            continue
        u = cell_count(cell) if cell_count else sum(usable_count(n) for n in cell.nodes)
        if u >= total:
            found.append(((cell.size, u, cell.id), cell))
            stack.extend(c for c in cell.children if c.node is None or c.size >= total)
    found.sort(key=lambda kc: kc[0])
    return [c for _, c in found]


def slots_of(cell: Cell) -> list[Cell]:
    """The slots a tenant's cell offers: its nodes, or itself when it is below a node."""
    return cell.nodes if cell.node is None or cell.is_node else [cell]
