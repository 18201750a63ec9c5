"""The host model a layer config is emitted for: CPUs per NUMA node, LLC groups, SMT siblings and
GPUs with their NUMA node.

Host YAML (schema 1), as written by ``chronus host discover`` and read by ``--host``::

    name: gpu-a01                 # required; the plan writes DIR/<name>.json and DIR/<name>.env
    numa_nodes:                   # required: NUMA node id -> cpulist ("0-3,8-11" as in sysfs)
      0: "0-55,112-167"
      1: "56-111,168-223"
    llcs:                         # optional: LLC id -> cpulist; default one LLC per NUMA node
      0: "0-55,112-167"
      1: "56-111,168-223"
    smt_siblings:                 # optional: one cpulist per core that has >1 hardware thread
      - "0,112"
      - "1,113"
    gpus:                         # optional (default none); index as CUDA_DEVICE_ORDER=PCI_BUS_ID
      - {index: 0, numa_node: 0, pci: "0000:18:00.0", vendor: nvidia}

Rules, checked on load so the emitter and validator can trust the model: every CPU belongs to
exactly one NUMA node; the LLCs (when given) partition the same CPU set; every SMT group has at
least two CPUs of that set and no CPU is in two groups; GPU indices are unique and each GPU's
``numa_node`` is one of the nodes. ``pci`` is optional; ``vendor`` defaults to ``nvidia`` and
decides whether the NVIDIA-only GPU matchers of scx_layered can be used. Node and LLC ids are the
ids scx_layered uses in ``nodes``/``llcs``/``NumaNode``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from chronus_py.errors import InputError

GPU_VENDORS = ("nvidia", "amd", "intel", "habana", "other")


def parse_cpulist(text: str) -> tuple[int, ...]:
    """Parse the kernel's cpulist format ("0-3,8,10-11"); raises ValueError on anything else."""
    cpus: set[int] = set()
    text = text.strip()
    if not text:
        return ()
    for part in text.split(","):
        lo_s, sep, hi_s = part.strip().partition("-")
        if not lo_s.isdigit() or (sep and not hi_s.isdigit()):
            raise ValueError(f"bad cpulist item {part.strip()!r}")
        lo, hi = int(lo_s), int(hi_s) if sep else int(lo_s)
        if hi < lo:
            raise ValueError(f"bad cpulist range {part.strip()!r}")
        cpus.update(range(lo, hi + 1))
    return tuple(sorted(cpus))


def format_cpulist(cpus: Iterable[int]) -> str:
    """The inverse of :func:`parse_cpulist`, with ranges collapsed."""
    out: list[str] = []
    ordered = sorted(set(cpus))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(out)


@dataclass(frozen=True, slots=True)
class Gpu:
    index: int
    numa_node: int
    pci: str | None = None
    vendor: str = "nvidia"


@dataclass(frozen=True, slots=True)
class HostTopology:
    """One host. ``nodes`` and ``llcs`` map id -> sorted CPU ids; build with
    :meth:`from_mapping`."""

    name: str
    nodes: Mapping[int, tuple[int, ...]]
    llcs: Mapping[int, tuple[int, ...]]
    smt_siblings: tuple[tuple[int, ...], ...]
    gpus: tuple[Gpu, ...]

    @property
    def cpus(self) -> tuple[int, ...]:
        return tuple(sorted(c for cpus in self.nodes.values() for c in cpus))

    @property
    def threads_per_core(self) -> int:
        """Largest SMT group (1 without SMT): converts a core budget into a CPU count."""
        return max((len(g) for g in self.smt_siblings), default=1)

    def node_of_gpu(self, index: int) -> int:
        for gpu in self.gpus:
            if gpu.index == index:
                return gpu.numa_node
        raise KeyError(index)

    def gpu(self, index: int) -> Gpu:
        for gpu in self.gpus:
            if gpu.index == index:
                return gpu
        raise KeyError(index)

    @classmethod
    def from_yaml(cls, path: str | Path) -> HostTopology:
        from chronus_py.inputs import load_yaml

        data = load_yaml(path, what="host model")
        return cls.from_mapping(data, source=str(path))

    @classmethod
    def from_mapping(cls, data: Any, *, source: str = "host") -> HostTopology:
        """Build and check a host from parsed YAML; any problem is one InputError naming the key."""

        def fail(field: str, why: str) -> InputError:
            return InputError(source, why, field=field)

        if not isinstance(data, Mapping):
            raise fail("(top level)", "expected a mapping with name, numa_nodes, ...")
        unknown = sorted(
            set(map(str, data)) - {"name", "numa_nodes", "llcs", "smt_siblings", "gpus"}
        )
        if unknown:
            raise fail(
                unknown[0], "unknown key (expected name, numa_nodes, llcs, smt_siblings, gpus)"
            )
        name = data.get("name")
        if not isinstance(name, str) or not name.strip() or "/" in name or name.startswith("."):
            raise fail("name", "required: a host name usable as a file name")
        nodes = _cpu_groups(data.get("numa_nodes"), "numa_nodes", fail, required=True)
        all_cpus = _check_disjoint(nodes, "numa_nodes", fail)
        if data.get("llcs") is None:
            llcs = dict(nodes)
        else:
            llcs = _cpu_groups(data["llcs"], "llcs", fail, required=True)
            if _check_disjoint(llcs, "llcs", fail) != all_cpus:
                raise fail("llcs", "LLCs must cover exactly the CPUs of numa_nodes")
        smt = _smt_groups(data.get("smt_siblings"), all_cpus, fail)
        gpus = _gpus(data.get("gpus"), set(nodes), fail)
        return cls(name=name.strip(), nodes=nodes, llcs=llcs, smt_siblings=smt, gpus=gpus)

    def to_mapping(self) -> dict[str, Any]:
        """The YAML form (schema above); ``from_mapping(to_mapping())`` round-trips."""
        out: dict[str, Any] = {
            "name": self.name,
            "numa_nodes": {n: format_cpulist(c) for n, c in sorted(self.nodes.items())},
            "llcs": {n: format_cpulist(c) for n, c in sorted(self.llcs.items())},
        }
        if self.smt_siblings:
            out["smt_siblings"] = [format_cpulist(g) for g in self.smt_siblings]
        gpus = []
        for g in self.gpus:
            entry: dict[str, Any] = {"index": g.index, "numa_node": g.numa_node}
            if g.pci is not None:
                entry["pci"] = g.pci
            entry["vendor"] = g.vendor
            gpus.append(entry)
        out["gpus"] = gpus
        return out

    def to_yaml(self) -> str:
        return yaml.safe_dump(
            self.to_mapping(), sort_keys=False, default_flow_style=None, width=100
        )


