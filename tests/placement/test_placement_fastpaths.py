"""The shortcuts (for one pod: ``FastPath.held``, a node the VC holds; ``FastPath.new_cell``, a
newly bound cell; the opportunistic node index; for opportunistic gangs: pruning cells by their
idle-node counters) must choose exactly what the general planner chooses. Each random sequence
runs on two allocators, one that never takes the shortcuts, and every result and the free lists
must agree after every step."""

from __future__ import annotations

import random
from dataclasses import replace
from unittest import mock

from hypothesis import HealthCheck, given, settings
from test_placement_properties import OPS, clusters

import placement.planner
from placement import CellAllocator, PodSpec, Request
from placement.packing import containers


def _general_only(a: CellAllocator) -> CellAllocator:
    """An allocator whose guaranteed one-pod requests take the general path (no VC has
    fast-path buckets); opportunistic ones do when they name every node as allowed, which makes
    the planner scan the nodes instead of asking its index."""
    a._fast_buckets = lambda tenant, sku: []
    return a


def _unpruned(roots, total, usable_count, cell_count=None, idle_nodes=0):
    return containers(roots, total, usable_count, cell_count)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), OPS)
def test_shortcuts_choose_what_the_general_planner_chooses(config, ops):
    fast, general = CellAllocator(config), _general_only(CellAllocator(config))
    vcs = list(config.virtual_clusters)
    nodes = [name for name, _ in config.nodes()]
    everywhere = frozenset(nodes)
    max_gpus = max(g for _, g in config.nodes())
    for i, (op, x, y) in enumerate(ops):
        if op == "allocate":
            priority = (-1, 0, 0, 1, 3)[x // 7 % 5]
            pods = (PodSpec(1 + y % max_gpus, 1 + y // 11 % 2 * (x % 3)),)
            request = Request(
                f"j{i}", pods, vc=vcs[x % len(vcs)], priority=priority, lazy_preempt=bool(y & 64)
            )
            scan = replace(request, nodes=everywhere) if priority < 0 else request
            got = fast.allocate(request)
            with mock.patch.object(placement.planner, "containers", _unpruned):
                assert got == general.allocate(scan)
        elif op == "release" and fast.jobs():
            job = sorted(fast.jobs())[x % len(fast.jobs())]
            fast.release(job)
            general.release(job)
        elif op in ("set_bad", "set_healthy"):
            getattr(fast, op)(nodes[x % len(nodes)])
            getattr(general, op)(nodes[x % len(nodes)])
        assert fast.free_list_cells() == general.free_list_cells()
        assert fast.jobs() == general.jobs()
        assert fast.audit() == []


RACKS = {
    "physicalCluster": {
        "cellTypes": {
            "NODE": {"childCellType": "GPU", "childCellNumber": 4, "isNodeLevel": True},
            "RACK": {"childCellType": "NODE", "childCellNumber": 4},
            "ROW": {"childCellType": "RACK", "childCellNumber": 2},
        },
        "physicalCells": [
            {
                "cellType": "ROW",
                "cellChildren": [
                    {"cellChildren": [{"cellAddress": f"n{row}{rack}{node}"} for node in range(4)]}
                    for rack in range(2)
                ],
            }
            for row in range(2)
        ],
    },
    "virtualClusters": {
        "a": {"virtualCells": [{"cellType": "ROW.RACK.NODE", "cellNumber": 6}]},
        "b": {"virtualCells": [{"cellType": "ROW.RACK", "cellNumber": 1}]},
    },
}


def test_opportunistic_gangs_skip_only_cells_that_cannot_hold_them():
    """Busy racks and whole-node opportunistic gangs, where pruning by idle nodes matters."""
    rng = random.Random(3)
    fast, general = CellAllocator(RACKS), _general_only(CellAllocator(RACKS))
    everywhere = frozenset(name for name, _ in fast.config.nodes())
    for i in range(400):
        if fast.jobs() and rng.random() < 0.45:
            job = rng.choice(sorted(fast.jobs()))
            fast.release(job)
            general.release(job)
            continue
        priority = rng.choice([-1, -1, 0, 1])
        pods = (
            (PodSpec(4, rng.randint(1, 4)),)
            if rng.random() < 0.6
            else (PodSpec(rng.randint(1, 4), rng.randint(1, 3)),)
        )
        request = Request(f"j{i}", pods, vc=rng.choice("ab"), priority=priority)
        scan = replace(request, nodes=everywhere) if priority < 0 else request
        got = fast.allocate(request)
        with mock.patch.object(placement.planner, "containers", _unpruned):
            assert got == general.allocate(scan), i
        assert fast.free_list_cells() == general.free_list_cells()
    assert fast.audit() == []
