"""One replay setup: everything a replay is made of, as one value both ``chronus replay`` and every
``chronus compare`` run build, so any replay option can be swept.

:class:`ReplaySetup` names the trace, the cluster (nodes x GPUs, or a HiveD config with a map from
trace tenants to its virtual clusters), the policy and its options, the load factor, and how
estimates relate to true runtimes (``estimates``): ``oracle`` (default: the scheduler knows each
true duration, as the Chronus artifact; with ``sigma`` the trace duration is the estimate and
true runtimes deviate log-normally), ``pool`` (``profiling``: every new job is measured on a
small pool first and scheduled by that estimate, off by ``sigma``), or ``realistic`` (no runtime
is known: each job is measured in place on its own GPUs, ``chronus_py.estimates.in_place``).
Whenever estimates can be wrong, running jobs are re-estimated from observed progress.

An elastic policy (``elastic-chronus``, ``elasticflow``, ``elastic-edf``) makes the setup an
elastic replay (``chronus_py.engine.elastic_setup.run_elastic_setup``): the same trace options,
cluster size and load, plus the throughput tables, the resize overhead scale and elastic Chronus's
admission backend. ``overhead`` names the overhead model for either kind
(``chronus_py.jobs.overhead``: ``chronus-restart``, the default of a rigid replay, or ``pause``, an
elastic one's), scaled by ``resize_scale``.

``run_setup`` reads, checks and replays; bad values raise one-line ``InputError`` naming the
option, before any replay starts.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from chronus_py.engine.loop import NO_ESTIMATES, Progress, ReplayResult, replay
from chronus_py.engine.profiling import ORDERS, ProfilingPool
from chronus_py.errors import InputError
from chronus_py.estimates import Noisy
from chronus_py.estimates.in_place import InPlaceEstimation
from chronus_py.inputs import as_input_error, load_yaml
from chronus_py.jobs.model import Cluster, Job, Node
from chronus_py.jobs.overhead import Overhead, default_overhead, make_overhead
from chronus_py.jobs.throughputs import read_throughputs
from chronus_py.policies import ELASTIC, make_policy
from chronus_py.policies.base import Policy
from chronus_py.readers import DEFAULT_TRACE, TraceRead, read_trace
from chronus_py.readers.elastic import read_elastic_trace
from chronus_py.scheduler import SpeedModel
from chronus_py.selector import ChronusSettings
from placement import Allocator, CellAllocator, PlacementError, load_config
from placement.limits import MAX_GPUS_PER_NODE, MAX_JOB_SECONDS, MAX_NODES, MAX_SECONDS
from placement.slowdown import speed_factor

REESTIMATE_EVERY = 300.0
ESTIMATES = ("oracle", "pool", "realistic")
ELASTIC_BACKENDS = ("greedy", "cpsat")


@dataclass(frozen=True)
class ReplaySetup:
    """One replay. ``options`` are the policy's (Chronus: :class:`ChronusSettings` fields);
    ``load`` 2.0 makes jobs arrive twice as fast (submit times / 2, deadlines keep their offsets);
    ``cluster`` is a HiveD config that overrides ``nodes`` x ``gpus_per_node``; ``round_requests``
    makes the allocator hold each job's {1, 2, 4, whole nodes} round-up."""

    trace: str = DEFAULT_TRACE
    policy: str = "chronus"
    options: Mapping[str, Any] = field(default_factory=dict)
    nodes: int = 120
    gpus_per_node: int = 8
    cluster: Path | None = None
    tenant_map: Path | None = None
    slowdown: bool = False
    round_requests: bool = False
    load: float = 1.0
    profiling: bool = False
    profiling_nodes: int = 4
    profile_minutes: float = 5.0
    profiling_order: str = "deadline"
    estimates: str = "oracle"
    sigma: float = 0.0
    seed: int = 0
    format: str | None = None
    columns: str | None = None
    time_unit: str | None = None
    skip_bad_rows: bool = False
    throughputs: Path | None = None
    resize_scale: float = 1.0
    overhead: str | None = None
    elastic_backend: str = "greedy"

    @property
    def elastic(self) -> bool:
        """An elastic replay: jobs resize by their throughput curves."""
        return self.policy in ELASTIC

    def check(self) -> None:
        """Refuse values no replay could use, naming the option as the command line spells it."""
        if self.elastic:
            self.check_elastic()
        if self.cluster is None and (self.nodes <= 0 or self.gpus_per_node <= 0):
            raise InputError("--nodes/--gpus-per-node", "must be positive")
        if self.cluster is None and (
            self.nodes > MAX_NODES or self.gpus_per_node > MAX_GPUS_PER_NODE
        ):
            raise InputError(
                "--nodes/--gpus-per-node",
                f"at most {MAX_NODES:,} nodes of {MAX_GPUS_PER_NODE:,} GPUs",
            )
        if self.cluster is None and self.tenant_map is not None:
            raise InputError("--tenant-map", "only applies with --cluster")
        if not (math.isfinite(self.resize_scale) and self.resize_scale >= 0):
            raise InputError("--resize-scale", "must be >= 0")
        if not (math.isfinite(self.load) and self.load > 0):
            raise InputError("--load", f"must be > 0, got {self.load}")
        if not (math.isfinite(self.sigma) and self.sigma >= 0):
            raise InputError("--estimate-sigma", "must be >= 0")
        if self.profiling and (self.profiling_nodes <= 0 or not self.profile_minutes > 0):
            raise InputError("--profiling-nodes/--profile-minutes", "must be positive")
        if self.profiling_order not in ORDERS:
            raise InputError("--profiling-order", f"must be one of {', '.join(ORDERS)}")
        if self.estimates not in ESTIMATES:
            raise InputError("--estimates", f"must be one of {', '.join(ESTIMATES)}")
        if self.profiling and self.estimates == "realistic":
            raise InputError(
                "--profiling", "is the pool model; it cannot go with --estimates realistic"
            )
        check_settings(self.options)

    def check_elastic(self) -> None:
        estimates = {
            "--profiling": self.profiling,
            "--estimates": self.estimates != "oracle",
            "--estimate-sigma": self.sigma != 0,
        }
        given = [flag for flag, on in estimates.items() if on]
        if given:
            raise InputError(given[0], f"refused with --elastic: {NO_ESTIMATES}")
        rigid_only = {
            "--cluster": self.cluster is not None,
            "--slowdown": self.slowdown,
            "--round-requests": self.round_requests,
        }
        given = [flag for flag, on in rigid_only.items() if on]
        if given:
            raise InputError("--elastic", f"does not combine with {', '.join(given)} yet")
        if self.elastic_backend not in ELASTIC_BACKENDS:
            raise InputError("--elastic-backend", f"must be one of {', '.join(ELASTIC_BACKENDS)}")
        if self.elastic_backend != "greedy" and self.policy != "elastic-chronus":
            raise InputError(
                "--elastic-backend", f"only elastic-chronus has one, not {self.policy}"
            )


