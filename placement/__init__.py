"""Topology-aware GPU placement, usable on its own (no import of chronus_py).

``Allocator`` is the protocol every placement engine here satisfies; ``ConsolidatedAllocator`` is
node-level best fit for clusters given only as nodes and GPU counts.
"""
from placement.types import Allocator, NodeUsage, PodPlacement, PodSpec, Request, Result
from placement.consolidated import ConsolidatedAllocator

__all__ = [
    "Allocator",
    "NodeUsage",
    "PodPlacement",
    "PodSpec",
    "Request",
    "Result",
    "ConsolidatedAllocator",
]
