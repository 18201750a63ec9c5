"""A HiveD cell tree on the kueue backend, without a cluster: which of its nodes placement may
use as Kubernetes has them now, and why a config that does not match is refused at start."""

from __future__ import annotations

import pytest

pytest.importorskip("lightkube")

from chronus_py.backends.base import NodeInfo  # noqa: E402
from chronus_py.backends.kueue.backend import _in_cells, topology_mismatch  # noqa: E402

CELLS = {"gpu-1": 4, "gpu-2": 4, "gpu-3": 4}


def test_cell_nodes_missing_shrunk_or_unhealthy_get_no_work():
    seen = [
        NodeInfo("gpu-1", tuple(range(8))),  # more GPUs than its cell: the cell's 4 are used
        NodeInfo("gpu-2", tuple(range(2))),
        NodeInfo("gpu-4", tuple(range(4))),  # outside the tree: not chronus's
    ]
    seen.append(NodeInfo("gpu-5", (0,), healthy=False, reason="cordoned"))
    got = {n.name: n for n in _in_cells(CELLS, seen)}
    assert list(got) == ["gpu-1", "gpu-2", "gpu-3"]
    assert all(len(n.gpus) == 4 for n in got.values())
    assert got["gpu-1"].healthy
    assert got["gpu-2"].reason == "has 2 GPUs, the config gives it 4"
    assert got["gpu-3"].reason.startswith("not in the cluster")
    cordoned = _in_cells({"gpu-5": 1}, seen)
    assert [(n.healthy, n.reason) for n in cordoned] == [(False, "cordoned")]


@pytest.mark.parametrize(
    "kube, why",
    [
        (dict(CELLS), None),
        ({"gpu-1": 4, "gpu-2": 4}, "nodes gpu-3 are not Kubernetes nodes"),
        ({**CELLS, "gpu-9": 8}, "Kubernetes nodes gpu-9 are in no cell"),
        ({**CELLS, "gpu-2": 8}, "node gpu-2 has 4 GPUs here but 8 in Kubernetes"),
    ],
)
def test_a_config_that_does_not_match_the_cluster_says_how(kube, why):
    got = topology_mismatch(CELLS, kube)
    assert (got is None) if why is None else got.startswith(why), got
