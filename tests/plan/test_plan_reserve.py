"""``reserve``: both allocators hold exactly the GPUs a restored running job has, keeping their
invariants; and HiveD clusters in a state file."""

from __future__ import annotations

import json
import random
import shutil

import pytest
from plan_helpers import REPO, base, write_state

from chronus_py.cli import main
from placement import CellAllocator, ConsolidatedAllocator, PodSpec, Request

CONFIGS = REPO / "tests" / "placement" / "configs"


def req(job: str, gpus: int, vc: str = "default", priority: int = 0) -> Request:
    return Request(job, (PodSpec(gpus),), vc=vc, priority=priority)


def test_consolidated_reserve_then_allocate_and_release():
    alloc = ConsolidatedAllocator([("a", 4), ("b", 4)])
    got = alloc.reserve(req("x", 3), {"a": [1, 3], "b": [0]})
    assert got.outcome == "placed" and got.by_node() == {"a": (1, 3), "b": (0,)}
    assert alloc.free_gpus() == 5
    assert alloc.reserve(req("y", 1), {"a": [1]}).reason == "GPU 1 of node a is not free"
    assert alloc.reserve(req("y", 1), {"c": [0]}).reason == "unknown node 'c'"
    assert alloc.reserve(req("y", 1), {"a": [4]}).reason == "node a has no GPU 4"
    assert alloc.reserve(req("y", 2), {"a": [0]}).reason == "placement holds 1 GPUs, the request 2"
    assert alloc.reserve(req("x", 1), {"a": [0]}).reason == "job x is already placed"
    # Best fit still sees the reserved GPUs: a 2-GPU job goes to a (2 free), not b (3 free).
    assert alloc.allocate(req("z", 2)).by_node() == {"a": (0, 2)}
    alloc.release("x")
    assert [n.free for n in alloc.nodes()] == [(1, 3), (0, 1, 2, 3)]


def test_consolidated_reserve_matches_allocate_bookkeeping():
    """Random reserves, allocations and releases: the free lists, totals and index agree with a
    twin that got the same GPUs through allocate."""
    rng = random.Random(7)
    nodes = [(f"n{i}", 8) for i in range(6)]
    twin, alloc = ConsolidatedAllocator(nodes), ConsolidatedAllocator(nodes)
    live = []
    for step in range(300):
        if live and rng.random() < 0.4:
            job = live.pop(rng.randrange(len(live)))
            twin.release(job)
            alloc.release(job)
            continue
        request = req(f"j{step}", rng.choice([1, 2, 4, 8]))
        placed = twin.allocate(request)
        if placed.outcome == "placed":
            assert alloc.reserve(request, placed.by_node()).outcome == "placed"
            live.append(request.job)
        assert alloc.nodes() == twin.nodes() and alloc.free_gpus() == twin.free_gpus()


def test_cell_reserve_binds_the_vcs_cells_and_keeps_them_safe():
    alloc = CellAllocator(CONFIGS / "rack-mixed.yaml")
    fresh = CellAllocator(CONFIGS / "rack-mixed.yaml").free_list_cells()
    # vcB is promised two sockets: each reservation binds the socket holding its GPUs.
    assert alloc.reserve(req("b1", 2, "vcB"), {"n1": [0, 1]}).outcome == "placed"
    assert alloc.reserve(req("b2", 4, "vcB"), {"n1": [4, 5, 6, 7]}).outcome == "placed"
    assert alloc.audit() == []
    outside = alloc.reserve(req("b3", 1, "vcB"), {"n1": [2]})
    assert outside.outcome == "placed"  # inside the first socket, already bound to vcB
    assert alloc.reserve(req("b4", 1, "vcB"), {"n2": [0]}).reason == (
        "GPU 0 of node n2 is outside VC vcB's cells and none of its promise can be bound there"
    )
    assert (
        alloc.reserve(req("a1", 8, "vcA"), {"n1": list(range(8))}).reason
        == "GPU 0 of node n1 is held by job b1"
    )
    assert (
        alloc.reserve(req("a1", 1, "vcA"), {"n1": [3]}).reason
        == "GPU 3 of node n1 lies in VC vcB's cells"
    )
    # vcC's rack must stay obtainable: vcA's node cannot be bound in r1 once vcB holds part of r0.
    assert alloc.reserve(req("a1", 1, "vcA"), {"n2": [0]}).reason == (
        "GPU 0 of node n2 is outside VC vcA's cells and none of its promise can be bound there"
    )
    assert alloc.reserve(req("a1", 2, "vcA"), {"n0": [6, 7]}).outcome == "placed"
    assert alloc.allocate(Request("c1", (PodSpec(8, 2),), vc="vcC")).outcome == "placed"
    assert alloc.audit() == []
    opportunistic = alloc.reserve(req("o1", 2, "vcA", priority=-1), {"n0": [0, 1]})
    assert opportunistic.outcome == "placed" and alloc.audit() == []
    for job in ("b1", "b2", "b3", "a1", "c1", "o1"):
        alloc.release(job)
    assert alloc.audit() == [] and alloc.free_list_cells() == fresh


