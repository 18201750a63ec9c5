"""Buddy free lists: per chain and level, the physical cells no tenant holds.

Only whole preassigned cells move in and out (HiveD's granularity): binding a level-k cell takes a
free level-k cell or splits the smallest free cell above it; unbinding puts it back and merges it
with its buddies as soon as they are all free. Opportunistic jobs never touch these lists.

"How many level-l cells can still be had" is *computed* from the list lengths when asked
(:func:`feasible`), never kept in counters: HiveD's counters drift when a bad cell recovers while
in use (the "VC Safety Broken" panic in ../shared/notes/hived.md §7), ours cannot.
"""

from __future__ import annotations

from typing import Iterable, Iterator, Mapping

from placement.cells import Cell, Chain


class FreeLists:
    """Insertion-ordered free cells per chain and level; ``clone`` is cheap (lists are small)."""

    __slots__ = ("levels",)

    def __init__(self, levels: dict[str, list[dict[Cell, None]]]):
        self.levels = levels

    @classmethod
    def initial(cls, chains: Mapping[str, Chain]) -> "FreeLists":
        levels = {}
        for name, chain in chains.items():
            per_level: list[dict[Cell, None]] = [{} for _ in range(chain.top_level + 1)]
            per_level[chain.top_level].update(dict.fromkeys(chain.tops))
            levels[name] = per_level
        return cls(levels)

    def clone(self) -> "FreeLists":
        return FreeLists({name: [dict(d) for d in lv] for name, lv in self.levels.items()})

    def free_ancestor(self, cell: Cell) -> Cell | None:
        """The free cell that is ``cell`` or contains it, if any."""
        lv = self.levels[cell.chain]
        x: Cell | None = cell
        while x is not None and x not in lv[x.level]:
            x = x.parent
        return x

    def take(self, cell: Cell) -> Cell:
        """Remove ``cell`` from the free lists, splitting the free cell that holds it.

        Returns the free cell that was taken or split (``cell`` itself when it was free whole).
        """
        lv = self.levels[cell.chain]
        path: list[Cell] = []
        x = cell
        while x not in lv[x.level]:
            path.append(x)
            x = x.parent
            if x is None:
                raise ValueError(f"{cell} is not free")
        del lv[x.level][x]
        for on_path in reversed(path):
            for sibling in on_path.parent.children:
                if sibling is not on_path:
                    lv[sibling.level][sibling] = None
        return x

    def give(self, cell: Cell) -> None:
        """Return ``cell`` and merge it with its buddies while a whole parent is free."""
        lv = self.levels[cell.chain]
        x = cell
        while x.parent is not None:
            free_at = lv[x.level]
            siblings = x.parent.children
            if not all(s is x or s in free_at for s in siblings):
                break
            for s in siblings:
                if s is not x:
                    del free_at[s]
            x = x.parent
        lv[x.level][x] = None

    def candidates(self, chain: Chain, level: int) -> Iterator[Cell]:
        """Level-``level`` cells that can be taken: free ones first, then inside the smallest
        free cells above (buddy order). At every level, cells come by fewest GPUs used by
        opportunistic jobs, then in list order (tree order below a split cell): HiveD's buddyAlloc
        sort, so a guaranteed job binds the cell whose binding kills the least opportunistic work.
        Callers take or give cells only after they stop iterating."""
        lv = self.levels[chain.name]
        for upper in range(level, chain.top_level + 1):
            for cell in by_fewest_opportunistic(lv[upper]):
                if upper == level:
                    yield cell
                else:
                    yield from descendants_by_fewest_opportunistic(cell, level)

    def counts(self, chain: Chain) -> list[int]:
        return list(map(len, self.levels[chain.name]))


def descendants_at(cell: Cell, level: int) -> Iterator[Cell]:
    if cell.level == level:
        yield cell
        return
    for child in cell.children:
        yield from descendants_at(child, level)


def opportunistic_gpus(cell: Cell) -> int:
    """GPUs of ``cell`` that opportunistic jobs hold."""
    node = cell.node
    if node is None:
        return sum(n.opp_mask.bit_count() for n in cell.nodes)
    mask = node.opp_mask
    if mask and cell is not node:
        mask = (mask >> cell.offset) & ((1 << cell.size) - 1)
    return mask.bit_count()


def by_fewest_opportunistic(cells: Iterable[Cell]) -> list[Cell]:
    """``cells`` stably sorted by :func:`opportunistic_gpus` (unchanged when no cell has any)."""
    cells = list(cells)
    if len(cells) < 2:
        return cells
    counts = [opportunistic_gpus(c) for c in cells]
    if not any(counts):
        return cells
    order = sorted(range(len(cells)), key=counts.__getitem__)
    return [cells[i] for i in order]


def descendants_by_fewest_opportunistic(cell: Cell, level: int) -> Iterator[Cell]:
    """Level-``level`` cells under ``cell`` as HiveD splits it: children by fewest opportunistic
    GPUs at every level, tree order among equals."""
    if cell.level == level:
        yield cell
        return
    for child in by_fewest_opportunistic(cell.children):
        yield from descendants_by_fewest_opportunistic(child, level)


def feasible(chain: Chain, counts: list[int], demand: Mapping[int, int]) -> bool:
    """Can every promised-but-unbound cell (``demand`` by level) still be cut from the free cells?

    Serve the top level first; what is left over splits into children for the level below.
    """
    available = 0
    for level in range(chain.top_level, 0, -1):
        available += counts[level]
        left = available - demand.get(level, 0)
        if left < 0:
            return False
        if level > 1:
            available = left * chain.child_number[level]
    return True


def feasible_after_take(
    chain: Chain, counts: list[int], demand: Mapping[int, int], cell: Cell, holder: Cell
) -> bool:
    """Is the promise still kept after binding ``cell`` (found inside free cell ``holder``) for a
    tenant whose own demand at ``cell.level`` it serves?

    :func:`feasible` on the counts after the split (``holder`` leaves its level, each level from
    ``cell``'s up to ``holder``'s gains the buddies split off) and one cell less demanded at
    ``cell.level``, computed in one pass because every binding asks it.
    """
    child_number = chain.child_number
    low, high = cell.level, holder.level
    available = 0
    for level in range(chain.top_level, 0, -1):
        available += counts[level]
        if level == high:
            available -= 1
        elif low <= level < high:
            available += child_number[level + 1] - 1
        left = available - demand.get(level, 0) + (level == low)
        if left < 0:
            return False
        if level > 1:
            available = left * child_number[level]
    return True
