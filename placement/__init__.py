"""Topology-aware GPU placement, usable on its own (no import of chronus_py).

``Allocator`` is the protocol every placement engine here satisfies. ``CellAllocator`` is a
HiveD-style buddy cell allocator (tenants with promised cells, lazy binding, priorities, gangs,
bad nodes) over a HiveD config read by ``load_config``; ``ConsolidatedAllocator`` is node-level
best fit for clusters given only as nodes and GPU counts. ``run_scenario`` drives a cell
scenario (docs/cell-scenarios.md).
"""

from placement.allocator import CellAllocator
from placement.batch import round_up
from placement.config import ClusterConfig, load_config
from placement.consolidated import ConsolidatedAllocator
from placement.errors import ConfigError, PlacementError, ScenarioError
from placement.scenario import load_scenario, run_scenario
from placement.types import Allocator, NodeUsage, PodPlacement, PodSpec, Request, Result, RunningJob

__all__ = [
    "Allocator",
    "NodeUsage",
    "PodPlacement",
    "PodSpec",
    "Request",
    "Result",
    "RunningJob",
    "ConsolidatedAllocator",
    "CellAllocator",
    "ClusterConfig",
    "load_config",
    "ConfigError",
    "PlacementError",
    "ScenarioError",
    "load_scenario",
    "run_scenario",
    "round_up",
]
