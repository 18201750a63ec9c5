"""CellAllocator through its public API: the Allocator protocol, health, doomed cells, options."""

from __future__ import annotations

from pathlib import Path

import pytest

from placement import CellAllocator, PodSpec, Request
from placement.batch import round_up

CONFIGS = Path(__file__).parent / "configs"
RACKS = CONFIGS / "rack-2x2.yaml"
DESIGN = CONFIGS / "hived-examples" / "design-hivedscheduler.yaml"


def req(job, gpus=1, count=1, **kw) -> Request:
    return Request(job, (PodSpec(gpus, count),), **kw)


def test_protocol_methods_and_cluster_size():
    a = CellAllocator(RACKS)
    assert [(n.name, n.gpus) for n in a.nodes()] == [("n0", 8), ("n1", 8), ("n2", 8), ("n3", 8)]
    assert a.config.nodes() == (("n0", 8), ("n1", 8), ("n2", 8), ("n3", 8))
    assert a.free_gpus() == 32
    result = a.allocate(req("j", 2, vc="vcA"))
    assert result.outcome == "placed"
    assert a.placement_of("j") == {"n0": (0, 1)}
    assert a.free_gpus() == 30 and a.jobs() == {"j": 0}
    a.set_bad("n1")
    assert a.free_gpus() == 22
    a.set_healthy("n1")
    a.release("j")
    a.release("j")  # releasing an unknown job is a no-op
    assert a.placement_of("j") == {} and a.free_gpus() == 32
    with pytest.raises(KeyError):
        a.set_bad("n9")


def test_nothing_new_lands_on_bad_nodes_running_jobs_stay():
    a = CellAllocator(RACKS)
    a.allocate(req("j", 4, vc="vcA"))
    a.set_bad("n0")
    assert a.placement_of("j") == {"n0": (0, 1, 2, 3)}
    assert a.placement_of("j") and a.allocate(req("k", 4, vc="vcA")).by_node().keys() == {"n1"}
    a.set_bad("n1")
    wait = a.allocate(req("m", 1, vc="vcA"))
    assert wait.outcome == "wait" and "bad nodes" in wait.reason
    opportunistic = a.allocate(req("o", 8, vc="vcA", priority=-1))
    assert set(opportunistic.by_node()) <= {"n2", "n3"}


def test_multi_gpu_type_node_goes_bad_in_every_chain():
    a = CellAllocator(DESIGN)
    a.set_bad("1.0.0.2")
    assert (
        a.allocate(
            req("c", 1, vc="VC1", priority=-1, sku="CT1", nodes=frozenset({"1.0.0.2"}))
        ).outcome
        == "wait"
    )
    assert (
        a.allocate(
            req("p", 1, vc="VC2", priority=-1, sku="DGX1-P100", nodes=frozenset({"1.0.0.2"}))
        ).outcome
        == "wait"
    )
    a.set_healthy("1.0.0.2")
    placed = a.allocate(
        req("p", 1, vc="VC2", priority=-1, sku="DGX1-P100", nodes=frozenset({"1.0.0.2"}))
    )
    assert placed.by_node() == {"1.0.0.2": (0,)}


def test_doomed_cells_follow_upstream_suite4():
    """HiveD's B1-B7 (../shared/notes/hived.md §10.A suite 4). Unlike HiveD's per-VC check the
    count is shared: two VCs needing one healthy node each, with one left, is one doomed cell."""
    a = CellAllocator(CONFIGS / "design-suite4.yaml")
    node = "DGX2-V100-NODE"
    only = frozenset({"0.0.2.0"})
    assert a.allocate(req("pod42", 16, vc="VC1", sku="DGX2-V100", nodes=only)).outcome == "placed"
    assert a.doomed_cells() == {}
    a.set_bad("0.0.2.1")
    assert a.doomed_cells() == {"VC2": {node: 1}}  # HiveD: none (pitfall §11.2)
    a.allocate(req("pod43", 16, vc="VC2", sku="DGX2-V100", nodes=frozenset({"0.0.2.2"})))
    assert a.doomed_cells() == {"VC1": {node: 1}}
    a.release("pod43")
    assert "VC1" not in a.doomed_cells()
    a.set_bad("0.0.2.2")
    assert a.doomed_cells() == {"VC1": {node: 1}, "VC2": {node: 1}}
    a.set_healthy("0.0.2.2")
    assert sum(n for per in a.doomed_cells().values() for n in per.values()) == 1
    a.set_bad("0.0.2.0")
    a.set_bad("0.0.2.2")
    a.release("pod42")
    assert a.doomed_cells() == {"VC1": {node: 2}, "VC2": {node: 1}}
    a.set_healthy("0.0.2.0")
    a.set_healthy("0.0.2.1")
    a.set_healthy("0.0.2.2")
    assert a.doomed_cells() == {}