def check_settings(options: Mapping[str, Any]) -> None:
    """Refuse a bad policy setting naming its flag (``--lease``), for rigid and elastic replays
    alike: each given setting is checked on its own by :class:`ChronusSettings` (the others at
    their defaults), and a lease may be at most ``MAX_JOB_SECONDS`` (366 days, the longest run
    time a trace may hold: a longer lease is one plan for every job's whole run, and the elastic
    slot grid of 1e308-second slots overflowed to no guarantee at all)."""
    flags = {f.name: f.metadata["flag"] for f in fields(ChronusSettings)}
    for name, value in options.items():
        if name not in flags:
            continue  # an option the policy does not take: make_policy names it
        try:
            ChronusSettings.from_mapping({name: value})
        except (TypeError, ValueError) as exc:
            raise InputError(flags[name], str(exc).removeprefix(f"{name}: ")) from None
        if name == "lease" and value > MAX_JOB_SECONDS:
            raise InputError(flags[name], f"must be <= {MAX_JOB_SECONDS:,.0f} seconds (366 days)")


def read_setup_trace(setup: ReplaySetup, *, cluster_gpus: int | None = None) -> TraceRead:
    """The trace as ``setup`` reads it, with its format, column map, time unit and bad-row
    choice: rigid jobs, or for an elastic replay jobs on the throughput tables
    (``setup.throughputs``) with sizes up to ``cluster_gpus``."""
    options = {
        "format": setup.format,
        "columns": setup.columns,
        "time_unit": setup.time_unit,
        "skip_bad_rows": setup.skip_bad_rows,
    }
    if setup.elastic:
        table = read_throughputs(setup.throughputs)
        return read_elastic_trace(setup.trace, table, cluster_gpus=cluster_gpus, **options)
    return read_trace(setup.trace, **options)


@dataclass(frozen=True)
class ClusterSetup:
    jobs: tuple[Job, ...]
    cluster: Cluster
    allocator: Allocator | None
    speed: SpeedModel | None


def read_tenant_map(path: Path) -> dict[str, str]:
    data = load_yaml(path, what="tenant map")
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in data.items()
    ):
        raise InputError(path, "must map tenant names to virtual cluster names")
    return data


