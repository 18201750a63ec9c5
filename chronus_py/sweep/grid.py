"""The sweep grid: which runs a comparison makes, and the one frozen record that names a run.

A grid is the product of traces x policies x parameters, and every parameter is an option of the
one replay setup (:class:`~chronus_py.engine.setup.ReplaySetup`), so anything ``chronus replay``
can do can be swept: cluster size or HiveD config, slowdown, the profiling stage, load, error.
Parameters that cannot change a run are not multiplied out: the lease only exists for policies
that take one (Chronus), and the seed only matters when estimates are drawn (``sigma`` above 0,
or the profiling stage). So a baseline appears once per trace, cluster, load and error setting
however many lease lengths or seeds the grid lists.

Elastic policies (``elastic-chronus``, ``elasticflow``, ``elastic-edf``: ``chronus replay
--elastic``) sweep in the same grid on ITP traces: for them the throughput tables
(``throughputs``) and the resize overhead scale (``resize_scale``) are parameters, and the rigid
replay's options (load, error, profiling, HiveD clusters, slowdown) do not exist, so a grid that
asks for both is refused rather than half ignored.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

from chronus_py.engine.setup import ESTIMATES, ReplaySetup
from chronus_py.errors import InputError
from chronus_py.inputs import load_yaml, show
from chronus_py.policies import ELASTIC as ELASTIC_POLICIES
from chronus_py.policies import POLICIES, policy_options

RIGID_ONLY = {
    "load": 1.0,
    "sigma": 0.0,
    "cluster": None,
    "slowdown": False,
    "profiling": False,
    "estimates": "oracle",
}
"""Rigid replay options, with the one value an elastic run has."""

CONFIG_COLUMNS = (
    "run",
    "trace",
    "policy",
    "lease_min",
    "nodes",
    "gpus_per_node",
    "load",
    "sigma",
    "seed",
    "options",
    "cluster",
    "tenant_map",
    "slowdown",
    "round_requests",
    "profiling",
    "profiling_nodes",
    "profile_minutes",
    "profiling_order",
    "estimates",
    "throughputs",
    "resize_scale",
)
# Replay options beyond the original grid: they join a run's key only when not at their default,
# so the keys of earlier results (and their resumption) stay as they were.
EXTRA = {
    "cluster": None,
    "tenant_map": None,
    "slowdown": False,
    "round_requests": False,
    "profiling": False,
    "profiling_nodes": 4,
    "profile_minutes": 5.0,
    "profiling_order": "deadline",
    "estimates": "oracle",
    "throughputs": None,
    "resize_scale": 1.0,
}


def is_elastic(policy: str) -> bool:
    return policy in ELASTIC_POLICIES


def takes_lease(policy: str) -> bool:
    """Whether the policy has a ``lease`` setting (seconds)."""
    return not is_elastic(policy) and "lease" in policy_options(policy)


@dataclass(frozen=True, slots=True)
class RunConfig:
    """One replay of the sweep. ``load`` 2.0 means jobs arrive twice as fast (submit times / 2);
    ``lease_min`` is None for policies without a lease, ``seed`` None when no estimate is drawn.
    The rest are :class:`ReplaySetup` options (``cluster``: a HiveD config path)."""

    trace: str
    policy: str
    lease_min: float | None = None
    nodes: int = 120
    gpus_per_node: int = 8
    load: float = 1.0
    sigma: float = 0.0
    seed: int | None = None
    options: str = "{}"
    cluster: str | None = None
    tenant_map: str | None = None
    slowdown: bool = False
    round_requests: bool = False
    profiling: bool = False
    profiling_nodes: int = 4
    profile_minutes: float = 5.0
    profiling_order: str = "deadline"
    estimates: str = "oracle"
    throughputs: str | None = None
    resize_scale: float = 1.0

    @property
    def elastic(self) -> bool:
        return is_elastic(self.policy)

    @property
    def key(self) -> str:
        """A stable, readable id: the resume test and the join key between table and series."""
        lease = "-" if self.lease_min is None else f"{self.lease_min:g}"
        seed = "-" if self.seed is None else str(self.seed)
        extra = "".join(
            f"|{name}={getattr(self, name)}"
            for name, default in EXTRA.items()
            if getattr(self, name) != default
        )
        return (
            f"{self.trace}|{self.policy}|lease={lease}|cluster={self.nodes}x{self.gpus_per_node}"
            f"|load={self.load:g}|sigma={self.sigma:g}|seed={seed}|options={self.options}{extra}"
        )

    def columns(self) -> dict[str, Any]:
        return {"run": self.key, **{f.name: getattr(self, f.name) for f in fields(self)}}

    def policy_options(self) -> dict[str, Any]:
        options = json.loads(self.options)
        if self.lease_min is not None:
            options["lease"] = self.lease_min * 60.0
        return options

    def setup(self) -> ReplaySetup:
        """The replay this run is."""
        return ReplaySetup(
            trace=self.trace,
            policy=self.policy,
            options=self.policy_options(),
            nodes=self.nodes,
            gpus_per_node=self.gpus_per_node,
            cluster=None if self.cluster is None else Path(self.cluster),
            tenant_map=None if self.tenant_map is None else Path(self.tenant_map),
            slowdown=self.slowdown,
            round_requests=self.round_requests,
            load=self.load,
            profiling=self.profiling,
            profiling_nodes=self.profiling_nodes,
            profile_minutes=self.profile_minutes,
            profiling_order=self.profiling_order,
            estimates=self.estimates,
            sigma=self.sigma,
            seed=self.seed or 0,
        )


@dataclass(frozen=True)
class Grid:
    """What to sweep. ``options`` maps a policy name to extra constructor arguments."""

    traces: tuple[str, ...]
    policies: tuple[str, ...]
    lease_min: tuple[float, ...] = (20.0,)
    nodes: tuple[int, ...] = (120,)
    gpus_per_node: int = 8
    load: tuple[float, ...] = (1.0,)
    sigma: tuple[float, ...] = (0.0,)
    seeds: tuple[int, ...] = (0,)
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    cluster: tuple[str | None, ...] = (None,)
    slowdown: tuple[bool, ...] = (False,)
    profiling: tuple[bool, ...] = (False,)
    profiling_nodes: tuple[int, ...] = (4,)
    profile_minutes: tuple[float, ...] = (5.0,)
    profiling_order: tuple[str, ...] = ("deadline",)
    estimates: tuple[str, ...] = ("oracle",)
    resize_scale: tuple[float, ...] = (1.0,)
    tenant_map: str | None = None
    round_requests: bool = False
    throughputs: str | None = None

    def runs(self) -> list[RunConfig]:
        """Every distinct run, in grid order (traces outermost)."""
        seen: dict[str, RunConfig] = {}
        for (
            trace,
            policy,
            lease,
            nodes,
            load,
            sigma,
            seed,
            cluster,
            slowdown,
            profiling,
            pnodes,
            pminutes,
            porder,
            estimates,
            resize_scale,
        ) in itertools.product(
            self.traces,
            self.policies,
            self.lease_min,
            self.nodes,
            self.load,
            self.sigma,
            self.seeds,
            self.cluster,
            self.slowdown,
            self.profiling,
            self.profiling_nodes,
            self.profile_minutes,
            self.profiling_order,
            self.estimates,
            self.resize_scale,
        ):
            profile = {
                "profiling_nodes": pnodes,
                "profile_minutes": float(pminutes),
                "profiling_order": porder,
            }
            config = RunConfig(
                trace=trace,
                policy=policy,
                lease_min=float(lease) if takes_lease(policy) else None,
                nodes=nodes,
                gpus_per_node=self.gpus_per_node,
                load=float(load),
                sigma=float(sigma),
                seed=seed if sigma > 0 or profiling or estimates != "oracle" else None,
                options=json.dumps(dict(self.options.get(policy, {})), sort_keys=True),
                cluster=cluster,
                tenant_map=self.tenant_map if cluster else None,
                slowdown=slowdown,
                round_requests=self.round_requests,
                profiling=profiling,
                estimates=estimates,
                **(profile if profiling else {}),
                **(
                    {"throughputs": self.throughputs, "resize_scale": float(resize_scale)}
                    if is_elastic(policy)
                    else {}
                ),
            )
            seen.setdefault(config.key, config)
        return list(seen.values())


def _boolean(value: Any) -> bool:
    """on/off, true/false, yes/no, 1/0 (a grid file or a comma-separated flag)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("on", "true", "yes", "1"):
        return True
    if text in ("off", "false", "no", "0"):
        return False
    raise ValueError(value)