def test_doomed_rack_recovering_in_use_is_not_leaked():
    """HiveD's X7a: the rack must come back whole and the next request must be placed."""
    a = CellAllocator(RACKS)
    a.set_bad("n1")
    assert a.doomed_cells() == {"vcB": {"V100-RACK": 1}}
    assert a.allocate(req("b1", 8, 2, vc="vcB")).by_node().keys() == {"n2", "n3"}
    assert a.doomed_cells() == {"vcA": {"V100-RACK": 1}}
    assert a.allocate(req("a1", 8, vc="vcA")).by_node().keys() == {"n0"}
    a.set_healthy("n1")
    a.release("a1")
    assert a.doomed_cells() == {}
    assert a.free_list_cells()["V100-RACK"] == {5: ("r0",)}
    assert a.allocate(req("a2", 8, 2, vc="vcA")).by_node().keys() == {"n0", "n1"}
    assert a.audit() == []


def test_round_up_reserves_whole_sockets():
    a = CellAllocator(RACKS, round_up=round_up)
    assert a.allocate(req("three", 3, vc="vcA")).by_node() == {"n0": (0, 1, 2, 3)}
    assert a.allocate(req("five", 5, vc="vcA")).by_node() == {"n1": tuple(range(8))}


def test_preempt_false_waits_and_changes_nothing():
    a = CellAllocator(RACKS)
    a.allocate(req("low", 8, 2, vc="vcA", priority=0))
    before = (a.jobs(), a.free_list_cells())
    assert a.allocate(req("high", 8, vc="vcA", priority=5), preempt=False).outcome == "wait"
    assert (a.jobs(), a.free_list_cells()) == before
    assert a.allocate(req("high", 8, vc="vcA", priority=5)).preempted == ("low",)


def test_gang_spreads_over_bound_and_new_cells():
    """vcA's node and vcB's sockets are small cells; a gang uses several of them at once."""
    a = CellAllocator(CONFIGS / "rack-mixed.yaml")
    result = a.allocate(req("b", 4, 2, vc="vcB"))
    assert result.outcome == "placed"
    assert all(a.enclosing_types({p.node: p.gpus})[0] == "V100-SOCKET" for p in result.pods)
    assert a.allocate(req("b2", 1, vc="vcB")).outcome == "wait"
    assert a.allocate(req("c", 8, 3, vc="vcC")).outcome == "wait"  # a rack has two nodes
    assert a.audit() == []


@pytest.mark.parametrize("nodes", [None, frozenset({"n0"})])
def test_gang_uses_a_bound_cell_and_a_new_one_together(nodes):
    """vcB holds one socket with 3 free GPUs; a {4, 3} gang takes a new socket for the 4-GPU pod
    and the 3 free GPUs for the other (with or without a node restriction)."""
    a = CellAllocator(CONFIGS / "rack-mixed.yaml")
    assert a.allocate(req("b1", 1, vc="vcB")).by_node() == {"n0": (0,)}
    gang = Request("b2", (PodSpec(4), PodSpec(3)), vc="vcB", nodes=nodes)
    result = a.allocate(gang, preempt=False)  # found without the eviction passes
    assert [p.gpus for p in result.pods] == [(4, 5, 6, 7), (1, 2, 3)]
    assert a.audit() == []


def test_invalid_requests_are_errors_that_change_nothing():
    a = CellAllocator(DESIGN)
    a.allocate(req("x", 1, vc="VC1", sku="DGX2-V100"))
    cases = {
        "x": req("x", 1, vc="VC1"),
        "no-gpus": req("no-gpus", 0, vc="VC1"),
        "sku": req("sku", 1, vc="VC1", sku="H100"),
        "node": req("node", 1, vc="VC1", nodes=frozenset({"nope"})),
        "vc": req("vc", 1, vc="VC9"),
        "prio": req("prio", 1, vc="VC1", priority=-2),
        "pin-opp": req("pin-opp", 1, vc="VC1", priority=-1, pinned="VC1-YQW-CT1"),
        "pin-sku": req("pin-sku", 1, vc="VC1", pinned="VC1-YQW-CT1", sku="DGX2-V100"),
    }
    before = (a.jobs(), a.free_list_cells(), a.free_gpus())
    for name, request in cases.items():
        result = a.allocate(request)
        assert result.outcome == "error" and result.reason, name
    assert (a.jobs(), a.free_list_cells(), a.free_gpus()) == before
