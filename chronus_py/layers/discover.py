"""Read a live Linux host's topology from sysfs into a :class:`HostTopology`.

Sources (all under ``root``, "/" on a real host, a fake tree in tests):

* NUMA nodes: ``sys/devices/system/node/node*/cpulist``. CPU-less (memory-only) nodes are left
  out. A kernel without NUMA sysfs gives one node 0 holding ``sys/devices/system/cpu/online``.
* LLCs: ``sys/devices/system/cpu/cpu*/cache/index3/shared_cpu_list`` with ``index3/id`` as the
  LLC id when every group has a distinct one (that is the id scx_layered's ``llcs`` uses);
  otherwise groups are numbered by their lowest CPU. No ``index3`` means one LLC per node.
* SMT: ``sys/devices/system/cpu/cpu*/topology/thread_siblings_list``.
* GPUs: ``sys/bus/pci/devices/*/{vendor,class,numa_node}``, display-class or
  processing-accelerator devices of GPU vendors (see ``_GPU_CLASSES``), indexed in PCI-address
  order, which is what ``nvidia-smi`` and ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` use. A ``numa_node``
  of -1 (firmware did not say) is resolved from the device's ``local_cpulist``; failing that the
  GPU is put on the lowest node and a note says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from chronus_py.errors import InputError
from chronus_py.layers.host import Gpu, HostTopology, parse_cpulist

# vendor id -> (vendor name, PCI class prefixes (class >> 8) that count as a GPU)
_GPU_CLASSES: dict[str, tuple[str, frozenset[int]]] = {
    "0x10de": ("nvidia", frozenset({0x0300, 0x0302, 0x0380, 0x1200})),
    "0x1002": ("amd", frozenset({0x0300, 0x0302, 0x0380, 0x1200})),
    "0x8086": ("intel", frozenset({0x0380, 0x1200})),  # 0x0300 on Intel is the integrated GPU
    "0x1da3": ("habana", frozenset({0x1200})),
}


@dataclass(frozen=True, slots=True)
class Discovery:
    host: HostTopology
    notes: tuple[str, ...]  # guesses the user should check, one line each


def discover_host(root: str | Path = "/", name: str | None = None) -> Discovery:
    """Discover the host under ``root``; raises InputError when no CPU topology is readable."""
    base = Path(root)
    notes: list[str] = []
    nodes = _numa_nodes(base)
    all_cpus = {c for cpus in nodes.values() for c in cpus}
    llcs = _llcs(base, nodes, notes)
    smt = _smt(base, all_cpus)
    gpus = _gpus(base, nodes, notes)
    host_name = name or _hostname(base)
    data = {
        "name": host_name,
        "numa_nodes": {n: list(c) for n, c in nodes.items()},
        "llcs": {n: list(c) for n, c in llcs.items()},
        "smt_siblings": [list(g) for g in smt],
        "gpus": [
            {"index": g.index, "numa_node": g.numa_node, "pci": g.pci, "vendor": g.vendor}
            for g in gpus
        ],
    }
    return Discovery(
        host=HostTopology.from_mapping(data, source=f"sysfs under {base}"), notes=tuple(notes)
    )


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None


def _cpulist(path: Path) -> tuple[int, ...] | None:
    text = _read(path)
    if text is None:
        return None
    try:
        return parse_cpulist(text)
    except ValueError:
        raise InputError(str(path), f"not a cpulist: {text!r}") from None


def _numbered(parent: Path, prefix: str) -> list[tuple[int, Path]]:
    pattern = re.compile(re.escape(prefix) + r"(\d+)")
    found = []
    if parent.is_dir():
        for entry in parent.iterdir():
            m = pattern.fullmatch(entry.name)
            if m:
                found.append((int(m.group(1)), entry))
    return sorted(found)


def _numa_nodes(base: Path) -> dict[int, tuple[int, ...]]:
    online = _cpulist(base / "sys/devices/system/cpu/online")
    online_set = None if online is None else set(online)
    nodes: dict[int, tuple[int, ...]] = {}
    for node_id, path in _numbered(base / "sys/devices/system/node", "node"):
        cpus = _cpulist(path / "cpulist") or ()
        if online_set is not None:
            cpus = tuple(c for c in cpus if c in online_set)
        if cpus:
            nodes[node_id] = cpus
    if nodes:
        return nodes
    if online:
        return {0: online}
    cpus = tuple(i for i, _ in _numbered(base / "sys/devices/system/cpu", "cpu"))
    if not cpus:
        raise InputError(str(base / "sys/devices/system"), "no NUMA node or CPU information found")
    return {0: cpus}


def _llcs(
    base: Path, nodes: dict[int, tuple[int, ...]], notes: list[str]
) -> dict[int, tuple[int, ...]]:
    groups: dict[tuple[int, ...], str | None] = {}
    cpu_dir = base / "sys/devices/system/cpu"
    for cpus in nodes.values():
        for cpu in cpus:
            index3 = cpu_dir / f"cpu{cpu}/cache/index3"
            shared = _cpulist(index3 / "shared_cpu_list")
            if not shared:
                notes.append(f"cpu{cpu}: no L3 cache information; one LLC per NUMA node assumed")
                return dict(nodes)
            groups.setdefault(shared, _read(index3 / "id"))
    all_cpus = {c for cpus in nodes.values() for c in cpus}
    ordered = sorted((tuple(c for c in g if c in all_cpus), ident) for g, ident in groups.items())
    ids = [ident for _, ident in ordered]
    if all(i is not None and i.isdigit() for i in ids) and len(set(ids)) == len(ids):
        return dict(sorted((int(i), g) for g, i in ordered))
    return {n: g for n, (g, _) in enumerate(ordered)}


def _smt(base: Path, all_cpus: set[int]) -> list[tuple[int, ...]]:
    groups = set()
    for cpu in sorted(all_cpus):
        siblings = _cpulist(base / f"sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
        if siblings:
            group = tuple(c for c in siblings if c in all_cpus)
            if len(group) > 1:
                groups.add(group)
    return sorted(groups)


def _gpus(base: Path, nodes: dict[int, tuple[int, ...]], notes: list[str]) -> list[Gpu]:
    pci_dir = base / "sys/bus/pci/devices"
    entries = sorted(pci_dir.iterdir(), key=lambda p: p.name) if pci_dir.is_dir() else []
    gpus: list[Gpu] = []
    for dev in entries:
        vendor_id = (_read(dev / "vendor") or "").lower()
        klass = _read(dev / "class")
        if vendor_id not in _GPU_CLASSES or klass is None:
            continue
        vendor, classes = _GPU_CLASSES[vendor_id]
        try:
            if int(klass, 16) >> 8 not in classes:
                continue
        except ValueError:
            continue
        node = _gpu_node(dev, nodes, notes, len(gpus))
        gpus.append(Gpu(index=len(gpus), numa_node=node, pci=dev.name, vendor=vendor))
    return gpus


def _gpu_node(dev: Path, nodes: dict[int, tuple[int, ...]], notes: list[str], index: int) -> int:
    raw = _read(dev / "numa_node")
    if raw is not None and raw.lstrip("-").isdigit() and int(raw) in nodes:
        return int(raw)
    if len(nodes) == 1:
        return next(iter(nodes))
    local = set(_cpulist(dev / "local_cpulist") or ())
    overlap = {n: len(local & set(cpus)) for n, cpus in nodes.items()}
    best = max(overlap, key=lambda n: (overlap[n], -n))
    if overlap[best] and list(overlap.values()).count(overlap[best]) == 1:
        return best
    lowest = min(nodes)
    notes.append(
        f"gpu {index} ({dev.name}): NUMA node unknown (numa_node={raw}); assumed node {lowest}"
    )
    return lowest


def _hostname(base: Path) -> str:
    for rel in ("proc/sys/kernel/hostname", "etc/hostname"):
        text = _read(base / rel)
        if text:
            return text.split()[0]
    return "localhost"