def _cpu_groups(raw: Any, key: str, fail, *, required: bool) -> dict[int, tuple[int, ...]]:
    if not isinstance(raw, Mapping) or (required and not raw):
        raise fail(key, "required: a mapping of id -> cpulist")
    groups: dict[int, tuple[int, ...]] = {}
    for ident, cpus in raw.items():
        if isinstance(ident, bool) or not isinstance(ident, int) or ident < 0:
            raise fail(f"{key}.{ident}", "ids must be non-negative integers")
        try:
            parsed = _cpus(cpus)
        except ValueError as exc:
            raise fail(f"{key}.{ident}", str(exc)) from None
        if not parsed:
            raise fail(f"{key}.{ident}", "has no CPUs")
        groups[ident] = parsed
    return dict(sorted(groups.items()))


def _cpus(value: Any) -> tuple[int, ...]:
    if isinstance(value, str):
        return parse_cpulist(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return (value,)
    if isinstance(value, list) and all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value
    ):
        return tuple(sorted(set(value)))
    raise ValueError('expected a cpulist string such as "0-3,8" or a list of CPU ids')


def _check_disjoint(groups: Mapping[int, tuple[int, ...]], key: str, fail) -> set[int]:
    seen: dict[int, int] = {}
    for ident, cpus in groups.items():
        for cpu in cpus:
            if cpu in seen:
                raise fail(f"{key}.{ident}", f"CPU {cpu} is also in {key}.{seen[cpu]}")
            seen[cpu] = ident
    return set(seen)


def _smt_groups(raw: Any, all_cpus: set[int], fail) -> tuple[tuple[int, ...], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise fail("smt_siblings", "expected a list of cpulists, one per core")
    seen: set[int] = set()
    groups = []
    for i, item in enumerate(raw):
        try:
            cpus = _cpus(item)
        except ValueError as exc:
            raise fail(f"smt_siblings[{i}]", str(exc)) from None
        if len(cpus) < 2:
            raise fail(f"smt_siblings[{i}]", "a sibling group needs at least two CPUs")
        if not set(cpus) <= all_cpus:
            raise fail(f"smt_siblings[{i}]", "names CPUs that are in no NUMA node")
        if seen & set(cpus):
            raise fail(f"smt_siblings[{i}]", "a CPU is in two sibling groups")
        seen |= set(cpus)
        groups.append(cpus)
    return tuple(sorted(groups))


def _gpus(raw: Any, node_ids: set[int], fail) -> tuple[Gpu, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise fail("gpus", "expected a list of {index, numa_node, pci, vendor}")
    gpus: list[Gpu] = []
    for i, item in enumerate(raw):
        where = f"gpus[{i}]"
        if not isinstance(item, Mapping):
            raise fail(where, "expected a mapping with index and numa_node")
        extra = sorted(set(map(str, item)) - {"index", "numa_node", "pci", "vendor"})
        if extra:
            raise fail(
                f"{where}.{extra[0]}", "unknown key (expected index, numa_node, pci, vendor)"
            )
        index, node = item.get("index"), item.get("numa_node")
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise fail(f"{where}.index", "required: a non-negative integer")
        if isinstance(node, bool) or not isinstance(node, int) or node not in node_ids:
            raise fail(
                f"{where}.numa_node", f"must be one of the numa_nodes ids {sorted(node_ids)}"
            )
        pci = item.get("pci")
        if pci is not None and not isinstance(pci, str):
            raise fail(f"{where}.pci", "expected a PCI address string")
        vendor = item.get("vendor", "nvidia")
        if vendor not in GPU_VENDORS:
            raise fail(f"{where}.vendor", f"expected one of {', '.join(GPU_VENDORS)}")
        if any(g.index == index for g in gpus):
            raise fail(f"{where}.index", f"GPU index {index} appears twice")
        gpus.append(Gpu(index=index, numa_node=node, pci=pci, vendor=vendor))
    return tuple(sorted(gpus, key=lambda g: g.index))
