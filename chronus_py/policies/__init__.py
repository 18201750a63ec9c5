"""Built-in policies by name. To add one: write a class with a ``key`` (see ``base``), register
a factory here, and add a test on a hand-computed trace."""
from __future__ import annotations

from typing import Callable

from chronus_py.errors import InputError
from chronus_py.policies.base import OrderPolicy, Policy, View
from chronus_py.policies.chronus import Chronus
from chronus_py.policies.las import LAS
from chronus_py.policies.priority import EDF, FIFO, SRTF, SRTFGPU

POLICIES: dict[str, Callable[..., Policy]] = {
    "fifo": FIFO,
    "srtf": SRTF,
    "srtf-gpu": SRTFGPU,
    "edf": EDF,
    "las": LAS,
    "chronus": Chronus,
}


def make_policy(name: str, **options) -> Policy:
    if name not in POLICIES:
        raise InputError("--policy", f"unknown policy {name!r} (have: {', '.join(POLICIES)})")
    return POLICIES[name](**options)


__all__ = ["POLICIES", "Policy", "OrderPolicy", "View", "make_policy", "FIFO", "SRTF", "SRTFGPU", "EDF", "LAS",
           "Chronus"]
