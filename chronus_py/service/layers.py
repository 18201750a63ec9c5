"""Host layer configs that follow the placements: with ``--layers-dir DIR`` and ``--hosts FILE``
the service rewrites ``DIR/<node>.json`` (the node's scx_layered config) and ``DIR/<node>.env``
whenever the set of jobs on that node changes, as ``chronus plan --layers-dir`` does for one
round. Each file is written to a temporary name and renamed, so a host agent never reads half
a config. ``--hosts`` maps node names to host model YAML files (paths relative to it)::

    node000: hosts/2socket-8gpu.yaml
    node001: hosts/2socket-8gpu.yaml
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from chronus_py.errors import InputError
from chronus_py.inputs import load_yaml


def load_hosts(path: Path, node_gpus: Mapping[str, int]) -> dict[str, Any]:
    """node -> HostTopology, checked against the cluster's nodes and GPU counts."""
    from chronus_py.layers import HostTopology

    raw = load_yaml(path, what="hosts file")
    if not isinstance(raw, dict):
        raise InputError(path, "expected a mapping of node -> host model YAML")
    models: dict[Path, Any] = {}
    out = {}
    for node, name in raw.items():
        if node not in node_gpus:
            raise InputError(
                path, f"unknown node (the cluster has {len(node_gpus)} nodes)", field=str(node)
            )
        if not isinstance(name, str):
            raise InputError(path, "expected a host model file name", field=str(node))
        model = Path(path).parent / name
        if model not in models:
            models[model] = HostTopology.from_yaml(model)
        host = models[model]
        for gpu in range(node_gpus[node]):
            try:
                host.gpu(gpu)
            except KeyError:
                raise InputError(
                    path, f"host {host.name} ({model}) has no GPU {gpu}", field=str(node)
                ) from None
        out[node] = host
    return out


class LayersWriter:
    def __init__(self, directory: Path, hosts: Mapping[str, Any]):
        self.directory = Path(directory)
        self.hosts = dict(hosts)
        self.placed: dict[str, tuple] = {}
        self.configs: dict[str, str] = {}
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(directory, f"cannot create: {exc.strerror or exc}") from None

    def current(self, node: str) -> str | None:
        return self.configs.get(node)

    def update(
        self, running: Mapping[str, tuple[Mapping[str, tuple[int, ...]], str | None]]
    ) -> list[str]:
        """``running``: job -> (placement, cgroup). Rewrites the nodes whose jobs changed;
        returns their names."""
        from chronus_py.layers import PlacedJob, emit_host_layers
        from chronus_py.layers.emit import DEFAULT_CONFIG_DIR

        per_node: dict[str, list] = {}
        for job_id, (placement, cgroup) in running.items():
            for node, gpus in placement.items():
                if node in self.hosts:
                    per_node.setdefault(node, []).append((job_id, tuple(gpus), cgroup))
        changed = []
        for node in self.hosts:
            placed = tuple(sorted(per_node.get(node, ())))
            if placed == self.placed.get(node, ()):
                continue
            self.placed[node] = placed
            changed.append(node)
            layers = emit_host_layers(
                self.hosts[node],
                [PlacedJob(job_id, gpus, cgroup=cgroup) for job_id, gpus, cgroup in placed],
            )
            if layers is None:
                self.configs.pop(node, None)
                for suffix in (".json", ".env"):
                    (self.directory / f"{node}{suffix}").unlink(missing_ok=True)
                continue
            self.configs[node] = layers.to_json()
            self._write(f"{node}.json", self.configs[node])
            self._write(f"{node}.env", layers.env_file(f"{DEFAULT_CONFIG_DIR}/{node}.json"))
        return changed

    def _write(self, name: str, text: str) -> None:
        target = self.directory / name
        temporary = target.with_name(f".{name}.tmp")
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, target)
