"""HiveD's cluster config (``physicalCluster`` + ``virtualClusters``) read unchanged.

Everything that can be wrong with a config is found here, once, with a one-line
:class:`~placement.errors.ConfigError` naming the key: unknown cell types, cycles, chains without
(or with two) node levels, missing node names, duplicate GPU indices, VC cell paths that do not
follow the hierarchy, and HiveD's "insufficient physical cells" check (a VC promised more cells at
some level than the hardware can provide once the levels above are served). The cell tree and the
allocator then trust the config.

Keys HiveD's scheduler service uses (``kubeApiServerAddress`` ...) and ``skuTypes`` are accepted and
ignored.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from placement.errors import ConfigError
from placement.limits import MAX_CELL_LEVELS, MAX_GPUS, MAX_GPUS_PER_NODE, too_large
from placement.loading import LoadError, load_yaml, show

_CELL_TYPE_KEYS = {"childCellType", "childCellNumber", "isNodeLevel"}
_PHYSICAL_KEYS = {"cellType", "cellAddress", "pinnedCellId", "cellChildren"}
_VC_KEYS = {"virtualCells", "pinnedCells"}


@dataclass(frozen=True, slots=True)
class CellTypeSpec:
    """One entry of ``physicalCluster.cellTypes``."""

    name: str
    child: str
    child_number: int
    node_level: bool


@dataclass(frozen=True, slots=True)
class PhysicalCellSpec:
    """A physical cell with its inferred type; ``children`` is always complete (inferred if
    omitted)."""

    cell_type: str
    address: str
    pinned: str | None
    children: tuple["PhysicalCellSpec", ...]
    key: str


@dataclass(frozen=True, slots=True)
class VirtualCellSpec:
    """``cellNumber`` cells of ``cell_type`` in chain ``chain`` promised to a VC."""

    chain: str
    cell_type: str
    count: int


@dataclass(frozen=True, slots=True)
class VirtualClusterSpec:
    name: str
    cells: tuple[VirtualCellSpec, ...]
    pinned: tuple[str, ...]


@dataclass(frozen=True)
class ClusterConfig:
    """A validated HiveD config: cell types, the physical forest, and the tenants' promises."""

    cell_types: Mapping[str, CellTypeSpec]
    physical_cells: tuple[PhysicalCellSpec, ...]
    virtual_clusters: Mapping[str, VirtualClusterSpec]
    levels: Mapping[str, int]
    source: str = "<mapping>"

    def level(self, cell_type: str) -> int:
        """Leaf types are level 1; every other type is one above its child."""
        return self.levels[cell_type]

    def leaf_type(self, cell_type: str) -> str:
        while cell_type in self.cell_types:
            cell_type = self.cell_types[cell_type].child
        return cell_type

    def node_level(self, cell_type: str) -> int:
        """Level of the node-level type in ``cell_type``'s hierarchy (at or below it)."""
        t = cell_type
        while t in self.cell_types:
            if self.cell_types[t].node_level:
                return self.levels[t]
            t = self.cell_types[t].child
        raise ConfigError(
            "physicalCluster.cellTypes", f"{cell_type} has no node-level type below it"
        )

    def chains(self) -> tuple[str, ...]:
        """Top-level cell types in config order; each names a chain."""
        return tuple(dict.fromkeys(c.cell_type for c in self.physical_cells))

    def nodes(self) -> tuple[tuple[str, int], ...]:
        """(node name, GPU count) for every node in config order; a multi-GPU-type node counts
        all."""
        out: list[tuple[str, int]] = []
        for top in self.physical_cells:
            self._collect_nodes(top, out)
        merged: dict[str, int] = {}
        for name, gpus in out:
            merged[name] = merged.get(name, 0) + gpus
        return tuple(merged.items())

    def _collect_nodes(self, spec: PhysicalCellSpec, out: list[tuple[str, int]]) -> None:
        ct = self.cell_types.get(spec.cell_type)
        if ct is not None and ct.node_level:
            out.append((spec.address, self.leaf_count(spec.cell_type)))
            return
        for child in spec.children:
            self._collect_nodes(child, out)

    def leaf_count(self, cell_type: str) -> int:
        n = 1
        while cell_type in self.cell_types:
            n *= self.cell_types[cell_type].child_number
            cell_type = self.cell_types[cell_type].child
        return n


