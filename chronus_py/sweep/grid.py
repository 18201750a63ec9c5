"""The sweep grid: which runs a comparison makes, and the one frozen record that names a run.

A grid is the product of traces x policies x parameters. Parameters that cannot change a run are
not multiplied out: the lease only exists for policies that take one (Chronus), and the seed only
matters when the estimation error ``sigma`` is above 0. So a baseline appears once per trace,
cluster, load and error setting however many lease lengths or seeds the grid lists.
"""
from __future__ import annotations

import inspect
import itertools
import json
import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

from chronus_py.errors import InputError
from chronus_py.inputs import load_yaml, show
from chronus_py.policies import POLICIES

CONFIG_COLUMNS = ("run", "trace", "policy", "lease_min", "nodes", "gpus_per_node", "load", "sigma",
                  "seed", "options")


def takes_lease(policy: str) -> bool:
    """Whether the policy's constructor has a ``lease`` parameter (seconds)."""
    return "lease" in inspect.signature(POLICIES[policy]).parameters


@dataclass(frozen=True, slots=True)
class RunConfig:
    """One replay of the sweep. ``load`` 2.0 means jobs arrive twice as fast (submit times / 2);
    ``lease_min`` is None for policies without a lease, ``seed`` None when ``sigma`` is 0."""

    trace: str
    policy: str
    lease_min: float | None = None
    nodes: int = 120
    gpus_per_node: int = 8
    load: float = 1.0
    sigma: float = 0.0
    seed: int | None = None
    options: str = "{}"

    @property
    def key(self) -> str:
        """A stable, readable id: the resume test and the join key between table and series."""
        lease = "-" if self.lease_min is None else f"{self.lease_min:g}"
        seed = "-" if self.seed is None else str(self.seed)
        return (f"{self.trace}|{self.policy}|lease={lease}|cluster={self.nodes}x{self.gpus_per_node}"
                f"|load={self.load:g}|sigma={self.sigma:g}|seed={seed}|options={self.options}")

    def columns(self) -> dict[str, Any]:
        return {"run": self.key, **{f.name: getattr(self, f.name) for f in fields(self)}}

    def policy_options(self) -> dict[str, Any]:
        options = json.loads(self.options)
        if self.lease_min is not None:
            options["lease"] = self.lease_min * 60.0
        return options


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

    def runs(self) -> list[RunConfig]:
        """Every distinct run, in grid order (traces outermost)."""
        seen: dict[str, RunConfig] = {}
        for trace, policy, lease, nodes, load, sigma, seed in itertools.product(
                self.traces, self.policies, self.lease_min, self.nodes, self.load, self.sigma, self.seeds):
            config = RunConfig(
                trace=trace, policy=policy, lease_min=float(lease) if takes_lease(policy) else None,
                nodes=nodes, gpus_per_node=self.gpus_per_node, load=float(load), sigma=float(sigma),
                seed=seed if sigma > 0 else None,
                options=json.dumps(dict(self.options.get(policy, {})), sort_keys=True))
            seen.setdefault(config.key, config)
        return list(seen.values())


LIST_KEYS = {"traces": str, "policies": str, "lease_min": float, "nodes": int, "load": float,
             "sigma": float, "seeds": int}


def make_grid(source: str | Path, values: Mapping[str, Any]) -> Grid:
    """Validate raw values (from YAML or the command line) into a Grid; errors name the key."""
    unknown = sorted(map(str, set(values) - set(LIST_KEYS) - {"gpus_per_node", "options"}))
    if unknown:
        raise InputError(source, f"unknown key (have: {', '.join([*LIST_KEYS, 'gpus_per_node', 'options'])})",
                         field=unknown[0])
    kwargs: dict[str, Any] = {}
    for key, kind in LIST_KEYS.items():
        if key not in values:
            continue
        raw = values[key]
        items = raw if isinstance(raw, list) else [raw]
        try:
            parsed = tuple(kind(v) for v in items)
        except (TypeError, ValueError):
            raise InputError(source, f"expected {kind.__name__} values, got {show(raw)}", field=key) from None
        if kind is float and not all(math.isfinite(v) for v in parsed):
            raise InputError(source, f"expected finite numbers, got {show(raw)}", field=key)
        if not parsed:
            raise InputError(source, "needs at least one value", field=key)
        kwargs[key] = parsed
    for key in ("traces", "policies"):
        if key not in kwargs:
            raise InputError(source, "is required", field=key)
    for policy in kwargs["policies"]:
        if policy not in POLICIES:
            raise InputError(source, f"unknown policy {policy!r} (have: {', '.join(POLICIES)})", field="policies")
    for key in ("lease_min", "load"):
        if any(v <= 0 for v in kwargs.get(key, ())):
            raise InputError(source, "must be > 0", field=key)
    if any(v <= 0 for v in kwargs.get("nodes", ())):
        raise InputError(source, "must be > 0", field="nodes")
    if any(v < 0 for v in kwargs.get("sigma", ())):
        raise InputError(source, "must be >= 0", field="sigma")
    if "gpus_per_node" in values:
        gpn = values["gpus_per_node"]
        if not isinstance(gpn, int) or isinstance(gpn, bool) or gpn <= 0:
            raise InputError(source, f"must be a positive integer, got {gpn!r}", field="gpus_per_node")
        kwargs["gpus_per_node"] = gpn
    options = values.get("options", {}) or {}
    if not isinstance(options, dict) or not all(isinstance(v, dict) for v in options.values()):
        raise InputError(source, "must map policy names to {argument: value}", field="options")
    for policy, opts in options.items():
        if policy not in POLICIES:
            raise InputError(source, f"unknown policy {policy!r}", field="options")
        allowed = set(inspect.signature(POLICIES[policy]).parameters) - {"lease", "name", "selector"}
        bad = sorted(map(str, set(opts) - allowed))
        if bad:
            raise InputError(source, f"{policy} has no option {bad[0]!r} (have: {', '.join(sorted(allowed))})",
                             field="options")
    kwargs["options"] = options
    return Grid(**kwargs)


def read_grid(path: Path) -> dict[str, Any]:
    """The raw mapping of a grid YAML file (validated later, together with command-line values)."""
    data = load_yaml(path, what="grid file")
    if not isinstance(data, dict):
        raise InputError(path, "must be a mapping of grid keys (traces, policies, load, ...)")
    return data
