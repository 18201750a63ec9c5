"""The elastic scheduler places chosen sizes through the HiveD-style cell allocator too."""

from __future__ import annotations

import pytest

from chronus_py.policies.elastic import ElasticChronus, ElasticEDF, ElasticFlowStyle
from placement import CellAllocator, load_config
from tests.elastic.helpers import job, replay

CONFIG = {
    "physicalCluster": {
        "cellTypes": {
            "SWITCH": {"childCellType": "GPU", "childCellNumber": 2},
            "SOCKET": {"childCellType": "SWITCH", "childCellNumber": 2},
            "NODE": {"childCellType": "SOCKET", "childCellNumber": 2, "isNodeLevel": True},
            "RACK": {"childCellType": "NODE", "childCellNumber": 2},
        },
        "physicalCells": [
            {
                "cellType": "RACK",
                "cellAddress": "r0",
                "cellChildren": [{"cellAddress": "n0"}, {"cellAddress": "n1"}],
            },
        ],
    },
    "virtualClusters": {"default": {"virtualCells": [{"cellType": "RACK", "cellNumber": 1}]}},
}


@pytest.mark.parametrize("policy", [ElasticChronus, ElasticFlowStyle, ElasticEDF])
def test_sizes_are_placed_by_the_cell_allocator(policy):
    allocator = CellAllocator(load_config(CONFIG))
    sizes, rates = (1, 2, 4, 8, 16), (1.0, 1.9, 3.6, 6.5, 11.0)
    jobs = [job(f"j{i}", 100 * i, 100 * i + 4000, 8000 + 500 * i, sizes, rates) for i in range(6)]
    result = replay(jobs, policy(), nodes=2, per_node=8, allocator=allocator)
    # buddy cells fragment: a gang that does not fit is placed one size smaller (and counted)
    assert allocator.audit() == [] and allocator.free_gpus() == 16
    assert all(r.finish is not None for r in result.jobs)
    assert all(r.finish <= r.deadline for r in result.jobs if r.guaranteed)
    if policy is not ElasticEDF:  # EDF runs these one after another at 16 GPUs
        assert sum(r.resizes for r in result.jobs) > 0
