"""Work-preserving restart (HiveD upstream suite 6, ../shared/notes/hived.md §8 and §10.A):
``CellAllocator.restart`` builds an allocator on a changed config and re-adds the jobs that kept
running (``reserve(restart=True)``); jobs that can no longer be in their VC's cells are lazily
preempted, and so are the jobs of a cell a later job of the same VC takes back."""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from test_placement_properties import OPS, clusters

from placement import CellAllocator, PodSpec, Request, RunningJob, load_scenario
from placement.config import parse_config

HERE = Path(__file__).parent
DESIGN = HERE / "configs" / "hived-examples" / "design-hivedscheduler.yaml"


def _suite1_until_u13() -> tuple[CellAllocator, list[RunningJob]]:
    """U1-U13 of suite 1 (the scenario file's requests), and the jobs running afterwards as their
    bind annotations describe them: the request they were placed with (pod24 at priority 0,
    although U13 lazily preempted it) and the cell type of each GPU when they were placed."""
    scenario = load_scenario(HERE / "scenarios" / "hived-suite1-normal.yaml")
    allocator = CellAllocator(scenario.config)
    placed: dict[str, tuple[Request, dict]] = {}
    for step in scenario.steps:
        if step.op != "allocate":
            continue
        result = allocator.allocate(step.request)
        assert result.outcome == step.expect["outcome"], (step.job, result.reason)
        if result.outcome == "placed":
            placed[step.job] = (step.request, allocator.cell_types_of(step.job))
        if step.job == "pod25":
            break
    running = [
        RunningJob(request, dict(allocator.placement_of(job)), types)
        for job, (request, types) in placed.items()
        if job in allocator.jobs()
    ]
    return allocator, running


def _reconfigured() -> dict:
    """The config change of upstream's ``testReconfiguration``."""
    raw = yaml.safe_load(DESIGN.read_text())
    physical = raw["physicalCluster"]
    # shorter chains: a DGX2 node holds its 16 GPUs directly
    physical["cellTypes"]["DGX2-V100-NODE"] = {
        "childCellType": "DGX2-V100",
        "childCellNumber": 16,
        "isNodeLevel": True,
    }
    # a node renamed: the GPUs of the old name no longer exist
    physical["physicalCells"][7]["cellChildren"][0]["cellChildren"][0]["cellAddress"] = "0.0.3.100"
    # VC2 keeps one DGX1-P100 node instead of two
    raw["virtualClusters"]["VC2"]["virtualCells"][0]["cellNumber"] = 1
    # cell#8's nodes become top-level nodes of chain DGX2-V100-NODE; a renamed copy keeps the rack
    rack = physical["physicalCells"][8]
    nodes = [node for half in rack["cellChildren"] for node in half["cellChildren"]]
    physical["physicalCells"][8] = {"cellType": "DGX2-V100-NODE", **copy.deepcopy(nodes[0])}
    physical["physicalCells"] += [
        {"cellType": "DGX2-V100-NODE", **copy.deepcopy(n)} for n in nodes[1:]
    ]
    renamed = copy.deepcopy(rack)
    for i, node in enumerate(n for half in renamed["cellChildren"] for n in half["cellChildren"]):
        node["cellAddress"] = f"0.0.4.10{i}"
    physical["physicalCells"].append(renamed)
    return raw


def test_upstream_suite6_work_preserving_reconfiguration():
    before, running = _suite1_until_u13()
    config = parse_config(_reconfigured())
    allocator, results = CellAllocator.restart(config, running)

    assert all(r.outcome == "placed" for r in results.values())
    lazily_preempted = {job for job, priority in allocator.jobs().items() if priority == -1}
    opportunistic = {"pod4", "group14"}  # placed at priority -1: no VC placement to lose
    # group8 (pod8/pod9): VC2 now has one DGX1 node, its two pods need two.
    # group13 (pod20/pod21): its nodes are now in chain DGX2-V100-NODE, where VC1's one free
    #   node cell cannot hold both pods, and pod1-3's node outranks it (priority 2 > 1).
    # pod24: pod25 (priority 1) takes back VC2's only CT1 node cell, which pod24 (0) held.
    assert lazily_preempted - opportunistic == {"group8", "group13", "pod24"}
    assert results["group8"].downgraded == ("group8",) and "VC VC2" in results["group8"].reason
    assert results["group13"].downgraded == ("group13",)
    assert results["pod25"].downgraded == ("pod24",)
    assert allocator.placement_of("pod24") == before.placement_of("pod24")

    # the others keep their VC placements (group11 minus the GPUs of renamed node 0.0.3.0)
    for job in ("pod1", "pod2", "pod3", "group12", "pod25"):
        assert allocator.jobs()[job] == before.jobs()[job] >= 0
        assert allocator.placement_of(job) == before.placement_of(job)
        assert allocator.cell_types_of(job) == before.cell_types_of(job)
    assert allocator.jobs()["group11"] == 2
    assert allocator.placement_of("group11") == {"0.0.3.1": tuple(range(16))}
    assert set(allocator.cell_types_of("group11")["0.0.3.1"].values()) == {"2-DGX2-V100-NODE"}
    assert allocator.audit() == []

    fresh = CellAllocator(config)
    for job in reversed(list(allocator.jobs())):
        allocator.release(job)
        assert allocator.audit() == []
    assert allocator.jobs() == {}
    assert allocator.free_list_cells() == fresh.free_list_cells()
    assert allocator.free_cells() == fresh.free_cells()


