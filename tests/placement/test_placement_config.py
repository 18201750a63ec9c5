"""HiveD configs: every upstream example loads unchanged; every broken one fails in one line."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from placement import CellAllocator, load_config
from placement.errors import ConfigError

CONFIGS = Path(__file__).parent / "configs"
EXAMPLES = sorted((CONFIGS / "hived-examples").glob("*.yaml"))
DESIGN = CONFIGS / "hived-examples" / "design-hivedscheduler.yaml"


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_hived_example_loads_and_builds(path):
    config = load_config(path)
    allocator = CellAllocator(config)
    assert allocator.audit() == []
    assert sum(n.gpus for n in allocator.nodes()) == sum(g for _, g in config.nodes())


def test_design_config_structure_matches_hived():
    config = load_config(DESIGN)
    assert config.chains() == (
        "CT1-NODE",
        "3-DGX1-P100-NODE",
        "DGX2-V100-NODE",
        "3-DGX2-V100-NODE",
        "4-DGX2-V100-NODE",
        "2-IB-DGX2-V100-NODE",
    )
    nodes = dict(config.nodes())
    assert nodes["1.0.0.2"] == 10  # a CT1 node (GPUs 8, 9) and a DGX1 node (GPUs 0-7)
    assert len(nodes) == 20
    assert config.level("4-DGX2-V100-NODE") == 7 and config.level("DGX2-V100") == 1
    vc1 = config.virtual_clusters["VC1"]
    assert vc1.pinned == ("VC1-YQW-CT1", "VC1-YQW-DGX2", "VC1-YQW-IB-DGX2")
    assert [(c.chain, c.cell_type, c.count) for c in vc1.cells][3] == (
        "4-DGX2-V100-NODE",
        "2-DGX2-V100-NODE",
        1,
    )


def test_design_gpu_indices_follow_explicit_addresses():
    allocator = CellAllocator(DESIGN)
    nodes = {n.name: n for n in allocator.nodes()}
    assert nodes["1.0.0.2"].free == (0, 1, 2, 3, 4, 5, 6, 7, 8, 9)
    # 1.0.0.0 lists its GPUs out of order: switches {1,3},{4,7},{0,2},{6,5}
    assert allocator.enclosing_types({"1.0.0.0": [1, 3]})[0] == "DGX1-P100-PCI-SWITCH"
    assert allocator.enclosing_types({"1.0.0.0": [1, 4]})[0] == "DGX1-P100-CPU-SOCKET"
    assert allocator.enclosing_types({"1.0.0.0": [1, 0]})[0] == "DGX1-P100-NODE"


def test_design_free_lists_after_start():
    """The pinned cells are cut out at once (../shared/notes/hived.md §10.A, as sets)."""
    free = CellAllocator(DESIGN).free_list_cells()
    assert free["CT1-NODE"] == {1: ("1.0.0.2/9",), 2: ("0.0.0.0", "0.0.0.1")}
    assert free["DGX2-V100-NODE"] == {5: ("0.0.1.0", "0.0.5.0")}
    assert free["4-DGX2-V100-NODE"] == {6: ("7/15",), 7: ("8",)}
    assert free["2-IB-DGX2-V100-NODE"] == {}


def _design():
    return yaml.safe_load(DESIGN.read_text())


def _mutate(fn):
    data = copy.deepcopy(_design())
    fn(data)
    return data


def _set(path, value):
    def fn(data):
        node = data
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return fn


BROKEN = [
    (
        "unknown cell type",
        _set(["physicalCluster", "physicalCells", 0, "cellType"], "NOPE"),
        "physicalCluster.physicalCells[0].cellType: unknown cell type 'NOPE'",
    ),
    (
        "cycle",
        _set(
            ["physicalCluster", "cellTypes", "DGX1-P100-PCI-SWITCH", "childCellType"],
            "3-DGX1-P100-NODE",
        ),
        "cycle",
    ),
    (
        "no node level",
        _set(["physicalCluster", "cellTypes", "CT1-NODE", "isNodeLevel"], False),
        "physicalCluster.physicalCells[0].cellType: CT1-NODE has no node level",
    ),
    (
        "two node levels",
        _set(["physicalCluster", "cellTypes", "DGX1-P100-CPU-SOCKET", "isNodeLevel"], True),
        "has more than one node level",
    ),
    (
        "bad child number",
        _set(["physicalCluster", "cellTypes", "CT1-NODE", "childCellNumber"], 0),
        "physicalCluster.cellTypes.CT1-NODE.childCellNumber: must be an integer > 0",
    ),
    (
        "typo in a key",
        _set(["physicalCluster", "cellTypes", "CT1-NODE", "childCellNumer"], 2),
        "physicalCluster.cellTypes.CT1-NODE.childCellNumer: unknown key",
    ),
    (
        "missing node name",
        _set(["physicalCluster", "physicalCells", 0, "cellAddress"], None),
        "physicalCluster.physicalCells[0].cellAddress: required for node-level cell CT1-NODE",
    ),
    (
        "duplicate node",
        _set(["physicalCluster", "physicalCells", 1, "cellAddress"], "0.0.0.0"),
        "physicalCluster.physicalCells[1].cellAddress: duplicate node name '0.0.0.0'",
    ),
    (
        "wrong number of children",
        _set(["physicalCluster", "physicalCells", 2, "cellChildren"], [{"cellAddress": 8}]),
        "physicalCluster.physicalCells[2].cellChildren: CT1-NODE has childCellNumber 2 but 1 "
        "children are listed",
    ),
    (
        "duplicate GPU index",
        _set(["physicalCluster", "physicalCells", 2, "cellChildren", 1, "cellAddress"], 8),
        "duplicate GPU index 8 on node 1.0.0.2",
    ),
    (
        "VC path off the hierarchy",
        _set(["virtualClusters", "VC2", "virtualCells", 0, "cellType"], "3-DGX1-P100-NODE.CT1"),
        "virtualClusters.VC2.virtualCells[0].cellType: 'CT1' in '3-DGX1-P100-NODE.CT1': not the "
        "child type of 3-DGX1-P100-NODE",
    ),
    (
        "VC chain unknown",
        _set(["virtualClusters", "VC2", "virtualCells", 0, "cellType"], "K80-NODE"),
        "virtualClusters.VC2.virtualCells[0].cellType: 'K80-NODE': unknown cell type",
    ),
    (
        "VC chain not top level",
        _set(["virtualClusters", "VC2", "virtualCells", 0, "cellType"], "DGX1-P100-NODE"),
        "'DGX1-P100-NODE': not the type of any top-level physical cell",
    ),
    (
        "unknown pinned id",
        _set(["virtualClusters", "VC2", "pinnedCells"], [{"pinnedCellId": "X"}]),
        "virtualClusters.VC2.pinnedCells[0].pinnedCellId: no physical cell has pinnedCellId 'X'",
    ),
    (
        "pinned id twice",
        _set(["virtualClusters", "VC2", "pinnedCells"], [{"pinnedCellId": "VC1-YQW-CT1"}]),
        "pinned cell 'VC1-YQW-CT1' is already used by VC1",
    ),
    (
        "VC promised too much",
        _set(["virtualClusters", "VC2", "virtualCells", 0, "cellNumber"], 4),
        "virtualClusters: insufficient physical cells at chain 3-DGX1-P100-NODE level 4 "
        "(DGX1-P100-NODE): 4 needed, 3 available",
    ),
]


@pytest.mark.parametrize("fn, message", [(b[1], b[2]) for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_broken_configs_fail_in_one_line_naming_the_key(fn, message):
    with pytest.raises(ConfigError) as info:
        load_config(_mutate(fn))
    text = str(info.value)
    assert message in text
    assert "\n" not in text


def test_upstream_suite7_invalid_assignment():
    with pytest.raises(ConfigError) as info:
        load_config(CONFIGS / "design-suite7-invalid.yaml")
    assert str(info.value) == (
        "virtualClusters: insufficient physical cells at chain CT1-NODE level 1 (CT1): 3 needed, "
        "0 available"
    )
    assert info.value.source.endswith("design-suite7-invalid.yaml")


def test_unreadable_and_malformed_files(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("physicalCluster:\n  cellTypes: [\n")
    with pytest.raises(ConfigError) as info:
        load_config(bad)
    assert info.value.line is not None and "not valid YAML" in str(info.value)


def test_sku_types_and_service_keys_are_ignored():
    data = _design()
    data["physicalCluster"]["skuTypes"] = {"CT1": {"gpu": 1, "cpu": 4, "memory": "8Gi"}}
    data["webServerAddress"] = ":30096"
    assert load_config(data).chains()[0] == "CT1-NODE"


@pytest.mark.parametrize("source, kind", [(None, "NoneType"), (3, "int"), (b"a.yaml", "bytes")])
def test_a_config_that_is_no_path_nor_mapping_is_a_config_error(source, kind):
    # Before: CellAllocator(None) was pathlib's TypeError ("expected str, bytes or os.PathLike").
    with pytest.raises(ConfigError) as caught:
        CellAllocator(source)
    assert str(caught.value) == f"expected a YAML file's path or a parsed mapping, got {kind}"