LIST_KEYS = {
    "traces": str,
    "policies": str,
    "lease_min": float,
    "nodes": int,
    "load": float,
    "sigma": float,
    "seeds": int,
    "cluster": str,
    "slowdown": _boolean,
    "profiling": _boolean,
    "profiling_nodes": int,
    "profile_minutes": float,
    "profiling_order": str,
    "estimates": str,
    "resize_scale": float,
}
SCALAR_KEYS = ("gpus_per_node", "options", "tenant_map", "round_requests", "throughputs")


def make_grid(source: str | Path, values: Mapping[str, Any]) -> Grid:
    """Validate raw values (from YAML or the command line) into a Grid; errors name the key."""
    unknown = sorted(map(str, set(values) - set(LIST_KEYS) - set(SCALAR_KEYS)))
    if unknown:
        raise InputError(
            source, f"unknown key (have: {', '.join([*LIST_KEYS, *SCALAR_KEYS])})", field=unknown[0]
        )
    kwargs: dict[str, Any] = {}
    for key, kind in LIST_KEYS.items():
        if key not in values:
            continue
        raw = values[key]
        items = raw if isinstance(raw, list) else [raw]
        try:
            parsed = tuple(kind(v) for v in items)
        except (TypeError, ValueError):
            name = "on/off" if kind is _boolean else kind.__name__
            raise InputError(
                source, f"expected {name} values, got {show(raw)}", field=key
            ) from None
        if kind is float and not all(math.isfinite(v) for v in parsed):
            raise InputError(source, f"expected finite numbers, got {show(raw)}", field=key)
        if not parsed:
            raise InputError(source, "needs at least one value", field=key)
        kwargs[key] = parsed
    for key in ("traces", "policies"):
        if key not in kwargs:
            raise InputError(source, "is required", field=key)
    known = tuple(POLICIES)
    for policy in kwargs["policies"]:
        if policy not in known:
            raise InputError(
                source, f"unknown policy {policy!r} (have: {', '.join(known)})", field="policies"
            )
    elastic = [p for p in kwargs["policies"] if is_elastic(p)]
    if elastic:
        for key, only in RIGID_ONLY.items():
            if any(v != only for v in kwargs.get(key, ())):
                raise InputError(
                    source,
                    f"elastic policies ({', '.join(elastic)}) replay without it: sweep it in "
                    "another grid",
                    field=key,
                )
    if any(v < 0 for v in kwargs.get("resize_scale", ())):
        raise InputError(source, "must be >= 0", field="resize_scale")
    if values.get("throughputs") is not None:
        if not Path(str(values["throughputs"])).is_dir():
            raise InputError(
                source, f"no such directory {str(values['throughputs'])!r}", field="throughputs"
            )
        kwargs["throughputs"] = str(values["throughputs"])
    for key in ("lease_min", "load"):
        if any(v <= 0 for v in kwargs.get(key, ())):
            raise InputError(source, "must be > 0", field=key)
    for key in ("nodes", "profiling_nodes", "profile_minutes"):
        if any(v <= 0 for v in kwargs.get(key, ())):
            raise InputError(source, "must be > 0", field=key)
    for path in kwargs.get("cluster", ()):
        if not Path(path).is_file():
            raise InputError(source, f"no such HiveD config file {path!r}", field="cluster")
    if any(v not in ("deadline", "fifo") for v in kwargs.get("profiling_order", ())):
        raise InputError(source, "must be deadline or fifo", field="profiling_order")
    if any(v not in ESTIMATES for v in kwargs.get("estimates", ())):
        raise InputError(source, f"must be one of {', '.join(ESTIMATES)}", field="estimates")
    for key in ("tenant_map",):
        if values.get(key) is not None:
            kwargs[key] = str(values[key])
    if "round_requests" in values:
        try:
            kwargs["round_requests"] = _boolean(values["round_requests"])
        except ValueError:
            raise InputError(source, "expected on or off", field="round_requests") from None
    if any(v < 0 for v in kwargs.get("sigma", ())):
        raise InputError(source, "must be >= 0", field="sigma")
    if "gpus_per_node" in values:
        gpn = values["gpus_per_node"]
        if not isinstance(gpn, int) or isinstance(gpn, bool) or gpn <= 0:
            raise InputError(
                source, f"must be a positive integer, got {gpn!r}", field="gpus_per_node"
            )
        kwargs["gpus_per_node"] = gpn
    options = values.get("options", {}) or {}
    if not isinstance(options, dict) or not all(isinstance(v, dict) for v in options.values()):
        raise InputError(source, "must map policy names to {argument: value}", field="options")
    for policy, opts in options.items():
        if policy not in POLICIES or is_elastic(policy):
            why = (
                f"{policy!r} takes no options"
                if is_elastic(policy)
                else f"unknown policy {policy!r}"
            )
            raise InputError(source, why, field="options")
        allowed = set(policy_options(policy)) - {"lease"}
        bad = sorted(map(str, set(opts) - allowed))
        if bad:
            raise InputError(
                source,
                f"{policy} has no option {bad[0]!r} (have: {', '.join(sorted(allowed))})",
                field="options",
            )
    kwargs["options"] = options
    return Grid(**kwargs)


def read_grid(path: Path) -> dict[str, Any]:
    """The raw mapping of a grid YAML file (validated later, together with command-line values)."""
    data = load_yaml(path, what="grid file")
    if not isinstance(data, dict):
        raise InputError(path, "must be a mapping of grid keys (traces, policies, load, ...)")
    return data
