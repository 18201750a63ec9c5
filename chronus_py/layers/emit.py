"""(host, jobs placed on it this round) -> one scx_layered layer config, in Meta's four tiers.

Layer order is tier order, because a task joins the first layer that matches:

1. ``l1_critical_n<N>`` -- Grouped, one per NUMA node holding an opted-in job's GPU: trainer
   main, kernel-launch, comms and accelerator-monitor threads. ``protected`` (its idle CPUs stay
   its own), ``preempt``, ``prev_over_idle_core`` (cache locality), ``yield_ignore`` 0.5 (these
   threads yield too often), ``perf`` 1024, weight 1000, grown ``Topo`` on ``nodes: [N]`` with
   ``skip_remote_node`` so the job's critical threads stay beside its GPUs.
2. ``l2_data_n<N>`` -- Grouped: data loading. A CPU range bounded by the jobs' GPU share of the
   node, ``perf`` 512 (low-frequency cores will do). Merged into one ``l2_data`` layer when the
   per-node layers would break the 16-layer limit.
3. ``l3_support`` -- Confined to a fixed CPU count: checkpointing, rendezvous, launchers.
4. ``l4_rest`` -- Open, ``matches: [[]]``: everything else, including opted-out jobs.

Jobs share a tier layer through OR groups: each (job, thread name) is one AND group
``[CgroupPrefix(job cgroup), CommPrefix(name)]``. A job whose GPUs span several nodes (or, on a
multi-node host, a job without a cgroup, which names alone cannot tell apart) gets one group per
node with ``NumaNode(N)`` added -- it matches the ranks pinned to that node -- plus the plain
group in its last node's layer for threads that are not pinned. ``NumaNode`` needs crate
>= 1.0.21; for older targets such a job's groups go to its main node only. With a cgroup and
NVIDIA GPUs, ``[cgroup, UsedGpuTid: true]`` also joins tier 1 (threads that opened, mapped or
polled the GPU device), which adds ``--enable-gpu-support`` to the flags.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from chronus_py.errors import InputError
from chronus_py.layers import schema as S
from chronus_py.layers.host import HostTopology
from chronus_py.layers.presets import DEFAULT_PRESET, resolve_thread_names, split_name

MIN_EMIT_VERSION: S.Version = (1, 0, 13)  # protected, prev_over_idle_core, skip_remote_node
NUMA_MATCHER_VERSION = S.MATCHERS["NumaNode"][1]
DEFAULT_CONFIG_DIR = "/etc/scx_layered"
GPU_SUPPORT_FLAG = "--enable-gpu-support"

# Per opted-in GPU, in cores (times threads per core gives CPUs).
CRITICAL_CORES_PER_GPU = (1, 4)  # min, max
DATA_CORES_PER_GPU = 1  # min; max is half the jobs' GPU share of the node
SUPPORT_CORES_PER_JOB = 1  # fixed count, at most 1/8 of the host

Group = tuple[tuple[str, Any], ...]  # an AND group of (matcher, payload)
Groups = dict[Group, list[str]]  # OR groups in order -> ids of the jobs they serve


@dataclass(frozen=True, slots=True)
class PlacedJob:
    """A job's share of one host this round.

    ``gpus`` are host GPU indices. ``cgroup`` is the job's cgroup-v2 path (a leading ``/`` or
    ``/sys/fs/cgroup/`` is dropped; ``None`` = match by thread names alone, host-wide).
    ``preset`` names thread-name presets joined by "+"; ``thread_names`` replaces whole tiers
    ({"support": ["pcomm:ckpt_agent"]}). ``opt_in`` False leaves the job in the catch-all layer.
    """

    job_id: str
    gpus: tuple[int, ...]
    cgroup: str | None = None
    preset: str = DEFAULT_PRESET
    thread_names: Mapping[str, Sequence[str]] = field(default_factory=dict)
    opt_in: bool = True


@dataclass(frozen=True, slots=True)
class LayerSpec:
    """How a job wants its threads treated on every host it runs on (the fields of
    :class:`PlacedJob` that do not depend on where it runs): what a state file or a submission
    says once per job."""

    cgroup: str | None = None
    preset: str = DEFAULT_PRESET
    thread_names: Mapping[str, Sequence[str]] = field(default_factory=dict)
    opt_in: bool = True

    def on(self, job_id: str, gpus: tuple[int, ...]) -> PlacedJob:
        """The job's share of one host: these wishes on those GPUs."""
        return PlacedJob(
            job_id,
            gpus,
            cgroup=self.cgroup,
            preset=self.preset,
            thread_names=self.thread_names,
            opt_in=self.opt_in,
        )