def setup_cluster(jobs: Sequence[Job], setup: ReplaySetup) -> ClusterSetup:
    """The cluster, its allocator and slowdown model, and the jobs with trace tenants mapped onto
    the config's virtual clusters (HiveD config only)."""
    if setup.cluster is None:
        cluster = Cluster.uniform(setup.nodes, setup.gpus_per_node)
        speed = (lambda job, where: speed_factor(where, job.model)) if setup.slowdown else None
        return ClusterSetup(tuple(jobs), cluster, None, speed)
    try:
        allocator = CellAllocator(load_config(setup.cluster))
    except PlacementError as exc:
        raise as_input_error(exc, setup.cluster) from None
    cluster = Cluster(tuple(Node(name, gpus) for name, gpus in allocator.config.nodes()))
    mapping = read_tenant_map(setup.tenant_map) if setup.tenant_map else {}
    vcs = set(allocator.config.virtual_clusters)
    for tenant, vc in mapping.items():
        if vc not in vcs:
            raise InputError(
                setup.tenant_map,
                f"{vc!r} is not a virtual cluster of {setup.cluster} "
                f"(have: {', '.join(sorted(vcs))})",
                field=f"tenant {tenant}",
            )
    mapped = []
    for job in jobs:
        vc = mapping.get(job.tenant, mapping.get("default", job.tenant))
        if vc not in vcs:
            raise InputError(
                setup.tenant_map or setup.cluster,
                f"tenant {job.tenant!r} (job {job.id}) has no "
                f"virtual cluster (have: {', '.join(sorted(vcs))}); map it with --tenant-map",
            )
        mapped.append(dataclasses.replace(job, tenant=vc))
    speed = (
        (lambda job, where: speed_factor(where, job.model, topology=allocator))
        if setup.slowdown
        else None
    )
    return ClusterSetup(tuple(mapped), cluster, allocator, speed)


def scale_load(jobs: Sequence[Job], load: float) -> tuple[Job, ...]:
    """Compress (load > 1) or stretch submit times by ``1/load``; deadlines keep their offsets.
    A load that stretches the last submission past ``MAX_SECONDS`` (``--load 1e-300``) is
    refused: the lease plan's slot indices overflowed (a traceback)."""
    if load == 1.0:
        return tuple(jobs)
    last = max((job.submit for job in jobs), default=0.0) / load
    if not last <= MAX_SECONDS:
        raise InputError(
            "--load",
            f"{load:g} puts the last submission at {last:.3g} s, past the {MAX_SECONDS:g} s "
            "any time may be",
        )
    out = []
    for job in jobs:
        submit = job.submit / load
        shift = submit - job.submit
        deadlines = tuple(dataclasses.replace(d, at=d.at + shift) for d in job.deadlines)
        out.append(dataclasses.replace(job, submit=submit, deadlines=deadlines))
    return tuple(out)


def overhead_model(setup: ReplaySetup) -> Overhead:
    """The overhead model ``setup`` names (else its kind's: ``pause`` for an elastic replay,
    ``chronus-restart`` for a rigid one), scaled by ``resize_scale``."""
    name = setup.overhead or default_overhead(setup.elastic)
    try:
        return make_overhead(name, setup.resize_scale)
    except ValueError as exc:
        raise InputError("--overhead", str(exc)) from None


def estimation(setup: ReplaySetup) -> dict[str, Any]:
    """The replay's estimation keyword arguments (see the module docstring)."""
    if setup.estimates == "realistic":
        return {"estimation": InPlaceEstimation(sigma=setup.sigma, seed=setup.seed)}
    if setup.profiling or setup.estimates == "pool":
        pool = ProfilingPool(
            setup.profiling_nodes,
            setup.gpus_per_node,
            setup.profile_minutes * 60,
            sigma=setup.sigma,
            seed=setup.seed,
            order=setup.profiling_order,
        )
        return {"profiling": pool, "reestimate_every": REESTIMATE_EVERY}
    if setup.sigma > 0:
        return {"truth": Noisy(setup.sigma, setup.seed), "reestimate_every": REESTIMATE_EVERY}
    return {}


def run_setup(
    setup: ReplaySetup,
    *,
    trace: TraceRead | None = None,
    wrap_policy: Callable[[Policy], Policy] | None = None,
    on_read: Callable[[TraceRead], None] | None = None,
    on_progress: Progress | None = None,
) -> tuple[ReplayResult, TraceRead]:
    """Read the trace (unless given, already read), build cluster, policy and estimation from
    ``setup``, and replay. ``on_read`` sees the trace as read (the CLI says which format it
    detected); ``wrap_policy`` lets a caller observe the policy (a sweep records busy GPUs so)."""
    setup.check()
    trace = trace or read_setup_trace(setup)
    if on_read is not None:
        on_read(trace)
    if not trace.jobs:
        raise InputError(setup.trace, "no job left to replay")
    built = setup_cluster(scale_load(trace.jobs, setup.load), setup)
    policy = make_policy(setup.policy, setup.options)
    if wrap_policy is not None:
        policy = wrap_policy(policy)
    result = replay(
        built.jobs,
        built.cluster,
        policy,
        allocator=built.allocator,
        speed=built.speed,
        round_requests=setup.round_requests,
        overhead=overhead_model(setup),
        on_progress=on_progress,
        **estimation(setup),
    )
    return result, trace
