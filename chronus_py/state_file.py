"""STATE.yaml: what a cluster manager knows at a decision point, read and checked at the edge.

``chronus plan STATE.yaml`` plans one round from it. Every problem is one line,
``STATE.yaml: key.path: why`` (exit 2), and nothing deeper re-validates. Times are absolute
seconds; only ``now`` and ``cluster`` are required::

    now: 3600                  # the decision instant (>= 0)
    policy: chronus            # chronus (default) | edf | fifo | las | srtf | srtf-gpu
    lease: 1200                # chronus only, like every setting below (defaults and meaning:
    headroom: 0.9              #   chronus_py/selector/settings.py, ChronusSettings); headroom:
    guard: 7200                #   share of GPUs new guarantees may not use (a small cluster
    margin: 0.0                #   wants less than the default 0.9)
    objective: minimize        #   minimize | maximize | adaptive
    solver:                    # chronus only: how the lease plan is solved
      backend: cpsat           #   cpsat | cbc | greedy
      time_limit_s: 2.0        #   > 0 (a safety cap: CP-SAT stops on a deterministic budget first)
      deterministic_time: 0.2  #   CP-SAT's deterministic budget (the same plan on any machine)
    cluster:                   # exactly one form:
      nodes: 4                 #   N nodes named node0..node<N-1> (zero-padded) ...
      gpus_per_node: 8         #   ... of G GPUs each (default 8); consolidated placement
      # nodes: [{name: gpu-a01, gpus: 8}, ...]        explicit nodes; consolidated placement
      # hived: cluster.yaml                           a HiveD config (relative to this file)
      # physicalCluster: ...  virtualClusters: ...    the same, inline; both use the cell allocator
    hosts:                     # node -> host model YAML (relative path), for --layers-dir;
      node0: hosts/2socket-8gpu.yaml   # a node not listed, or null, gets no layer config
    running:                   # jobs holding GPUs now
      - id: j1                 # string (or integer), unique over running and pending
        gpus: 8                # >= 1, at most the cluster's GPUs
        submit: 0              # <= now
        placement: {node0: [0, 1, 2, 3, 4, 5, 6, 7]}   # running only: node -> GPU indices
        estimate_seconds: 7200 # total work, or:
        # profile: {file: profiles/resnet50.json, iterations: 40000}   (chronus profile fit)
        # or neither: runtime unknown, the job is being measured in place (see below)
        progress_seconds: 1800 # work done so far, same units as the estimate (default 0)
        deadlines: [{at: 9000, value: 1}]   # tightest first; value defaults to 1; none =
        best-effort
        guaranteed_deadline: 9000   # the `at` of the option it was guaranteed, or null (default)
        tenant: default        # on HiveD clusters: the job's virtual cluster
        model: resnet50
        cgroup: training.slice/j1.scope    # host layers: the job's cgroup (default: none)
        preset: pytorch+nccl+dataloader    # host layers: thread-name presets
        thread_names: {support: ["pcomm:ckpt_agent"]}   # host layers: whole tiers replaced
        opt_in: true           # false: the job stays out of host layer configs
    pending:                   # jobs waiting: the same keys without placement
      - {id: j2, gpus: 4, submit: 3000, estimate_seconds: 1800, deadlines: [{at: 7200}]}
      - id: j3                 # an elastic job: no gpus (the round sizes it), work in iterations
        submit: 3500
        model: resnet50        # with batch, its throughput curve (throughputs: below)
        elastic: {min_gpus: 1, max_gpus: 16, batch: 256, iterations: 40000, iterations_done: 0}
        deadlines: [{at: 9000}]
    throughputs: tables/       # <model>.csv throughput tables (default: the bundled A100 ones)

One deadline makes a strict SLO job, several a soft one; a job without deadlines is best-effort.

An elastic job (``elastic:``) may run on the powers of two from ``min_gpus`` (default 1) to
``max_gpus`` (default the cluster) that its (model, batch) curve holds, up to its fastest; its work
is ``iterations`` at the curve's iterations per second. Waiting, it gets its size from the round
(``chronus_py.jobs.sizing``); running, its ``gpus`` is the size it runs at, one of those.

A job with neither ``estimate_seconds`` nor ``profile`` has an unknown runtime: nobody could tell
it, so it is measured in place (``chronus_py.estimates.in_place``). It is ranked by a
``MEASURE_WINDOW``-second probe, gets no guarantee yet, and its decision's ``estimate`` says
``unknown`` or ``measuring`` with a ``tentative`` promise; once the manager has measured it
(``progress_seconds`` >= the window) the file must give its estimate. A profile's band becomes
the job's estimate band, which the lease plan pads guarantees with.
``progress_seconds`` on a pending job is work done before it was preempted; a restart is then
charged again, as for any start (see ``chronus_py.jobs.overhead``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from chronus_py.errors import InputError
from chronus_py.estimates.in_place import MEASURE_WINDOW
from chronus_py.inputs import as_input_error, load_structured, show
from chronus_py.jobs.model import Cluster, DeadlineOption, Job, JobKind, Node
from chronus_py.jobs.sizing import curve_sizes
from chronus_py.layers import LayerSpec
from chronus_py.selector import ChronusSettings
from placement.limits import (
    MAX_GPUS,
    MAX_GPUS_PER_NODE,
    MAX_JOB_SECONDS,
    MAX_NODES,
    MAX_SECONDS,
    too_large,
)

_SETTING_KEYS = ("lease", "headroom", "guard", "margin", "objective")
_SOLVER_KEYS = {
    "backend": "backend",
    "time_limit_s": "time_limit_s",
    "deterministic_time": "deterministic_time",
}
_TOP_KEYS = (
    "now",
    "policy",
    *_SETTING_KEYS,
    "solver",
    "cluster",
    "hosts",
    "throughputs",
    "running",
    "pending",
)
_JOB_KEYS = (
    "id",
    "gpus",
    "submit",
    "estimate_seconds",
    "profile",
    "progress_seconds",
    "deadlines",
    "guaranteed_deadline",
    "tenant",
    "model",
    "cgroup",
    "preset",
    "thread_names",
    "opt_in",
    "elastic",
)
_ELASTIC_KEYS = ("min_gpus", "max_gpus", "batch", "iterations", "iterations_done")
_MISSING = object()


@dataclass(frozen=True, slots=True)
class JobEntry:
    """One job of the state file, checked. ``key`` (e.g. ``pending[3]``) names it in messages;
    ``placement`` is None for pending jobs."""

    key: str
    job: Job
    estimate: float | None  # None: runtime unknown, being measured in place
    band: float  # relative half-width of the estimate's band (0: a figure given as exact)
    work_done: float  # in the job's unit: seconds, iterations for a job with a curve
    guaranteed: DeadlineOption | None
    placement: Mapping[str, tuple[int, ...]] | None
    layers: LayerSpec

    @property
    def elastic(self) -> bool:
        """A job with a throughput curve (``elastic:``): a waiting one is sized by the round."""
        return bool(self.job.rates)


@dataclass(frozen=True)
class State:
    """A checked state file: everything one planning round needs, as data. ``policy_options``
    are the policy's settings the file gave (for Chronus, :class:`ChronusSettings` fields; the
    rest keep their defaults); ``chronus_py.round.build_scheduler`` turns all this into a
    scheduler."""

    source: str
    now: float
    policy: str
    policy_options: Mapping[str, Any]
    cluster: Cluster
    hived: Any  # placement.ClusterConfig when the cluster is a HiveD config, else None
    node_gpus: Mapping[str, tuple[int, ...]]
    hosts: Mapping[str, Any]  # node -> chronus_py.layers.HostTopology
    jobs: tuple[JobEntry, ...]  # running first, then pending, each in file order


def load_state(path: str | Path) -> State:
    """Read and check ``path``; raises one-line :class:`InputError` naming the key at fault.

    A ``.json`` file, or any file that starts with ``{``, is read as JSON (the same schema):
    PyYAML takes seconds for thousands of jobs, json milliseconds."""

    path = Path(path)
    return _Reader(path).state(load_structured(path, what="state file"))


class _Reader:
    """Checks one parsed state file; every ``fail`` names the source and the key path."""

    def __init__(self, path: Path):
        self.path = path
        self.base = path.parent
        self.source = str(path)
        self._profiles: dict[Path, Any] = {}
        self.total_gpus = 0
        self._presets: set[tuple] = set()  # (preset, thread_names) pairs already checked
        self._throughputs: Any = None  # the state's throughput tables, read on first use
        self._throughputs_dir: Path | None = None

    def fail(self, key: str, why: str) -> InputError:
        return InputError(self.source, why, field=key or None)

    # -- scalars --------------------------------------------------------------------------------
    def mapping(self, value: Any, key: str, allowed: tuple[str, ...]) -> dict:
        if not isinstance(value, dict):
            raise self.fail(key, "expected a mapping")
        for name in value:
            if name not in allowed:
                raise self.fail(
                    _join(key, str(name)), f"unknown key (expected one of: {', '.join(allowed)})"
                )
        return value

    def number(
        self, data: dict, name: str, key: str, *, default: Any = _MISSING, positive: bool = False
    ) -> float:
        where = _join(key, name)
        value = data.get(name, default)
        if value is _MISSING:
            raise self.fail(where, "required")
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
        ):
            raise self.fail(where, f"expected a number, got {show(value)}")
        if value < 0 or (positive and value == 0):
            raise self.fail(where, f"must be {'> 0' if positive else '>= 0'}, got {show(value)}")
        if value > MAX_SECONDS:
            raise self.fail(where, too_large(value, MAX_SECONDS))
        return float(value)

    def integer(self, value: Any, where: str, *, minimum: int, maximum: int = MAX_GPUS) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(where, f"expected an integer, got {show(value)}")
        if value < minimum:
            raise self.fail(where, f"must be >= {minimum}, got {value}")
        if value > maximum:
            raise self.fail(where, too_large(value, maximum))
        return value

    def text(self, data: dict, name: str, key: str, default: Any = _MISSING) -> Any:
        where = _join(key, name)
        value = data.get(name, default)
        if value is _MISSING:
            raise self.fail(where, "required")
        if value is not None and (not isinstance(value, str) or not value):
            raise self.fail(where, f"expected a non-empty string, got {show(value)}")
        return value

    # -- the file -------------------------------------------------------------------------------
    def state(self, data: Any) -> State:
        from chronus_py.policies import ROUND_POLICIES as POLICIES

        data = self.mapping(data, "", _TOP_KEYS)
        now = self.number(data, "now", "")
        policy = self.text(data, "policy", "", "chronus")
        if policy not in POLICIES:
            raise self.fail(
                "policy", f"unknown policy {show(policy)} (have: {', '.join(sorted(POLICIES))})"
            )
        options = self.settings(data, policy)
        if "cluster" not in data:
            raise self.fail("cluster", "required")
        cluster, hived, node_gpus = self.cluster(data["cluster"])
        self.total_gpus = cluster.gpus
        hosts = self.hosts(data.get("hosts"), node_gpus)
        if data.get("throughputs") is not None:
            self._throughputs_dir = self.base / self.text(data, "throughputs", "")
        vcs = None if hived is None else set(hived.virtual_clusters)
        jobs: list[JobEntry] = []
        owners: dict[tuple[str, int], str] = {}
        seen: dict[str, str] = {}
        for section in ("running", "pending"):
            items = data.get(section) or []
            if not isinstance(items, list):
                raise self.fail(section, "expected a list of jobs")
            for i, item in enumerate(items):
                entry = self.job(
                    item,
                    f"{section}[{i}]",
                    now,
                    node_gpus,
                    vcs,
                    running=section == "running",
                    owners=owners,
                )
                if entry.job.id in seen:
                    raise self.fail(
                        f"{entry.key}.id",
                        f"duplicate id {show(entry.job.id)} (also {seen[entry.job.id]})",
                    )
                seen[entry.job.id] = entry.key
                jobs.append(entry)
        return State(
            self.source, now, policy, options, cluster, hived, node_gpus, hosts, tuple(jobs)
        )

    def settings(self, data: dict, policy: str) -> dict[str, Any]:
        """The Chronus settings the file gives, checked by :class:`ChronusSettings` itself (its
        message names the setting; the key path is added here)."""
        given = {name: data[name] for name in _SETTING_KEYS if name in data}
        solver = data.get("solver")
        if solver is not None:
            solver = self.mapping(solver, "solver", tuple(_SOLVER_KEYS))
            given.update((_SOLVER_KEYS[name], value) for name, value in solver.items())
        if given and policy != "chronus":
            first = next(name for name in (*_SETTING_KEYS, "solver") if name in data)
            raise self.fail(first, f"only the chronus policy plans leases (policy is {policy})")
        try:
            ChronusSettings.from_mapping(given)
        except ValueError as exc:
            name, _, why = str(exc).partition(": ")
            key = next(
                (
                    f"solver.{k}"
                    for k, v in _SOLVER_KEYS.items()
                    if v == name and k in (solver or {})
                ),
                name,
            )
            raise self.fail(key, why) from None
        return given

    def cluster(self, raw: Any) -> tuple[Cluster, Any, dict[str, tuple[int, ...]]]:
        if isinstance(raw, dict) and ("physicalCluster" in raw or "hived" in raw):
            return self.hived(raw)
        raw = self.mapping(raw, "cluster", ("nodes", "gpus_per_node"))
        nodes = raw.get("nodes", _MISSING)
        if nodes is _MISSING:
            raise self.fail(
                "cluster",
                "give nodes (+ gpus_per_node), a nodes list, hived: PATH or an inline HiveD config",
            )
        if isinstance(nodes, list):
            if "gpus_per_node" in raw:
                raise self.fail("cluster.gpus_per_node", "only applies when nodes is a count")
            if not nodes:
                raise self.fail("cluster.nodes", "expected at least one node")
            if len(nodes) > MAX_NODES:
                raise self.fail("cluster.nodes", too_large(len(nodes), MAX_NODES))
            out = []
            for i, item in enumerate(nodes):
                where = f"cluster.nodes[{i}]"
                item = self.mapping(item, where, ("name", "gpus"))
                name = self.text(item, "name", where)
                if any(n.name == name for n in out):
                    raise self.fail(f"{where}.name", f"duplicate node name {show(name)}")
                out.append(
                    Node(
                        name,
                        self.integer(
                            item.get("gpus"), f"{where}.gpus", minimum=1, maximum=MAX_GPUS_PER_NODE
                        ),
                    )
                )
            cluster = Cluster(tuple(out))
        else:
            count = self.integer(nodes, "cluster.nodes", minimum=1, maximum=MAX_NODES)
            per_node = self.integer(
                raw.get("gpus_per_node", 8),
                "cluster.gpus_per_node",
                minimum=1,
                maximum=MAX_GPUS_PER_NODE,
            )
            cluster = Cluster.uniform(count, per_node)
        return cluster, None, {n.name: tuple(range(n.gpus)) for n in cluster.nodes}

    def hived(self, raw: dict) -> tuple[Cluster, Any, dict[str, tuple[int, ...]]]:
        from placement import CellAllocator, ConfigError, load_config
        from placement.config import parse_config

        if "hived" in raw:
            raw = self.mapping(raw, "cluster", ("hived",))
            name = self.text(raw, "hived", "cluster")
            path = self.base / name
            try:
                config = load_config(path)
            except ConfigError as exc:
                raise as_input_error(exc, path) from None
        else:
            try:
                config = parse_config(raw, self.source)
            except ConfigError as exc:
                raise self.fail(_join("cluster", exc.key), exc.why) from None
        nodes = CellAllocator(config).nodes()
        cluster = Cluster(tuple(Node(n.name, n.gpus) for n in nodes))
        return cluster, config, {n.name: tuple(sorted(n.free)) for n in nodes}

    def hosts(self, raw: Any, node_gpus: Mapping[str, tuple[int, ...]]) -> dict[str, Any]:
        from chronus_py.layers import HostTopology

        if raw is None:
            return {}
        if not isinstance(raw, dict):
            raise self.fail("hosts", "expected a mapping of node -> host YAML")
        models: dict[Path, HostTopology] = {}
        out = {}
        for node, name in raw.items():
            where = f"hosts.{node}"
            self.node(node, where, node_gpus)
            if name is None:
                continue
            path = self.base / self.text(raw, node, "hosts")
            if path not in models:
                models[path] = HostTopology.from_yaml(path)
            host = models[path]
            for g in node_gpus[node]:
                try:
                    host.gpu(g)
                except KeyError:
                    raise self.fail(
                        where, f"host {host.name} ({path}) has no GPU {g}, which node {node} has"
                    ) from None
            out[node] = host
        return out

    def node(self, name: Any, where: str, node_gpus: Mapping[str, tuple[int, ...]]) -> None:
        if name not in node_gpus:
            raise self.fail(
                where, f"unknown node {show(name)} (the cluster has {len(node_gpus)} nodes)"
            )

    # -- jobs -----------------------------------------------------------------------------------
    def job(
        self,
        raw: Any,
        key: str,
        now: float,
        node_gpus: Mapping[str, tuple[int, ...]],
        vcs: set[str] | None,
        *,
        running: bool,
        owners: dict[tuple[str, int], str],
    ) -> JobEntry:
        raw = self.mapping(raw, key, _JOB_KEYS + (("placement",) if running else ()))
        job_id = raw.get("id")
        if isinstance(job_id, float):  # ``id: 1e5`` is a number, as in YAML 1.2 and JSON
            raise self.fail(f"{key}.id", f"read as the number {job_id!r}: quote the id")
        if isinstance(job_id, bool) or not isinstance(job_id, (str, int)) or job_id == "":
            raise self.fail(f"{key}.id", "required: a string or integer id")
        job_id = str(job_id)
        elastic = None if raw.get("elastic") is None else self.elastic(raw, key)
        sizes = elastic["sizes"] if elastic is not None else ()
        if elastic is not None and not running:
            if "gpus" in raw:
                raise self.fail(
                    f"{key}.gpus",
                    "a waiting elastic job gets its size from the round: leave it out",
                )
            gpus = sizes[-1]
        elif "gpus" not in raw:
            raise self.fail(f"{key}.gpus", "required")
        else:
            gpus = self.integer(raw["gpus"], f"{key}.gpus", minimum=1)
        if gpus > self.total_gpus:
            raise self.fail(
                f"{key}.gpus", f"{gpus} is more than the cluster's {self.total_gpus} GPUs"
            )
        if elastic is not None and gpus not in sizes:
            raise self.fail(f"{key}.gpus", f"{gpus} is not one of the job's sizes {list(sizes)}")
        submit = self.number(raw, "submit", key)
        if submit > now:
            raise self.fail(f"{key}.submit", f"must be <= now ({_show(now)})")
        deadlines = self.deadlines(raw.get("deadlines"), f"{key}.deadlines", submit)
        guaranteed = self.guarantee(raw, key, deadlines)
        tenant = self.text(raw, "tenant", key, "default")
        if vcs is not None and tenant not in vcs:
            raise self.fail(
                f"{key}.tenant",
                f"no virtual cluster {show(tenant)} (have: {', '.join(sorted(vcs))})",
            )
        placement = (
            self.placement(
                raw.get("placement"), f"{key}.placement", gpus, node_gpus, owners, job_id
            )
            if running
            else None
        )
        if elastic is not None:  # its estimate is its iterations at its size, below
            curve = {k: elastic[k] for k in ("iterations", "batch", "sizes", "rates")}
            band, model, work_done = 0.0, None, elastic["iterations_done"]
        else:
            curve = {}
            estimate, band, model = self.estimate(raw, key, gpus, placement)
            work_done = self.number(raw, "progress_seconds", key, default=0.0)
            if estimate is None:
                self.unknown_runtime(key, work_done, guaranteed)
        kind = (
            JobKind.BEST_EFFORT
            if not deadlines
            else JobKind.STRICT_SLO
            if len(deadlines) == 1
            else JobKind.SOFT_SLO
        )
        job = Job(
            id=job_id,
            tenant=tenant,
            gpus=gpus,
            submit=submit,
            kind=kind,
            deadlines=deadlines,
            model=self.text(raw, "model", key, None) or model,
            **curve,
        )
        if curve:
            estimate = job.seconds(gpus)
        return JobEntry(
            key, job, estimate, band, work_done, guaranteed, placement, self.layers(raw, key)
        )

    def elastic(self, raw: dict, key: str) -> dict[str, Any]:
        """An elastic job's curve and work, as the :class:`Job` fields ``iterations``, ``batch``,
        ``sizes``, ``rates`` (and ``iterations_done``), from its
        ``elastic`` mapping and ``model``; its work is in iterations (the throughput curve gives
        seconds at each size), so it takes none of the rigid job's work keys."""
        where = f"{key}.elastic"
        spec = self.mapping(raw["elastic"], where, _ELASTIC_KEYS)
        for name in ("estimate_seconds", "profile", "progress_seconds"):
            if name in raw:
                raise self.fail(
                    f"{key}.{name}",
                    "an elastic job's work is elastic.iterations (and iterations_done)",
                )
        model = self.text(raw, "model", key)
        sizes = {
            name: self.integer(spec.get(name, default), f"{where}.{name}", minimum=1)
            for name, default in (("min_gpus", 1), ("max_gpus", self.total_gpus))
        }
        if sizes["min_gpus"] > sizes["max_gpus"]:
            raise self.fail(f"{where}.min_gpus", f"must be <= max_gpus ({sizes['max_gpus']})")
        if "batch" not in spec:
            raise self.fail(f"{where}.batch", "required: the global batch of its throughput curve")
        batch = self.integer(spec["batch"], f"{where}.batch", minimum=1, maximum=2**31)
        iterations = self.number(spec, "iterations", where, positive=True)
        done = self.number(spec, "iterations_done", where, default=0.0)
        if done > iterations:
            raise self.fail(
                f"{where}.iterations_done", f"must be <= iterations ({_show(iterations)})"
            )
        try:
            on, rates = curve_sizes(
                self.throughputs(),
                model,
                batch,
                sizes["min_gpus"],
                min(sizes["max_gpus"], self.total_gpus),
            )
        except ValueError as exc:
            raise self.fail(where, str(exc)) from None
        return {
            "iterations": iterations,
            "iterations_done": done,
            "batch": batch,
            "sizes": on,
            "rates": rates,
        }

    def throughputs(self):
        """The file's throughput tables (``throughputs:``, else the bundled A100 tables)."""
        if self._throughputs is None:
            from chronus_py.jobs.throughputs import read_throughputs

            self._throughputs = read_throughputs(self._throughputs_dir)
        return self._throughputs

    def deadlines(self, raw: Any, key: str, submit: float) -> tuple[DeadlineOption, ...]:
        if raw is None:
            return ()
        if not isinstance(raw, list):
            raise self.fail(key, "expected a list of {at, value} (tightest first)")
        out: list[DeadlineOption] = []
        for i, item in enumerate(raw):
            where = f"{key}[{i}]"
            item = self.mapping(item, where, ("at", "value"))
            at = self.number(item, "at", where)
            if at < submit:
                raise self.fail(f"{where}.at", f"must be >= submit ({_show(submit)})")
            if out and at <= out[-1].at:
                raise self.fail(
                    f"{where}.at", f"must be later than {key}[{i - 1}].at (tightest first)"
                )
            out.append(
                DeadlineOption(at, self.number(item, "value", where, default=1.0, positive=True))
            )
        return tuple(out)

    def guarantee(
        self, raw: dict, key: str, deadlines: tuple[DeadlineOption, ...]
    ) -> DeadlineOption | None:
        if raw.get("guaranteed_deadline") is None:
            return None
        at = self.number(raw, "guaranteed_deadline", key)
        for option in deadlines:
            if option.at == at:
                return option
        if not deadlines:
            raise self.fail(
                f"{key}.guaranteed_deadline", "a job without deadlines cannot be guaranteed"
            )
        raise self.fail(
            f"{key}.guaranteed_deadline", f"{_show(at)} is not the `at` of one of its deadlines"
        )

    def placement(
        self,
        raw: Any,
        key: str,
        gpus: int,
        node_gpus: Mapping[str, tuple[int, ...]],
        owners: dict[tuple[str, int], str],
        job_id: str,
    ) -> dict[str, tuple[int, ...]]:
        if raw is None:
            raise self.fail(key, "required for a running job: node -> GPU indices")
        if not isinstance(raw, dict):
            raise self.fail(key, "expected a mapping of node -> GPU indices")
        out: dict[str, tuple[int, ...]] = {}
        for node, indices in raw.items():
            where = f"{key}.{node}"
            self.node(node, where, node_gpus)
            if not isinstance(indices, list) or not indices:
                raise self.fail(where, "expected a non-empty list of GPU indices")
            for g in indices:
                self.integer(g, where, minimum=0)
                if g not in node_gpus[node]:
                    raise self.fail(where, f"node {node} has no GPU {g}")
                if (node, g) in owners:
                    raise self.fail(where, f"GPU {g} is also placed for job {owners[node, g]}")
                owners[node, g] = job_id
            out[node] = tuple(sorted(indices))
        held = sum(len(v) for v in out.values())
        if held != gpus:
            raise self.fail(key, f"holds {held} GPUs, but gpus is {gpus}")
        return out

    def estimate(
        self, raw: dict, key: str, gpus: int, placement: Mapping[str, tuple[int, ...]] | None
    ) -> tuple[float | None, float, str | None]:
        """The job's estimated work, its relative band, and the profile's model if any; no
        estimate (None) when the file gives neither figure."""
        has_seconds, has_profile = "estimate_seconds" in raw, "profile" in raw
        if has_seconds and has_profile:
            raise self.fail(key, "give at most one of estimate_seconds and profile")
        if not has_profile:
            if not has_seconds:
                return None, 0.0, None
            seconds = self.number(raw, "estimate_seconds", key, positive=True)
            if seconds > MAX_JOB_SECONDS:
                raise self.fail(f"{key}.estimate_seconds", too_large(seconds, MAX_JOB_SECONDS))
            return seconds, 0.0, None
        where = f"{key}.profile"
        spec = self.mapping(raw["profile"], where, ("file", "iterations"))
        profile = self.profile(self.text(spec, "file", where))
        iterations = self.integer(
            spec.get("iterations"), f"{where}.iterations", minimum=1, maximum=2**53
        )
        try:
            if placement is None:
                runtime = profile.runtime(iterations, gpus)
            else:
                runtime = profile.runtime(iterations, placement=placement)
        except ValueError as exc:
            raise self.fail(where, str(exc)) from None
        band = (runtime.high - runtime.seconds) / runtime.seconds if runtime.seconds else 0.0
        return runtime.seconds, band, profile.model_ or None

    def unknown_runtime(
        self, key: str, work_done: float, guaranteed: DeadlineOption | None
    ) -> None:
        """A job without an estimate is one being measured: it cannot hold a guarantee, and
        once measured long enough the manager knows its runtime and must say it."""
        if guaranteed is not None:
            raise self.fail(
                f"{key}.guaranteed_deadline",
                "a guarantee needs an estimate: give estimate_seconds or profile",
            )
        if work_done >= MEASURE_WINDOW:
            raise self.fail(
                key,
                f"progress_seconds {_show(work_done)} is past the {_show(MEASURE_WINDOW)} s "
                "measurement window: the job is measured, give its estimate_seconds",
            )

    def profile(self, name: str):
        from chronus_py.profiler import Profile

        path = self.base / name
        if path not in self._profiles:
            from chronus_py.inputs import load_json

            data = load_json(path, what="profile")
            self._profiles[path] = Profile.from_dict(data, source=str(path))
        return self._profiles[path]

    def layers(self, raw: dict, key: str) -> LayerSpec:
        from chronus_py.layers.presets import DEFAULT_PRESET, resolve_thread_names

        cgroup = self.text(raw, "cgroup", key, None)
        preset = self.text(raw, "preset", key, DEFAULT_PRESET)
        names = raw.get("thread_names") or {}
        if not isinstance(names, dict) or not all(isinstance(v, list) for v in names.values()):
            raise self.fail(f"{key}.thread_names", "expected tier -> list of thread names")
        names = {str(k): tuple(v) for k, v in names.items()}
        checked = (preset, tuple(sorted(names.items())))
        if checked not in self._presets:
            try:
                resolve_thread_names(preset, names)
            except (TypeError, ValueError) as exc:
                field = "thread_names" if names and "thread_names" in str(exc) else "preset"
                raise self.fail(f"{key}.{field}", str(exc)) from None
            self._presets.add(checked)
        opt_in = raw.get("opt_in", True)
        if not isinstance(opt_in, bool):
            raise self.fail(f"{key}.opt_in", f"expected true or false, got {show(opt_in)}")
        return LayerSpec(cgroup, preset, names, opt_in)


def _join(base: str, name: str) -> str:
    return f"{base}.{name}" if base else name


def _show(value: float) -> str:
    """A time as the user wrote it: 120, not 120.0."""
    return str(int(value)) if float(value).is_integer() else str(value)