@dataclass(frozen=True, slots=True)
class HostLayers:
    """The emitted config for one host and how to start scx_layered with it."""

    host: str
    config: list[dict[str, Any]]  # JSON-able layer specs
    flags: tuple[str, ...]  # scx_layered flags the config needs
    jobs: tuple[str, ...]  # opted-in jobs covered, sorted

    def default_path(self) -> str:
        return f"{DEFAULT_CONFIG_DIR}/{self.host}.json"

    def to_json(self) -> str:
        return format_config(self.config)

    def command_args(self, config_path: str | None = None) -> list[str]:
        """scx_layered arguments: the flags, then ``f:PATH`` (a spec read from a file)."""
        path = config_path or self.default_path()
        if not path or any(c.isspace() or c in "\"'\\$`" for c in path):
            raise InputError(
                path, "config path must not contain whitespace, quotes, '\\', '$' or '`'"
            )
        return [*self.flags, f"f:{path}"]

    def env_line(self, config_path: str | None = None) -> str:
        """The ``SCX_FLAGS=...`` line of /etc/default/scx (read by scx.service)."""
        return f'SCX_FLAGS="{" ".join(self.command_args(config_path))}"'

    def env_file(self, config_path: str | None = None) -> str:
        """A whole /etc/default/scx: scheduler name and flags."""
        return f"SCX_SCHEDULER=scx_layered\n{self.env_line(config_path)}\n"


@dataclass(slots=True)
class _Job:
    job_id: str
    nodes: tuple[int, ...]
    gpus_per_node: dict[int, int]
    main_node: int
    cgroup: str | None
    names: dict[str, tuple[str, ...]]
    gpu_matcher: bool


def emit_host_layers(
    host: HostTopology,
    jobs: Sequence[PlacedJob],
    *,
    scx_version: str | None = None,
    gpu_matchers: bool = True,
) -> HostLayers | None:
    """The layer config for ``host`` given every job placed on it, or None when no opted-in job
    has anything to match (the host then keeps its default scheduler: write no file).

    ``scx_version`` is the target crate version (default: the newest known); features it lacks
    are not used. Raises InputError (naming the host and job) for GPUs the host lacks, a GPU
    given to two jobs, bad cgroups or thread names, or more jobs than 16 layers can express.
    """
    source = f"host {host.name}"
    try:
        version = S.LATEST if scx_version is None else S.parse_version(scx_version)
    except ValueError as exc:
        raise InputError(source, str(exc), field="scx_version") from None
    if version < MIN_EMIT_VERSION:
        raise InputError(
            source, f"scx_layered {S.show(version)} is too old: need >= {S.show(MIN_EMIT_VERSION)}"
        )
    owners: dict[int, str] = {}
    for job in jobs:
        _check_gpus(host, job, owners, source)
    opted = sorted((j for j in jobs if j.opt_in), key=lambda j: j.job_id)
    if not opted:
        return None
    numa_ok = version >= NUMA_MATCHER_VERSION
    prepared = [_prepare(host, job, source, gpu_matchers) for job in opted]
    used_nodes = sorted({n for j in prepared for n in j.nodes})
    builder = _Builder(host, prepared, used_nodes, numa_ok)
    config = builder.build(merge_data=False)
    if len(config) > S.MAX_LAYERS:
        config = builder.build(merge_data=True)
    if len(config) > S.MAX_LAYERS:
        raise InputError(
            source,
            f"{len(opted)} opted-in jobs need {len(config)} layers, over the "
            f"limit of {S.MAX_LAYERS}: give the jobs cgroups or fewer thread names",
        )
    if len(config) == 1:
        return None
    uses_gpu = any("UsedGpuTid" in m for layer in config for g in layer["matches"] for m in g)
    return HostLayers(
        host=host.name,
        config=config,
        flags=(GPU_SUPPORT_FLAG,) if uses_gpu else (),
        jobs=tuple(j.job_id for j in opted),
    )


def _check_gpus(host: HostTopology, job: PlacedJob, owners: dict[int, str], source: str) -> None:
    where = f"job {job.job_id}.gpus"
    if not isinstance(job.job_id, str) or not job.job_id:
        raise InputError(source, "every job needs a non-empty job_id", field="job_id")
    if job.job_id in owners.values():
        raise InputError(source, f"job {job.job_id} is listed twice", field=f"job {job.job_id}")
    if not job.gpus:
        raise InputError(source, "a placed job needs at least one GPU on this host", field=where)
    for index in job.gpus:
        try:
            host.gpu(index)
        except KeyError:
            raise InputError(source, f"host has no GPU {index}", field=where) from None
        if index in owners:
            raise InputError(
                source, f"GPU {index} is also placed for job {owners[index]}", field=where
            )
        owners[index] = job.job_id


