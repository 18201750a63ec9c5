"""Shared helpers for the host-layer tests: tiny layer configs and hosts."""

from __future__ import annotations

import copy
from pathlib import Path

from chronus_py.layers.host import HostTopology

HERE = Path(__file__).parent
REPO = HERE.parent.parent
UPSTREAM = HERE / "upstream"
GOLDEN = HERE / "golden"
EXAMPLE_HOSTS = REPO / "examples" / "hosts"

REST = {"name": "rest", "matches": [[]], "kind": {"Open": {}}}


def layer(name="a", matches=None, kind="Confined", **body):
    """A valid non-terminal layer; keyword arguments go into the kind object."""
    if kind in ("Confined", "Grouped"):
        body = {"util_range": [0.5, 0.9], **body}
    return {
        "name": name,
        "matches": [[{"CommPrefix": "x"}]] if matches is None else matches,
        "kind": {kind: body},
    }


def config(*layers, rest=True):
    return [copy.deepcopy(x) for x in layers] + ([copy.deepcopy(REST)] if rest else [])


def make_host(
    nodes=2, cpus_per_node=8, llcs_per_node=1, gpus_per_node=2, vendor="nvidia", name="h"
):
    numa, llcs, cpu = {}, {}, 0
    for n in range(nodes):
        numa[n] = list(range(cpu, cpu + cpus_per_node))
        step = cpus_per_node // llcs_per_node
        for i in range(llcs_per_node):
            llcs[len(llcs)] = (
                numa[n][i * step : (i + 1) * step] if i < llcs_per_node - 1 else numa[n][i * step :]
            )
        cpu += cpus_per_node
    gpus = [
        {"index": n * gpus_per_node + i, "numa_node": n, "vendor": vendor}
        for n in range(nodes)
        for i in range(gpus_per_node)
    ]
    return HostTopology.from_mapping({"name": name, "numa_nodes": numa, "llcs": llcs, "gpus": gpus})
