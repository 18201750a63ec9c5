"""The physical cell tree built from a :class:`~placement.config.ClusterConfig`.

Cells above the node level keep counters (GPUs in use, nodes with every GPU free, bad nodes below).
A node keeps its GPUs' state as bitmasks over *positions* (its leaves in tree order), so a cell
inside a node is just a
range of positions: GPU choice, "is this switch free" and "how many GPUs are free" are bit
operations, not walks over leaf objects. ``gpus[pos]`` maps a position to the GPU index HiveD
would report (the leaf's ``cellAddress``, or its default number).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from placement.config import ClusterConfig, PhysicalCellSpec

_LAYOUTS: dict[tuple[int, ...], int] = {}  # a node's GPU numbering -> small id (for caches)


class Cell:
    """One physical cell. Node-level cells also carry the GPU state of their node: the free and
    opportunistic bitmasks and, per running job, the mask of positions it holds."""

    __slots__ = (
        "id",
        "type",
        "level",
        "chain",
        "address",
        "parent",
        "children",
        "size",
        "node",
        "offset",
        "bits",
        "nodes",
        "gpu",
        "is_node",
        "sizes",
        "used",
        "idle",
        "bad",
        "bound",
        "fixed",
        "region",
        "bkey",
        "bver",
        "bucket",
        "name",
        "free_mask",
        "opp_mask",
        "nfree",
        "jobs",
        "gpus",
        "layout",
        "slots",
        "ikey",
        "iver",
    )

    def __init__(
        self, id: int, type: str, level: int, chain: str, address: str, parent: "Cell | None"
    ):
        self.id = id
        self.type = type
        self.level = level
        self.chain = chain
        self.address = address
        self.parent = parent
        self.children: list[Cell] = []
        self.size = 0
        self.node: Cell | None = None
        self.offset = 0
        self.bits = 0
        self.nodes: list[Cell] = []
        self.gpu = -1
        self.is_node = False
        self.sizes: tuple[int, ...] = ()
        self.used = 0
        self.idle = 0  # above the nodes: nodes below with every GPU free
        self.bad = 0
        self.bound: str | None = None
        self.fixed = False  # bound for good: a pinned cell some VC lists
        self.region: Cell | None = None
        self.bkey = -1
        self.bver = 0
        self.bucket = None
        self.ikey = -1  # the node's bucket in placement.idle.IdleNodes (-1: none)
        self.iver = 0

    def __repr__(self) -> str:
        return f"Cell({self.type} {self.address})"

    def free_count(self) -> int:
        """GPUs in this cell nobody uses (on any node, healthy or not)."""
        if self.node is None:
            return self.size - self.used
        if self.is_node:
            return self.nfree
        return ((self.node.free_mask >> self.offset) & ((1 << self.size) - 1)).bit_count()

    def healthy(self) -> bool:
        return (self.node.bad if self.node is not None else self.bad) == 0


def _lca(a: Cell, b: Cell) -> Cell | None:
    seen = set()
    x: Cell | None = a
    while x is not None:
        seen.add(x.id)
        x = x.parent
    y: Cell | None = b
    while y is not None and y.id not in seen:
        y = y.parent
    return y


@dataclass
class Chain:
    """One chain: the cell types from a top-level type down to its leaf type, by level."""

    name: str
    leaf_type: str
    node_level: int
    top_level: int
    type_at: dict[int, str]
    child_number: dict[int, int]
    leaves: dict[int, int]  # GPUs in a cell of each level
    tops: list[Cell] = field(default_factory=list)
    level_of: dict[str, int] = field(default_factory=dict)  # cell type -> its level

    def __post_init__(self) -> None:
        self.level_of = {t: level for level, t in self.type_at.items()}


class Topology:
    """The physical forest: cells in tree order, chains, nodes by name, pinned cells by id."""

    def __init__(self, config: ClusterConfig):
        self.config = config
        self.cells: list[Cell] = []
        self.chains: dict[str, Chain] = {}
        self.node_cells: dict[str, list[Cell]] = {}
        self.pinned: dict[str, Cell] = {}
        self.sizes_of: dict[str, tuple[int, ...]] = {}
        for chain in config.chains():
            self.chains[chain] = self._chain(chain)
        for spec in config.physical_cells:
            top = self._build(spec, spec.cell_type, None, None)
            self.chains[spec.cell_type].tops.append(top)
        self.leaf_chains: dict[str, list[str]] = {}
        for name, chain in self.chains.items():
            self.leaf_chains.setdefault(chain.leaf_type, []).append(name)

    def _chain(self, name: str) -> Chain:
        cfg = self.config
        type_at: dict[int, str] = {}
        child_number: dict[int, int] = {}
        t = name
        while True:
            lvl = cfg.level(t)
            type_at[lvl] = t
            if t not in cfg.cell_types:
                break
            child_number[lvl] = cfg.cell_types[t].child_number
            t = cfg.cell_types[t].child
        leaves = {lvl: cfg.leaf_count(t) for lvl, t in type_at.items()}
        return Chain(name, t, cfg.node_level(name), cfg.level(name), type_at, child_number, leaves)

    def _sizes(self, cell_type: str) -> tuple[int, ...]:
        """Leaf counts of a cell type's sub-cells, from one GPU up to the type itself."""
        cached = self.sizes_of.get(cell_type)
        if cached is None:
            sizes = [1]
            chain = []
            t = cell_type
            while t in self.config.cell_types:
                chain.append(self.config.cell_types[t].child_number)
                t = self.config.cell_types[t].child
            for n in reversed(chain):
                sizes.append(sizes[-1] * n)
            cached = self.sizes_of[cell_type] = tuple(sizes)
        return cached

    def _build(
        self, spec: PhysicalCellSpec, chain: str, parent: Cell | None, node: Cell | None
    ) -> Cell:
        cfg = self.config
        address = spec.address if parent is None else f"{parent.address}/{spec.address}"
        cell = Cell(
            len(self.cells), spec.cell_type, cfg.level(spec.cell_type), chain, address, parent
        )
        self.cells.append(cell)
        if spec.pinned is not None:
            self.pinned[spec.pinned] = cell
        ct = cfg.cell_types.get(spec.cell_type)
        if ct is not None and ct.node_level:
            node = cell
            cell.is_node = True
            cell.name = spec.address
            cell.gpus = []
            self.node_cells.setdefault(spec.address, []).append(cell)
        if node is not None:
            cell.node = node
            cell.offset = len(node.gpus)
            cell.sizes = self._sizes(spec.cell_type)
        if ct is None:
            cell.gpu = int(spec.address)
            node.gpus.append(cell.gpu)
            cell.size = 1
        for child_spec in spec.children:
            child = self._build(child_spec, chain, cell, node)
            cell.children.append(child)
            cell.size += child.size
            if node is None or cell.is_node:
                cell.nodes.extend(child.nodes if not child.is_node else [child])
        if node is None:
            cell.idle = len(cell.nodes)
        if cell.is_node:
            cell.nodes = [cell]
            size = cell.size
            cell.free_mask = (1 << size) - 1
            cell.opp_mask = 0
            cell.nfree = size
            cell.jobs = {}
            cell.gpus = tuple(cell.gpus)
            cell.layout = _LAYOUTS.setdefault(cell.gpus, len(_LAYOUTS))
            cell.slots = []
        if node is not None:
            cell.bits = ((1 << cell.size) - 1) << cell.offset
        return cell

    def common_cell(self, placement: Mapping[str, Iterable[int]]) -> Cell | None:
        """The lowest cell holding every GPU of ``placement`` (node -> GPU indices), if any."""
        leaves: list[Cell] = []
        for name, gpus in placement.items():
            wanted = set(gpus)
            for node in self.node_cells.get(name, ()):
                mask = sum(1 << p for p, g in enumerate(node.gpus) if g in wanted)
                if mask:
                    leaves.extend(leaf_cells(node, mask))
        if not leaves or len({leaf.chain for leaf in leaves}) > 1:
            return None
        return lowest_common_cell(leaves)

    def all_nodes(self) -> list[Cell]:
        return [c for cells in self.node_cells.values() for c in cells]


def lowest_common_cell(cells: list[Cell]) -> Cell | None:
    """The lowest cell containing all of ``cells``; None when they lie in different top cells."""
    out: Cell | None = cells[0]
    for c in cells[1:]:
        if out is None:
            return None
        out = _lca(out, c)
    return out


def leaf_cells(node: Cell, mask: int) -> list[Cell]:
    """The leaf cells of ``node`` at the positions set in ``mask``."""
    out: list[Cell] = []
    stack = [node]
    while stack:
        c = stack.pop()
        if not c.bits & mask:
            continue
        if not c.children:
            out.append(c)
        else:
            stack.extend(reversed(c.children))
    return out