def _prepare(host: HostTopology, job: PlacedJob, source: str, gpu_matchers: bool) -> _Job:
    try:
        names = resolve_thread_names(job.preset, job.thread_names)
    except ValueError as exc:
        raise InputError(source, str(exc), field=f"job {job.job_id}") from None
    per_node: dict[int, int] = {}
    for index in job.gpus:
        node = host.node_of_gpu(index)
        per_node[node] = per_node.get(node, 0) + 1
    main_node = max(sorted(per_node), key=lambda n: per_node[n])
    cgroup = None if job.cgroup is None else normalize_cgroup(job.cgroup, source, job.job_id)
    nvidia = all(host.gpu(i).vendor == "nvidia" for i in job.gpus)
    return _Job(
        job_id=job.job_id,
        nodes=tuple(sorted(per_node)),
        gpus_per_node=per_node,
        main_node=main_node,
        cgroup=cgroup,
        names=names,
        gpu_matcher=gpu_matchers and nvidia and cgroup is not None,
    )


def normalize_cgroup(path: str, source: str = "job", job_id: str = "?") -> str:
    """A cgroup path as scx_layered matches it: relative to the cgroup2 root, ending in '/'."""
    text = path.strip()
    for prefix in ("/sys/fs/cgroup/", "/"):
        if text.startswith(prefix):
            text = text[len(prefix) :]
    text = text.strip("/")
    if not text:
        raise InputError(
            source, "the root cgroup would match every task", field=f"job {job_id}.cgroup"
        )
    if "\0" in text or len(text.encode("utf-8")) + 1 > S.MAX_PATH - 1:
        raise InputError(
            source, "cgroup path is too long or holds a NUL byte", field=f"job {job_id}.cgroup"
        )
    return text + "/"


