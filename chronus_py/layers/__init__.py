"""Per-host scx_layered layer configs: host model, discovery, emitter and strict validator.

host = HostTopology.from_yaml("examples/hosts/dgx-2s8g.yaml")
out = emit_host_layers(host, [PlacedJob("j1", (0, 1, 2, 3), cgroup="training.slice/j1.scope")])
problems = validate_layers(out.config, host=host, flags=out.flags)   # [] when clean
"""

from chronus_py.layers.discover import Discovery, discover_host
from chronus_py.layers.emit import HostLayers, LayerSpec, PlacedJob, emit_host_layers
from chronus_py.layers.host import Gpu, HostTopology
from chronus_py.layers.presets import DEFAULT_PRESET, PRESETS, resolve_thread_names
from chronus_py.layers.validate import RULES, Problem, has_errors, validate_layers

__all__ = [
    "DEFAULT_PRESET",
    "PRESETS",
    "RULES",
    "Discovery",
    "Gpu",
    "HostLayers",
    "HostTopology",
    "LayerSpec",
    "PlacedJob",
    "Problem",
    "discover_host",
    "emit_host_layers",
    "has_errors",
    "resolve_thread_names",
    "validate_layers",
]
