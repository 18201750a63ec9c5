"""How much slower a data-parallel job runs on a given placement than packed in one switch.

``speed_factor`` maps a placement (node -> GPU indices) to a factor in (0, 1]: 1.0 inside one PCIe
switch (or on one GPU), lower when the job's GPUs straddle switches, sockets, nodes or racks.

* Across nodes the factor is *measured* where data exists: the Chronus artifact's
  ``model_info.json`` (shipped in ``placement/data``) gives, per model and GPU count, throughput on
  2 and 4 nodes relative to 1 node. Other node counts are interpolated in log2(nodes) (and held at
  the last measured value beyond it); other GPU counts use the nearest measured one (the smaller on
  a tie). A model without data uses the geometric mean of the measured models. Values above 1.0
  (inception_v3 on 2 GPUs measures 1.0025) are measurement noise and capped at 1.0.
* Inside a node, and for racks above the first multi-node level, there is no data here: the
  :class:`Penalties` defaults are *assumptions*, stated as such and configurable.

With a cell tree (``topology``: a :class:`~placement.allocator.CellAllocator` or
:class:`~placement.cells.Topology`) the lowest common cell decides the intra-node level and the
racks crossed; without one, only the number of nodes spanned is known.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Iterable, Mapping

from placement.cells import Topology


@dataclass(frozen=True, slots=True)
class Penalties:
    """Assumed (not measured) factors where model_info.json has no data."""

    same_socket: float = 0.97  # across PCIe switches, through the CPU root complex
    cross_socket: float = 0.90  # across CPU sockets (QPI/UPI) inside a node
    per_rack_level: float = 0.95  # each cell level crossed above the lowest multi-node cell


Table = Mapping[str, Mapping[str, Mapping[str, float]]]


@lru_cache(maxsize=1)
def model_table() -> dict:
    """model -> GPUs -> nodes -> throughput relative to one node (model_info.json)."""
    text = resources.files("placement").joinpath("data/model_info.json").read_text(encoding="utf-8")
    return json.loads(text)


def _generic(table: Table) -> dict[str, dict[str, float]]:
    """Geometric mean over the models of every (GPUs, nodes) point."""
    points: dict[tuple[str, str], list[float]] = {}
    for per_gpus in table.values():
        for gpus, per_nodes in per_gpus.items():
            for nodes, value in per_nodes.items():
                points.setdefault((gpus, nodes), []).append(value)
    out: dict[str, dict[str, float]] = {}
    for (gpus, nodes), values in points.items():
        out.setdefault(gpus, {})[nodes] = math.exp(sum(math.log(v) for v in values) / len(values))
    return out


def node_factor(
    gpus: int, nodes: int, model: str | None = None, *, table: Table | None = None
) -> float:
    """Throughput of ``gpus`` GPUs spread over ``nodes`` nodes relative to one node."""
    if nodes <= 1:
        return 1.0
    table = model_table() if table is None else table
    per_gpus = table.get(model) if model is not None else None
    if per_gpus is None:
        per_gpus = _generic(table)
    measured = sorted(int(g) for g in per_gpus if any(int(n) > 1 for n in per_gpus[g]))
    if not measured:
        return 1.0
    nearest = min(measured, key=lambda g: (abs(g - gpus), g))
    points = sorted((int(n), v) for n, v in per_gpus[str(nearest)].items())
    if not any(n == 1 for n, _ in points):
        points.insert(0, (1, 1.0))
    for (n0, v0), (n1, v1) in zip(points, points[1:]):
        if n0 <= nodes <= n1:
            t = (math.log2(nodes) - math.log2(n0)) / (math.log2(n1) - math.log2(n0))
            return min(1.0, v0 + t * (v1 - v0))
    return min(1.0, points[-1][1])


def speed_factor(
    placement: Mapping[str, Iterable[int]],
    model: str | None = None,
    *,
    topology=None,
    penalties: Penalties = Penalties(),
    table: Table | None = None,
) -> float:
    """Speed of a job on ``placement`` relative to the same job inside one switch."""
    placement = {node: tuple(gpus) for node, gpus in placement.items() if tuple(gpus)}
    gpus = sum(len(g) for g in placement.values())
    if gpus <= 1:
        return 1.0
    tree: Topology | None = getattr(topology, "topology", topology)
    if tree is not None and not all(node in tree.node_cells for node in placement):
        tree = None
    cell = tree.common_cell(placement) if tree is not None else None
    if len(placement) == 1:
        if cell is None or cell.level <= 2:
            return 1.0
        return penalties.cross_socket if cell.is_node else penalties.same_socket
    factor = node_factor(gpus, len(placement), model, table=table)
    if tree is not None:
        chain = tree.chains[tree.node_cells[next(iter(placement))][0].chain]
        top = cell.level if cell is not None else chain.top_level + 1
        factor *= penalties.per_rack_level ** max(0, top - chain.node_level - 1)
    return factor