class _Builder:
    """Collects each tier's OR groups per node, then lays them out as layer specs."""

    def __init__(self, host: HostTopology, jobs: list[_Job], used_nodes: list[int], numa_ok: bool):
        self.host = host
        self.jobs = jobs
        self.used_nodes = used_nodes
        self.numa_ok = numa_ok
        self.multi_node = len(host.nodes) > 1
        self.tpc = host.threads_per_core

    def build(self, *, merge_data: bool) -> list[dict[str, Any]]:
        layers: list[dict[str, Any]] = []
        for node, groups in self._per_node("critical").items():
            layers += self._chunks(
                f"l1_critical_n{node}",
                groups,
                lambda k, n=node: self._critical_kind(n, k),
                f"tier 1 latency-critical threads, NUMA node {node}",
            )
        if merge_data:
            groups = self._host_wide("data")
            layers += self._chunks(
                "l2_data",
                groups,
                lambda k: self._data_kind(self.used_nodes, k),
                "tier 2 data pipeline, all nodes",
            )
        else:
            for node, groups in self._per_node("data").items():
                layers += self._chunks(
                    f"l2_data_n{node}",
                    groups,
                    lambda k, n=node: self._data_kind([n], k),
                    f"tier 2 data pipeline, NUMA node {node}",
                )
        layers += self._chunks(
            "l3_support",
            self._host_wide("support"),
            self._support_kind,
            "tier 3 checkpointing and supporting frameworks",
        )
        layers.append(
            {
                "name": "l4_rest",
                "comment": "tier 4: everything else",
                "matches": [[]],
                "kind": {"Open": {}},
            }
        )
        return layers

    # -- OR groups -------------------------------------------------------------------------
    def _bases(self, job: _Job, tier: str) -> list[Group]:
        lead: Group = () if job.cgroup is None else (("CgroupPrefix", job.cgroup),)
        bases = [lead + (split_name(name),) for name in job.names[tier]]
        if tier == "critical" and job.gpu_matcher:
            bases.append(lead + (("UsedGpuTid", True),))
        return bases

    def _per_node(self, tier: str) -> dict[int, Groups]:
        groups: dict[int, Groups] = {n: {} for n in self.used_nodes}
        for job in self.jobs:
            bases = self._bases(job, tier)
            spans = len(job.nodes) > 1 or (job.cgroup is None and len(self.used_nodes) > 1)
            if spans and self.numa_ok:
                for node in job.nodes:
                    _add(groups[node], [b + (("NumaNode", node),) for b in bases], job.job_id)
                _add(groups[job.nodes[-1]], bases, job.job_id)
            else:
                _add(groups[job.main_node], bases, job.job_id)
        return {n: g for n, g in groups.items() if g}

    def _host_wide(self, tier: str) -> Groups:
        groups: Groups = {}
        for job in self.jobs:
            _add(groups, self._bases(job, tier), job.job_id)
        return groups

    def _chunks(self, name: str, groups: Groups, kind, comment: str) -> list[dict[str, Any]]:
        items = list(groups.items())
        size = S.MAX_LAYER_MATCH_ORS
        parts = [items[i : i + size] for i in range(0, len(items), size)]
        out = []
        for i, part in enumerate(parts):
            jobs = sorted({j for _, ids in part for j in ids})
            out.append(
                {
                    "name": name if i == 0 else f"{name}_{i + 1}",
                    "comment": f"{comment}: jobs {', '.join(jobs)}",
                    "matches": [[{m: v} for m, v in group] for group, _ in part],
                    "kind": kind(len(parts)),
                }
            )
        return out

    # -- sizing ----------------------------------------------------------------------------
    def _gpus_on(self, nodes: list[int]) -> tuple[int, int, int]:
        """(opted-in GPUs, all GPUs, CPUs) on ``nodes``."""
        opted = sum(j.gpus_per_node.get(n, 0) for j in self.jobs for n in nodes)
        total = sum(1 for g in self.host.gpus if g.numa_node in nodes)
        cpus = sum(len(self.host.nodes[n]) for n in nodes)
        return opted, max(total, opted), cpus

    def _critical_kind(self, node: int, parts: int) -> dict[str, Any]:
        opted, _, cpus = self._gpus_on([node])
        lo_cores, hi_cores = CRITICAL_CORES_PER_GPU
        lo = _clamp(opted * lo_cores * self.tpc, 1, max(1, cpus // 2))
        hi = _clamp(opted * hi_cores * self.tpc, lo, cpus)
        body: dict[str, Any] = {
            "util_range": [0.25, 0.6],
            "cpus_range": [_split(lo, parts), hi],
            "protected": True,
            "preempt": True,
            "prev_over_idle_core": True,
            "yield_ignore": 0.5,
            "perf": 1024,
            "weight": 1000,
        }
        if self.multi_node:
            body.update({"growth_algo": "Topo", "nodes": [node], "skip_remote_node": True})
        return {"Grouped": body}

    def _data_kind(self, nodes: list[int], parts: int) -> dict[str, Any]:
        opted, total, cpus = self._gpus_on(nodes)
        lo = _clamp(opted * DATA_CORES_PER_GPU * self.tpc, 1, max(1, cpus // 2))
        share = cpus * opted // max(total, 1)
        hi = _clamp(share // 2, lo, cpus)
        body: dict[str, Any] = {
            "util_range": [0.5, 0.85],
            "cpus_range": [_split(lo, parts), hi],
            "perf": 512,
            "weight": 100,
        }
        if self.multi_node:
            body.update({"growth_algo": "Topo", "nodes": list(nodes)})
        return {"Grouped": body}

    def _support_kind(self, parts: int) -> dict[str, Any]:
        cpus = len(self.host.cpus)
        jobs = sum(1 for j in self.jobs if j.names["support"])
        k = _clamp(_split(jobs * SUPPORT_CORES_PER_JOB * self.tpc, parts), 1, max(1, cpus // 8))
        return {"Confined": {"util_range": [0.5, 0.9], "cpus_range": [k, k], "weight": 50}}


def format_config(config: list[dict[str, Any]]) -> str:
    """JSON with one line per AND group and per setting: diffable, and plain JSON all the same."""

    def flat(value: Any) -> str:
        return json.dumps(value, separators=(", ", ": "))

    layers = []
    for layer in config:
        lines = [
            f"    {flat(k)}: {flat(v)}" for k, v in layer.items() if k not in ("matches", "kind")
        ]
        groups = ",\n".join(f"      {flat(g)}" for g in layer["matches"])
        lines.append(f'    "matches": [\n{groups}\n    ]')
        ((kind, body),) = layer["kind"].items()
        settings = ",\n".join(f"      {flat(k)}: {flat(v)}" for k, v in body.items())
        lines.append(
            f'    "kind": {{{flat(kind)}: {{\n{settings}\n    }}}}'
            if body
            else f'    "kind": {{{flat(kind)}: {{}}}}'
        )
        layers.append("  {\n" + ",\n".join(lines) + "\n  }")
    return "[\n" + ",\n".join(layers) + "\n]\n"


def _add(groups: Groups, new: list[Group], job_id: str) -> None:
    """Append OR groups, merging identical ones (jobs without a cgroup share their names)."""
    for group in new:
        ids = groups.setdefault(group, [])
        if job_id not in ids:
            ids.append(job_id)


def _clamp(value: int, lo: int, hi: int) -> int:
    return max(lo, min(value, max(lo, hi)))


def _split(value: int, parts: int) -> int:
    return max(1, -(-value // parts))
