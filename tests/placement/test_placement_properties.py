"""Property-based checks on random cell trees and random allocate / release / set_bad /
set_healthy sequences: no GPU is ever held twice, failed requests change nothing, releasing
everything restores the initial free lists, and every tenant can always obtain each promised cell
once its hardware is healthy."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placement import CellAllocator, PodSpec, Request
from placement.config import parse_config
from placement.errors import ConfigError


def _physical(cell_type: str, cell_types: dict, names: list[int]) -> dict:
    spec = cell_types.get(cell_type)
    if spec is None:
        return {}
    if spec.get("isNodeLevel"):
        names[0] += 1
        return {"cellAddress": f"n{names[0]}"}
    return {
        "cellChildren": [
            _physical(spec["childCellType"], cell_types, names)
            for _ in range(spec["childCellNumber"])
        ]
    }


@st.composite
def clusters(draw):
    """A random HiveD config: 1-2 chains, optional switch level, 0-2 levels above the node."""
    cell_types: dict = {}
    physical = []
    paths: list[list[str]] = []  # per chain: types from the top down
    names = [0]
    for c in range(draw(st.integers(1, 2))):
        below = f"G{c}"
        if draw(st.booleans()):
            cell_types[f"SW{c}"] = {"childCellType": below, "childCellNumber": 2}
            below = f"SW{c}"
        cell_types[f"NODE{c}"] = {
            "childCellType": below,
            "childCellNumber": draw(st.integers(1, 4)),
            "isNodeLevel": True,
        }
        path = [f"NODE{c}"]
        if below != f"G{c}":
            path.append(below)
        for k in range(draw(st.integers(0, 2))):
            name = f"R{k}-{c}"
            cell_types[name] = {
                "childCellType": path[0],
                "childCellNumber": draw(st.integers(1, 3)),
            }
            path.insert(0, name)
        path.append(f"G{c}")
        for _ in range(draw(st.integers(1, 3))):
            top = {"cellType": path[0], **_physical(path[0], cell_types, names)}
            physical.append(top)
        paths.append(path)
    config = {
        "physicalCluster": {"cellTypes": cell_types, "physicalCells": physical},
        "virtualClusters": {},
    }
    vcs = [f"vc{i}" for i in range(draw(st.integers(1, 3)))]
    for vc in vcs:
        config["virtualClusters"][vc] = {"virtualCells": []}
    if draw(st.booleans()):  # pin a node-level cell of the first top cell to the first VC
        node = physical[0]
        while "cellChildren" in node and "cellAddress" not in node:
            node = node["cellChildren"][0]
        node["pinnedCellId"] = "PIN"
        config["virtualClusters"][vcs[0]]["pinnedCells"] = [{"pinnedCellId": "PIN"}]
        try:
            parse_config(config)
        except ConfigError:
            del node["pinnedCellId"]
            del config["virtualClusters"][vcs[0]]["pinnedCells"]
    if draw(st.booleans()):  # a pinned id no VC lists: an ordinary cell for everyone
        node = physical[-1]
        while "cellChildren" in node and "cellAddress" not in node:
            node = node["cellChildren"][-1]
        node.setdefault("pinnedCellId", "SPARE")
    for _ in range(draw(st.integers(1, 8))):
        vc = draw(st.sampled_from(vcs))
        path = draw(st.sampled_from(paths))
        depth = draw(st.integers(1, len(path)))
        entry = {"cellType": ".".join(path[:depth]), "cellNumber": draw(st.integers(1, 2))}
        config["virtualClusters"][vc]["virtualCells"].append(entry)
        try:
            parse_config(config)
        except ConfigError:
            config["virtualClusters"][vc]["virtualCells"].pop()
    return parse_config(config)


OPS = st.lists(
    st.tuples(
        st.sampled_from(
            ["allocate", "allocate", "allocate", "allocate", "release", "set_bad", "set_healthy"]
        ),
        st.integers(0, 1 << 20),
        st.integers(0, 1 << 20),
    ),
    max_size=30,
)


def _state(a: CellAllocator):
    return (
        a.jobs(),
        {j: dict(a.placement_of(j)) for j in a.jobs()},
        a.free_list_cells(),
        a.free_gpus(),
    )


def _gpus_once(a: CellAllocator) -> None:
    seen = set()
    for job in a.jobs():
        for node, gpus in a.placement_of(job).items():
            for g in gpus:
                assert (node, g) not in seen, f"{node} GPU {g} held twice"
                seen.add((node, g))


def _probe_shape(a: CellAllocator, chain: str, level: int) -> tuple[PodSpec, ...]:
    info = a.topology.chains[chain]
    cell_gpus = a.config.leaf_count(info.type_at[level])
    if level <= info.node_level:
        return (PodSpec(cell_gpus),)
    node_gpus = a.config.leaf_count(info.type_at[info.node_level])
    return (PodSpec(node_gpus, cell_gpus // node_gpus),)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), OPS)
def test_random_sequences_keep_every_invariant(config, ops):
    a = CellAllocator(config)
    initial_free_lists = a.free_list_cells()
    initial_free_cells = a.free_cells()
    vcs = list(config.virtual_clusters)
    nodes = [name for name, _ in config.nodes()]
    max_gpus = max(g for _, g in config.nodes())
    bad: set[str] = set()
    serial = 0
    for op, x, y in ops:
        if op == "allocate":
            serial += 1
            vc = vcs[x % len(vcs)]
            pinned = "PIN" if y % 7 == 0 and "PIN" in config.virtual_clusters[vc].pinned else None
            priority = (-1, 0, 1, 2, 5)[x // 7 % 5] if pinned is None else (0, 1, 2)[x // 7 % 3]
            pods = (PodSpec(1 + y % max_gpus, 1 + y // 11 % 2),)
            request = Request(
                f"j{serial}",
                pods,
                vc=vc,
                priority=priority,
                pinned=pinned,
                lazy_preempt=bool(y & 64),
            )
            before = _state(a)
            result = a.allocate(request)
            if result.outcome == "placed":
                placed = result.by_node()
                assert sum(len(g) for g in placed.values()) == request.total_gpus
                assert not set(placed) & bad, "a new job landed on a bad node"
                for victim in result.preempted + result.downgraded:
                    assert a.jobs().get(victim, -1) == -1  # gone, or running as opportunistic
            else:
                assert _state(a) == before, f"a {result.outcome} result changed the state"
        elif op == "release" and a.jobs():
            a.release(sorted(a.jobs())[x % len(a.jobs())])
        elif op == "set_bad":
            bad.add(nodes[x % len(nodes)])
            a.set_bad(nodes[x % len(nodes)])
        elif op == "set_healthy":
            bad.discard(nodes[x % len(nodes)])
            a.set_healthy(nodes[x % len(nodes)])
        assert a.audit() == []
        _gpus_once(a)

    for node in nodes:
        a.set_healthy(node)
    for vc_name, vc in config.virtual_clusters.items():
        promised = {(c.chain, config.level(c.cell_type)) for c in vc.cells if c.count}
        for chain, level in sorted(promised):
            probe = Request(
                "probe",
                _probe_shape(a, chain, level),
                vc=vc_name,
                priority=1000,
                sku=a.topology.chains[chain].leaf_type,
            )
            result = a.allocate(probe)
            assert result.outcome == "placed", (
                f"{vc_name} cannot obtain its {chain} level-{level} cell: {result.reason}"
            )
            a.release("probe")
            assert a.audit() == []

    for job in list(a.jobs()):
        a.release(job)
    assert a.free_list_cells() == initial_free_lists
    assert a.free_cells() == initial_free_cells
    assert a.free_gpus() == sum(g for _, g in config.nodes())


@settings(max_examples=30, deadline=None)
@given(clusters(), OPS)
def test_same_inputs_same_placements(config, ops):
    results = []
    for _ in range(2):
        a = CellAllocator(config)
        vcs = list(config.virtual_clusters)
        out = []
        for i, (op, x, y) in enumerate(ops):
            if op == "allocate":
                request = Request(
                    f"j{i}", (PodSpec(1 + y % 4),), vc=vcs[x % len(vcs)], priority=(-1, 0, 3)[x % 3]
                )
                out.append(a.allocate(request))
            elif op == "release" and a.jobs():
                a.release(sorted(a.jobs())[x % len(a.jobs())])
        results.append(out)
    assert results[0] == results[1]
