"""From command-line choices to the cluster a replay runs on: nodes, allocator, slowdown.

Either a uniform cluster (nodes x GPUs, consolidated placement, as the Chronus artifact) or a
HiveD config, where the cell allocator places each job inside its tenant's virtual cluster; trace
tenants (Philly VCs) are mapped onto the config's virtual clusters by an optional YAML file.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from chronus_py.errors import InputError
from chronus_py.inputs import load_yaml
from chronus_py.model import Cluster, Job, Node
from chronus_py.scheduler import SpeedModel
from placement import Allocator, CellAllocator, PlacementError, load_config
from placement.limits import MAX_GPUS_PER_NODE, MAX_NODES
from placement.slowdown import speed_factor


@dataclass(frozen=True)
class ClusterSetup:
    jobs: tuple[Job, ...]
    cluster: Cluster
    allocator: Allocator | None
    speed: SpeedModel | None


def read_tenant_map(path: Path) -> dict[str, str]:
    data = load_yaml(path, what="tenant map")
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        raise InputError(path, "must map tenant names to virtual cluster names")
    return data


def setup_cluster(jobs: Sequence[Job], *, nodes: int, gpus_per_node: int, config: Path | None = None,
                  tenant_map: Path | None = None, slowdown: bool = False) -> ClusterSetup:
    if config is None:
        if nodes <= 0 or gpus_per_node <= 0:
            raise InputError("--nodes/--gpus-per-node", "must be positive")
        if nodes > MAX_NODES or gpus_per_node > MAX_GPUS_PER_NODE:
            raise InputError("--nodes/--gpus-per-node",
                             f"at most {MAX_NODES:,} nodes of {MAX_GPUS_PER_NODE:,} GPUs")
        if tenant_map is not None:
            raise InputError("--tenant-map", "only applies with --cluster")
        cluster = Cluster.uniform(nodes, gpus_per_node)
        speed = (lambda job, where: speed_factor(where, job.model)) if slowdown else None
        return ClusterSetup(tuple(jobs), cluster, None, speed)
    try:
        allocator = CellAllocator(load_config(config))
    except PlacementError as exc:
        raise InputError(config, str(exc)) from None
    cluster = Cluster(tuple(Node(name, gpus) for name, gpus in allocator.config.nodes()))
    mapping = read_tenant_map(tenant_map) if tenant_map else {}
    vcs = set(allocator.config.virtual_clusters)
    mapped = []
    for job in jobs:
        vc = mapping.get(job.tenant, mapping.get("default", job.tenant))
        if vc not in vcs:
            raise InputError(tenant_map or config, f"tenant {job.tenant!r} (job {job.id}) has no virtual "
                             f"cluster (have: {', '.join(sorted(vcs))}); map it with --tenant-map")
        mapped.append(dataclasses.replace(job, tenant=vc))
    speed = (lambda job, where: speed_factor(where, job.model, topology=allocator)) if slowdown else None
    return ClusterSetup(tuple(mapped), cluster, allocator, speed)
