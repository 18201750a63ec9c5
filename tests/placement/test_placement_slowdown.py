"""The placement slowdown model: measured cross-node factors, stated intra-node assumptions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from placement import CellAllocator
from placement.slowdown import Penalties, model_table, node_factor, speed_factor

RACKS = CellAllocator(Path(__file__).parent / "configs" / "rack-2x2.yaml")


def test_shipped_table_is_the_artifacts_model_info():
    table = model_table()
    assert sorted(table) == ["alexnet", "inception_v3", "mobilenet_v2", "resnet101", "vgg16"]
    assert table["alexnet"]["2"]["2"] == pytest.approx(0.7450686884120468)
    shipped = Path(__file__).parents[2] / "placement" / "data" / "model_info.json"
    assert json.loads(shipped.read_text()) == table


def test_measured_points_and_interpolation():
    assert node_factor(8, 2, "vgg16") == pytest.approx(0.5724854767061701)
    assert node_factor(8, 4, "vgg16") == pytest.approx(0.2608913299672127)
    three = node_factor(8, 3, "vgg16")
    assert 0.2608913299672127 < three < 0.5724854767061701
    assert node_factor(8, 8, "vgg16") == pytest.approx(0.2608913299672127)  # held beyond the data
    assert node_factor(9, 2, "vgg16") == node_factor(8, 2, "vgg16")  # nearest measured GPU count
    assert node_factor(7, 2, "vgg16") == node_factor(6, 2, "vgg16")  # ties: the smaller count
    assert node_factor(2, 2, "inception_v3") == 1.0  # measured 1.0025: noise, capped
    assert node_factor(8, 1, "vgg16") == 1.0


def test_unknown_model_uses_the_geometric_mean_of_the_measured_ones():
    values = [per["8"]["2"] for per in model_table().values()]
    generic = node_factor(8, 2, "a-model-without-data")
    assert min(values) < generic < max(values)
    assert generic == node_factor(8, 2, None)


def test_more_nodes_are_never_faster():
    for model in [*model_table(), None]:
        for gpus in (2, 4, 8, 16):
            factors = [node_factor(gpus, n, model) for n in range(1, min(gpus, 8) + 1)]
            assert factors == sorted(factors, reverse=True), (model, gpus)


def test_intra_node_levels_with_a_cell_tree():
    p = Penalties()
    assert speed_factor({"n0": [3]}, topology=RACKS) == 1.0
    assert speed_factor({"n0": [0, 1]}, topology=RACKS) == 1.0
    assert speed_factor({"n0": [0, 2]}, topology=RACKS) == p.same_socket
    assert speed_factor({"n0": [0, 1, 2, 3, 4]}, topology=RACKS) == p.cross_socket
    assert speed_factor({"n0": [0, 4]}) == 1.0  # plain nodes: inside one node is all we know


def test_across_nodes_and_racks():
    same_rack = speed_factor({"n0": range(8), "n1": range(8)}, "resnet101", topology=RACKS)
    other_rack = speed_factor({"n0": range(8), "n2": range(8)}, "resnet101", topology=RACKS)
    assert same_rack == pytest.approx(node_factor(16, 2, "resnet101"))
    assert other_rack == pytest.approx(same_rack * Penalties().per_rack_level)
    plain = speed_factor({"a": [0, 1], "b": [0, 1]}, "alexnet")
    assert plain == pytest.approx(model_table()["alexnet"]["4"]["2"])
    custom = speed_factor({"n0": [0, 2]}, topology=RACKS, penalties=Penalties(same_socket=0.5))
    assert custom == 0.5