def test_state_on_a_hived_cluster(tmp_path, capsys):
    shutil.copy(CONFIGS / "rack-2x2.yaml", tmp_path / "cluster.yaml")
    state = base()
    state["cluster"] = {"hived": "cluster.yaml"}
    state["running"][0].update(tenant="vcA", placement={"n0": [0, 1]})
    state["pending"][0].update(tenant="vcB", gpus=8)
    state["pending"][1].update(tenant="vcA")
    file = write_state(tmp_path, state)
    assert main(["plan", str(file)]) == 0
    decisions = {d["job"]: d for d in json.loads(capsys.readouterr().out)["decisions"]}
    assert decisions["a"]["placement"] == {"n0": [0, 1]}
    assert decisions["b"]["action"] == "start" and set(decisions["b"]["placement"]) <= {"n2", "n3"}
    assert decisions["c"]["action"] == "start" and set(decisions["c"]["placement"]) <= {"n0", "n1"}


@pytest.mark.parametrize(
    "change,message",
    [
        (
            lambda s: s["pending"][1].update(tenant="vcZ"),
            "pending[1].tenant: no virtual cluster 'vcZ' (have: vcA, vcB)",
        ),
        (
            lambda s: s["running"].append(
                {
                    "id": "r2",
                    "gpus": 1,
                    "submit": 0,
                    "tenant": "vcB",
                    "placement": {"n1": [0]},
                    "estimate_seconds": 100,
                }
            ),
            "running[1].placement: GPU 0 of node n1 lies in VC vcA's cells",
        ),
    ],
)
def test_hived_state_errors(tmp_path, capsys, change, message):
    shutil.copy(CONFIGS / "rack-2x2.yaml", tmp_path / "cluster.yaml")
    state = base()
    state["cluster"] = {"hived": "cluster.yaml"}
    state["running"][0].update(tenant="vcA", placement={"n0": [0, 1]})
    for job in state["pending"]:
        job["tenant"] = "vcA"
    change(state)
    file = write_state(tmp_path, state)
    assert main(["plan", str(file)]) == 2
    assert capsys.readouterr().err == f"chronus plan: {file}: {message}\n"


def test_hived_config_errors_name_the_config(tmp_path, capsys):
    (tmp_path / "cluster.yaml").write_text("physicalCluster: {}\n")
    state = base()
    state["cluster"] = {"hived": "cluster.yaml"}
    file = write_state(tmp_path, state)
    assert main(["plan", str(file)]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith(f"chronus plan: {tmp_path / 'cluster.yaml'}: physicalCluster.cellTypes")
        and err.count("\n") == 1
    )
    state["cluster"] = {"physicalCluster": {}}
    file = write_state(tmp_path, state)
    assert main(["plan", str(file)]) == 2
    assert capsys.readouterr().err.startswith(
        f"chronus plan: {file}: cluster.physicalCluster.cellTypes"
    )