RACK = {
    "physicalCluster": {
        "cellTypes": {
            "NODE": {"childCellType": "GPU", "childCellNumber": 4, "isNodeLevel": True},
            "RACK": {"childCellType": "NODE", "childCellNumber": 4},
        },
        "physicalCells": [
            {"cellType": "RACK", "cellChildren": [{"cellAddress": f"n{i}"} for i in range(4)]}
        ],
    },
    "virtualClusters": {
        "a": {"virtualCells": [{"cellType": "RACK.NODE", "cellNumber": 1}]},
        "b": {"virtualCells": [{"cellType": "RACK.NODE", "cellNumber": 1}]},
    },
}


def _job(name: str, vc: str, priority: int, placement: dict, *, typed: bool = True) -> RunningJob:
    request = Request(name, (PodSpec(4, len(placement)),), vc=vc, priority=priority)
    types = {n: {g: "NODE" for g in gpus} for n, gpus in placement.items()} if typed else None
    return RunningJob(request, placement, types)


def test_a_cell_is_taken_back_only_from_lower_priority_jobs_and_only_if_it_helps():
    full = {"n0": (0, 1, 2, 3)}
    # c (priority 1) takes back vc a's only node cell from j (0): j is lazily preempted
    allocator, results = CellAllocator.restart(
        RACK, [_job("j", "a", 0, full), _job("c", "a", 1, {"n1": (0, 1, 2, 3)})]
    )
    assert results["c"].downgraded == ("j",) and allocator.jobs() == {"j": -1, "c": 1}
    # d has the same priority as j: nothing is taken back, d is lazily preempted
    allocator, results = CellAllocator.restart(
        RACK, [_job("j", "a", 0, full), _job("d", "a", 0, {"n1": (0, 1, 2, 3)})]
    )
    assert results["d"].downgraded == ("d",) and allocator.jobs() == {"j": 0, "d": -1}
    # g needs two node cells of vc a, which has one: taking j's back would not help, so j keeps it
    gang = {"n1": (0, 1, 2, 3), "n2": (0, 1, 2, 3)}
    allocator, results = CellAllocator.restart(
        RACK, [_job("j", "a", 0, full), _job("g", "a", 1, gang)]
    )
    assert results["g"].downgraded == ("g",) and allocator.jobs() == {"j": 0, "g": -1}
    assert allocator.audit() == []
    # without cell types, a job maps into any cell of its VC but takes nothing back
    allocator, results = CellAllocator.restart(
        RACK, [_job("j", "a", 0, full), _job("u", "a", 1, {"n1": (0, 1, 2, 3)}, typed=False)]
    )
    assert allocator.jobs() == {"j": 0, "u": -1}


def test_restart_ignores_missing_gpus_and_keeps_jobs_it_cannot_map_running():
    running = [
        _job("gone", "a", 0, {"n9": (0,)}),
        _job("part", "a", 0, {"n0": (2, 3, 7), "n9": (1,)}),
        _job("novc", "zz", 0, {"n1": (0,)}),
        _job("other", "b", 0, {"n0": (0,)}),  # n0 is vc a's cell now
        _job("opp", "a", -1, {"n2": (0, 1)}),
    ]
    allocator, results = CellAllocator.restart(RACK, running)
    assert results["gone"].outcome == "error"
    assert allocator.placement_of("part") == {"n0": (2, 3)} and allocator.jobs()["part"] == 0
    assert (
        results["novc"].downgraded == ("novc",) and "VC zz does not exist" in results["novc"].reason
    )
    assert (
        results["other"].downgraded == ("other",)
        and "lies in VC a's cells" in results["other"].reason
    )
    assert results["opp"].downgraded == () and allocator.jobs()["opp"] == -1
    assert allocator.audit() == []
    clash = allocator.reserve(Request("x", (PodSpec(1),), vc="a"), {"n0": (2,)}, restart=True)
    assert clash.outcome == "error" and clash.reason == "GPU 2 of node n0 is held by job part"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), OPS)
def test_restart_on_the_same_config_keeps_every_job_where_it_was(config, ops):
    before = CellAllocator(config)
    vcs = list(config.virtual_clusters)
    max_gpus = max(g for _, g in config.nodes())
    requests = {}
    for i, (op, x, y) in enumerate(ops):
        if op == "release" and before.jobs():
            before.release(sorted(before.jobs())[x % len(before.jobs())])
        elif op != "release":
            request = Request(
                f"j{i}",
                (PodSpec(1 + y % max_gpus, 1 + y // 11 % 2),),
                vc=vcs[x % len(vcs)],
                priority=(-1, 0, 1, 3)[x // 7 % 4],
                lazy_preempt=bool(y & 64),
            )
            if before.allocate(request).outcome == "placed":
                requests[request.job] = request
    running = [
        RunningJob(
            replace(requests[job], priority=priority),
            dict(before.placement_of(job)),
            before.cell_types_of(job),
        )
        for job, priority in before.jobs().items()
    ]
    after, results = CellAllocator.restart(config, running)
    assert all(r.outcome == "placed" and r.downgraded == () for r in results.values())
    assert after.jobs() == before.jobs()
    assert {j: after.placement_of(j) for j in after.jobs()} == {
        j: before.placement_of(j) for j in before.jobs()
    }
    assert after.free_list_cells() == before.free_list_cells()
    assert after.audit() == []