def load_config(source: str | Path | Mapping[str, Any]) -> ClusterConfig:
    """Read a HiveD config from a YAML file path or an already-parsed mapping; validate it."""
    if isinstance(source, Mapping):
        return parse_config(source, "<mapping>")
    if not isinstance(source, (str, os.PathLike)):
        raise ConfigError(
            "", f"expected a YAML file's path or a parsed mapping, got {type(source).__name__}"
        )
    path = Path(source)
    try:
        data = load_yaml(path, what="cluster config")
    except LoadError as exc:
        raise ConfigError(exc.key, exc.why, source=exc.source, line=exc.line) from None
    try:
        return parse_config(data, str(path))
    except ConfigError as exc:
        exc.source = str(path)
        raise


def parse_config(data: Any, source: str = "<mapping>") -> ClusterConfig:
    if not isinstance(data, Mapping):
        raise ConfigError(
            "", "a cluster config must be a mapping with physicalCluster and virtualClusters"
        )
    pc = _mapping(data.get("physicalCluster"), "physicalCluster")
    cell_types = _parse_cell_types(_mapping(pc.get("cellTypes"), "physicalCluster.cellTypes"))
    levels = _levels(cell_types)
    raw_cells = pc.get("physicalCells")
    if not isinstance(raw_cells, list) or not raw_cells:
        raise ConfigError("physicalCluster.physicalCells", "must be a non-empty list of cells")
    _check_size(cell_types, levels, raw_cells)
    tops = tuple(_parse_top_cell(raw, i, cell_types, levels) for i, raw in enumerate(raw_cells))
    config = ClusterConfig(cell_types, tops, {}, levels, source)
    _check_unique_names(config)
    vcs = _parse_virtual_clusters(data.get("virtualClusters"), config)
    config = ClusterConfig(cell_types, tops, vcs, levels, source)
    _check_sufficient(config)
    return config


def _mapping(value: Any, key: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(key, "missing or not a mapping")
    return value


def _positive_int(value: Any, key: str, *, zero: bool = False) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < (0 if zero else 1):
        raise ConfigError(key, f"must be an integer {'>= 0' if zero else '> 0'}, got {show(value)}")
    if value > MAX_GPUS:
        raise ConfigError(key, too_large(value, MAX_GPUS))
    return value


def _check_size(
    cell_types: Mapping[str, CellTypeSpec], levels: Mapping[str, int], raw_cells: list
) -> None:
    """Refuse hierarchies too deep or clusters too large *before* the cell tree is built: a
    childCellNumber of 1e9 used to hang while materialising the cells."""
    deepest = max(levels.values(), default=1)
    if deepest > MAX_CELL_LEVELS:
        raise ConfigError(
            "physicalCluster.cellTypes", f"{deepest} levels; the limit is {MAX_CELL_LEVELS}"
        )
    leaves: dict[str, int] = {}

    def leaf_count(t: str) -> int:
        if t not in cell_types:
            return 1
        if t not in leaves:
            leaves[t] = cell_types[t].child_number * leaf_count(cell_types[t].child)
        return leaves[t]

    for name, spec in cell_types.items():
        if spec.node_level and leaf_count(name) > MAX_GPUS_PER_NODE:
            why = f"a node of {leaf_count(name):,} GPUs; the limit is {MAX_GPUS_PER_NODE:,}"
            raise ConfigError(f"physicalCluster.cellTypes.{name}", why)
    total = 0
    for i, raw in enumerate(raw_cells):
        cell_type = raw.get("cellType") if isinstance(raw, Mapping) else None
        if isinstance(cell_type, str) and cell_type in cell_types:
            total += leaf_count(cell_type)
        if total > MAX_GPUS:
            raise ConfigError(
                f"physicalCluster.physicalCells[{i}]",
                f"the cluster would have more than {MAX_GPUS:,} GPUs",
            )


def _parse_cell_types(raw: Mapping[str, Any]) -> dict[str, CellTypeSpec]:
    out: dict[str, CellTypeSpec] = {}
    for name, spec in raw.items():
        key = f"physicalCluster.cellTypes.{name}"
        spec = _mapping(spec, key)
        unknown = set(spec) - _CELL_TYPE_KEYS
        if unknown:
            raise ConfigError(f"{key}.{sorted(map(str, unknown))[0]}", "unknown key")
        child = spec.get("childCellType")
        if not isinstance(child, str) or not child:
            raise ConfigError(f"{key}.childCellType", "must be a cell type name")
        number = _positive_int(spec.get("childCellNumber"), f"{key}.childCellNumber")
        node_level = spec.get("isNodeLevel", False)
        if not isinstance(node_level, bool):
            raise ConfigError(
                f"{key}.isNodeLevel", f"must be true or false, got {show(node_level)}"
            )
        out[str(name)] = CellTypeSpec(str(name), child, number, node_level)
    return out


def _levels(cell_types: Mapping[str, CellTypeSpec]) -> dict[str, int]:
    levels: dict[str, int] = {}
    for name in cell_types:
        path: list[str] = []
        t = name
        while t in cell_types and t not in levels:
            if t in path:
                cycle = " -> ".join(path[path.index(t) :] + [t])
                raise ConfigError(f"physicalCluster.cellTypes.{t}.childCellType", f"cycle: {cycle}")
            path.append(t)
            t = cell_types[t].child
        base = levels.get(t, 1)
        for depth, p in enumerate(reversed(path), start=1):
            levels[p] = base + depth
        if t not in cell_types:
            levels.setdefault(t, 1)
    return levels


def _node_levels_in(cell_type: str, cell_types: Mapping[str, CellTypeSpec]) -> list[str]:
    out = []
    t = cell_type
    while t in cell_types:
        if cell_types[t].node_level:
            out.append(t)
        t = cell_types[t].child
    return out


def _parse_top_cell(raw: Any, i: int, cell_types, levels) -> PhysicalCellSpec:
    key = f"physicalCluster.physicalCells[{i}]"
    raw = _mapping(raw, key)
    cell_type = raw.get("cellType")
    if not isinstance(cell_type, str) or cell_type not in cell_types:
        why = "missing" if cell_type is None else f"unknown cell type {show(cell_type)}"
        raise ConfigError(f"{key}.cellType", why)
    node_types = _node_levels_in(cell_type, cell_types)
    if not node_types:
        raise ConfigError(
            f"{key}.cellType",
            f"{cell_type} has no node level (no isNodeLevel type in its hierarchy)",
        )
    if len(node_types) > 1:
        raise ConfigError(
            f"{key}.cellType", f"{cell_type} has more than one node level: {', '.join(node_types)}"
        )
    return _parse_cell(raw, cell_type, str(i), False, key, cell_types)


def _parse_cell(
    raw, cell_type: str, default: str, below_node: bool, key: str, cell_types
) -> PhysicalCellSpec:
    """Build one physical cell; ``default`` is HiveD's default address segment for it."""
    raw = {} if raw is None else _mapping(raw, key)
    unknown = set(raw) - _PHYSICAL_KEYS
    if unknown:
        raise ConfigError(f"{key}.{sorted(map(str, unknown))[0]}", "unknown key")
    given_type = raw.get("cellType")
    if given_type is not None and given_type != cell_type:
        raise ConfigError(
            f"{key}.cellType",
            f"expected {cell_type} here (the parent's childCellType), got {show(given_type)}",
        )
    spec = cell_types.get(cell_type)
    address = raw.get("cellAddress")
    if isinstance(address, (dict, list, bool)):
        raise ConfigError(f"{key}.cellAddress", f"must be a name or an index, got {show(address)}")
    if spec is not None and spec.node_level and address in (None, ""):
        raise ConfigError(
            f"{key}.cellAddress", f"required for node-level cell {cell_type} (it is the node name)"
        )
    if spec is None:  # a leaf: its address is the GPU index
        if address is None:
            address = default
        elif isinstance(address, float) or not str(address).lstrip("-").isdigit():
            raise ConfigError(
                f"{key}.cellAddress", f"a GPU index must be an integer, got {show(address)}"
            )
    address = default if address in (None, "") else str(address)
    pinned = raw.get("pinnedCellId")
    if pinned is not None and (not isinstance(pinned, str) or not pinned):
        if pinned == "":
            pinned = None
        else:
            raise ConfigError(
                f"{key}.pinnedCellId", f"must be a non-empty string, got {show(pinned)}"
            )
    if spec is None:
        if raw.get("cellChildren"):
            raise ConfigError(
                f"{key}.cellChildren", f"{cell_type} is a leaf (GPU) type and has no children"
            )
        return PhysicalCellSpec(cell_type, address, pinned, (), key)
    children_raw = raw.get("cellChildren")
    if children_raw in (None, []):
        children_raw = [None] * spec.child_number
    elif not isinstance(children_raw, list):
        raise ConfigError(f"{key}.cellChildren", "must be a list")
    elif len(children_raw) != spec.child_number:
        raise ConfigError(
            f"{key}.cellChildren",
            f"{cell_type} has childCellNumber {spec.child_number} but {len(children_raw)} "
            f"children are listed",
        )
    # HiveD's default numbering: reset at the node level, then parentDefault * childNumber + i.
    base = 0 if spec.node_level else int(default)
    children = tuple(
        _parse_cell(
            child,
            spec.child,
            str(base * spec.child_number + j),
            below_node or spec.node_level,
            f"{key}.cellChildren[{j}]",
            cell_types,
        )
        for j, child in enumerate(children_raw)
    )
    return PhysicalCellSpec(cell_type, address, pinned, children, key)


def _walk(spec: PhysicalCellSpec):
    yield spec
    for child in spec.children:
        yield from _walk(child)


def _check_unique_names(config: ClusterConfig) -> None:
    """A node name may repeat only across GPU types (HiveD's multi-SKU node); GPU indices may
    not."""
    node_leaf_types: dict[str, set[str]] = {}
    node_gpus: dict[str, set[int]] = {}
    pins: set[str] = set()
    for top in config.physical_cells:
        for spec in _walk(top):
            ct = config.cell_types.get(spec.cell_type)
            if ct is not None and ct.node_level:
                leaf_type = config.leaf_type(spec.cell_type)
                types = node_leaf_types.setdefault(spec.address, set())
                if leaf_type in types:
                    raise ConfigError(
                        f"{spec.key}.cellAddress", f"duplicate node name {show(spec.address)}"
                    )
                types.add(leaf_type)
                seen = node_gpus.setdefault(spec.address, set())
                for leaf in _walk(spec):
                    if leaf.children or leaf.cell_type in config.cell_types:
                        continue
                    index = int(leaf.address)
                    if index in seen:
                        raise ConfigError(
                            f"{leaf.key}.cellAddress",
                            f"duplicate GPU index {index} on node {spec.address}",
                        )
                    seen.add(index)
            if spec.pinned is not None:
                if spec.pinned in pins:
                    raise ConfigError(
                        f"{spec.key}.pinnedCellId", f"duplicate pinned cell id {show(spec.pinned)}"
                    )
                pins.add(spec.pinned)


def _pinned_cells(config: ClusterConfig) -> dict[str, tuple[str, PhysicalCellSpec]]:
    """Pinned cell id -> (chain, cell spec)."""
    out = {}
    for top in config.physical_cells:
        for spec in _walk(top):
            if spec.pinned is not None:
                out[spec.pinned] = (top.cell_type, spec)
    return out


def _parse_virtual_clusters(raw: Any, config: ClusterConfig) -> dict[str, VirtualClusterSpec]:
    if raw is None:
        return {}
    raw = _mapping(raw, "virtualClusters")
    chains = set(config.chains())
    pinned = _pinned_cells(config)
    pinned_owner: dict[str, str] = {}
    out: dict[str, VirtualClusterSpec] = {}
    for vc_name, vc_raw in raw.items():
        vkey = f"virtualClusters.{vc_name}"
        vc_raw = {} if vc_raw is None else _mapping(vc_raw, vkey)
        unknown = set(vc_raw) - _VC_KEYS
        if unknown:
            raise ConfigError(f"{vkey}.{sorted(map(str, unknown))[0]}", "unknown key")
        cells = []
        entries = vc_raw.get("virtualCells") or []
        if not isinstance(entries, list):
            raise ConfigError(f"{vkey}.virtualCells", "must be a list")
        for i, entry in enumerate(entries):
            ekey = f"{vkey}.virtualCells[{i}]"
            entry = _mapping(entry, ekey)
            unknown = set(entry) - {"cellType", "cellNumber"}
            if unknown:
                raise ConfigError(
                    f"{ekey}.{sorted(map(str, unknown))[0]}",
                    "unknown key (pinned cells go under pinnedCells)",
                )
            path = entry.get("cellType")
            if not isinstance(path, str) or not path:
                raise ConfigError(
                    f"{ekey}.cellType", "must be a dotted cell type path such as RACK.NODE"
                )
            parts = path.split(".")
            if parts[0] not in chains:
                known = (
                    "unknown cell type"
                    if parts[0] not in config.levels
                    else "not the type of any top-level physical cell"
                )
                raise ConfigError(f"{ekey}.cellType", f"{show(parts[0])}: {known}")
            for parent, child in zip(parts, parts[1:]):
                spec = config.cell_types.get(parent)
                if spec is None or spec.child != child:
                    what = (
                        "unknown cell type"
                        if child not in config.levels
                        else f"not the child type of {parent}"
                    )
                    raise ConfigError(f"{ekey}.cellType", f"{show(child)} in {show(path)}: {what}")
            count = _positive_int(entry.get("cellNumber"), f"{ekey}.cellNumber", zero=True)
            cells.append(VirtualCellSpec(parts[0], parts[-1], count))
        pins = []
        pin_entries = vc_raw.get("pinnedCells") or []
        if not isinstance(pin_entries, list):
            raise ConfigError(f"{vkey}.pinnedCells", "must be a list")
        for i, entry in enumerate(pin_entries):
            pkey = f"{vkey}.pinnedCells[{i}].pinnedCellId"
            pid = _mapping(entry, f"{vkey}.pinnedCells[{i}]").get("pinnedCellId")
            if pid not in pinned:
                raise ConfigError(pkey, f"no physical cell has pinnedCellId {show(pid)}")
            if pid in pinned_owner:
                raise ConfigError(
                    pkey, f"pinned cell {show(pid)} is already used by {pinned_owner[pid]}"
                )
            pinned_owner[pid] = str(vc_name)
            pins.append(pid)
        out[str(vc_name)] = VirtualClusterSpec(str(vc_name), tuple(cells), tuple(pins))
    return out


def _check_sufficient(config: ClusterConfig) -> None:
    """HiveD's static check: serve the VC demand level by level from the top of each chain."""
    pinned = _pinned_cells(config)
    for chain in config.chains():
        demand: dict[int, int] = {}
        for vc in config.virtual_clusters.values():
            for cell in vc.cells:
                if cell.chain == chain:
                    lvl = config.level(cell.cell_type)
                    demand[lvl] = demand.get(lvl, 0) + cell.count
            for pid in vc.pinned:
                pchain, spec = pinned[pid]
                if pchain == chain:
                    lvl = config.level(spec.cell_type)
                    demand[lvl] = demand.get(lvl, 0) + 1
        available = sum(1 for c in config.physical_cells if c.cell_type == chain)
        t = chain
        while True:
            lvl = config.level(t)
            left = available - demand.get(lvl, 0)
            if left < 0:
                raise ConfigError(
                    "virtualClusters",
                    f"insufficient physical cells at chain {chain} level {lvl} ({t}): "
                    f"{demand[lvl]} needed, {available} available",
                )
            if t not in config.cell_types:
                break
            available = left * config.cell_types[t].child_number
            t = config.cell_types[t].child
