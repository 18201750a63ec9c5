"""Cell scenarios (docs/cell-scenarios.md): YAML steps in, one JSON-ready record per step out.

:func:`load_scenario` validates the whole file before anything runs, so a malformed scenario
fails with one line naming the step and key and prints no partial output. :func:`run_scenario`
then drives a :class:`~placement.allocator.CellAllocator` and checks each step's ``expect``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from placement.allocator import CellAllocator
from placement.config import ClusterConfig, load_config, parse_config
from placement.errors import ConfigError, ScenarioError
from placement.limits import MAX_GPUS, MAX_PODS, too_large
from placement.loading import LoadError, load_yaml, show
from placement.types import PodSpec, Request, Result

_TOP_KEYS = {"name", "cluster", "healthy", "steps"}
_STEP_KEYS = {
    "allocate": {
        "op",
        "job",
        "vc",
        "priority",
        "pods",
        "sku",
        "pinned",
        "lazy_preempt",
        "nodes",
        "expect",
    },
    "release": {"op", "job", "expect"},
    "set_bad": {"op", "node", "expect"},
    "set_healthy": {"op", "node", "expect"},
    "check": {"op", "expect"},
}
_EXPECT_KEYS = {
    "allocate": {
        "outcome",
        "nodes",
        "nodes_not",
        "gpus",
        "pod_within",
        "job_within",
        "preempted",
        "downgraded",
    },
    "release": {"outcome"},
    "set_bad": {"outcome"},
    "set_healthy": {"outcome"},
    "check": {"outcome", "free"},
}
_OUTCOMES = {"allocate": {"placed", "wait", "error"}, "check": {"ok"}}


@dataclass(frozen=True)
class Step:
    number: int
    op: str
    job: str | None = None
    node: str | None = None
    request: Request | None = None
    expect: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Scenario:
    name: str
    config: ClusterConfig
    healthy: tuple[str, ...] | None  # None: every node healthy
    steps: tuple[Step, ...]


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file; the cluster path is relative to the file."""
    path = Path(path)
    try:
        data = load_yaml(path, what="scenario")
    except LoadError as exc:
        raise ScenarioError(exc.key, exc.why, source=exc.source, line=exc.line) from None
    try:
        return parse_scenario(data, base=path.parent)
    except ScenarioError as exc:
        exc.source = str(path)
        raise


def parse_scenario(data: Any, *, base: Path = Path(".")) -> Scenario:
    if not isinstance(data, Mapping):
        raise ScenarioError("", "a scenario must be a mapping with cluster and steps")
    unknown = set(data) - _TOP_KEYS
    if unknown:
        raise ScenarioError(sorted(map(str, unknown))[0], "unknown key")
    config = _cluster(data.get("cluster"), base)
    nodes = {name for name, _ in config.nodes()}
    healthy = data.get("healthy", "all")
    if healthy == "all":
        healthy_nodes = None
    elif isinstance(healthy, list) and all(isinstance(n, str) for n in healthy):
        missing = sorted(set(healthy) - nodes)
        if missing:
            raise ScenarioError("healthy", f"unknown node {show(missing[0])}")
        healthy_nodes = tuple(healthy)
    else:
        raise ScenarioError("healthy", "must be 'all' or a list of node names")
    raw_steps = data.get("steps")
    if not isinstance(raw_steps, list) or not raw_steps:
        raise ScenarioError("steps", "must be a non-empty list")
    types = set(config.levels)
    steps = []
    allocated: set[str] = set()
    for i, raw in enumerate(raw_steps, start=1):
        step = _step(raw, i, nodes, types)
        if step.op == "allocate":
            allocated.add(step.job)
        elif step.op == "release" and step.job not in allocated:
            raise ScenarioError(
                f"step {i}: job", f"{show(step.job)} is not allocated by an earlier step"
            )
        steps.append(step)
    name = data.get("name", "")
    return Scenario(str(name), config, healthy_nodes, tuple(steps))


def _cluster(value: Any, base: Path) -> ClusterConfig:
    if isinstance(value, str):
        return load_config(base / value)
    if isinstance(value, Mapping):
        try:
            return parse_config(value, "cluster")
        except ConfigError as exc:
            raise ScenarioError(f"cluster.{exc.key}" if exc.key else "cluster", exc.why) from None
    raise ScenarioError("cluster", "must be a HiveD config path or mapping")


def _step(raw: Any, i: int, nodes: set[str], types: set[str]) -> Step:
    where = f"step {i}"
    if not isinstance(raw, Mapping):
        raise ScenarioError(where, "must be a mapping with an op")
    op = raw.get("op")
    if not isinstance(op, str) or op not in _STEP_KEYS:
        raise ScenarioError(
            f"{where}: op", f"must be one of {', '.join(_STEP_KEYS)}, got {show(op)}"
        )
    where = f"step {i} ({op})"
    unknown = set(raw) - _STEP_KEYS[op]
    if unknown:
        raise ScenarioError(f"{where}: {sorted(map(str, unknown))[0]}", "unknown key")
    expect = _expect(raw.get("expect"), op, where, types)
    if op == "allocate":
        return Step(
            i, op, job=_name(raw, "job", where), request=_request(raw, where), expect=expect
        )
    if op == "release":
        return Step(i, op, job=_name(raw, "job", where), expect=expect)
    if op in ("set_bad", "set_healthy"):
        node = _name(raw, "node", where)
        if node not in nodes:
            raise ScenarioError(f"{where}: node", f"unknown node {show(node)}")
        return Step(i, op, node=node, expect=expect)
    return Step(i, op, expect=expect)


def _name(raw: Mapping, key: str, where: str) -> str:
    value = raw.get(key)
    if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
        raise ScenarioError(f"{where}: {key}", "required: a name")
    return str(value)


def _int(value: Any, key: str, *, minimum: int | None = None, maximum: int = MAX_GPUS) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or (minimum is not None and value < minimum)
    ):
        bound = "" if minimum is None else f" >= {minimum}"
        raise ScenarioError(key, f"must be an integer{bound}, got {show(value)}")
    if abs(value) > maximum:
        raise ScenarioError(key, too_large(value, maximum))
    return value


def _request(raw: Mapping, where: str) -> Request:
    pods_raw = raw.get("pods")
    if not isinstance(pods_raw, list) or not pods_raw:
        raise ScenarioError(f"{where}: pods", "required: a list of {gpus, count}")
    pods = []
    for j, pod in enumerate(pods_raw):
        key = f"{where}: pods[{j}]"
        if not isinstance(pod, Mapping):
            raise ScenarioError(key, "must be a mapping {gpus, count}")
        unknown = set(pod) - {"gpus", "count"}
        if unknown:
            raise ScenarioError(f"{key}.{sorted(map(str, unknown))[0]}", "unknown key")
        gpus = _int(pod.get("gpus"), f"{key}.gpus", minimum=1)
        count = _int(
            pod.get("count", 1),
            f"{key}.count",
            minimum=1,
            maximum=MAX_PODS - sum(p.count for p in pods),
        )
        pods.append(PodSpec(gpus, count))
    nodes = raw.get("nodes")
    if nodes is not None:
        if not isinstance(nodes, list) or not all(isinstance(n, str) for n in nodes):
            raise ScenarioError(f"{where}: nodes", "must be a list of node names")
        nodes = frozenset(nodes)
    lazy = raw.get("lazy_preempt", False)
    if not isinstance(lazy, bool):
        raise ScenarioError(f"{where}: lazy_preempt", f"must be true or false, got {show(lazy)}")
    optional = {}
    for key in ("vc", "sku", "pinned"):
        if key in raw:
            optional[key] = _name(raw, key, where)
    return Request(
        job=_name(raw, "job", where),
        pods=tuple(pods),
        priority=_int(raw.get("priority", 0), f"{where}: priority"),
        lazy_preempt=lazy,
        nodes=nodes,
        **optional,
    )


def _expect(raw: Any, op: str, where: str, types: set[str]) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ScenarioError(f"{where}: expect", "must be a mapping")
    unknown = set(raw) - _EXPECT_KEYS[op]
    if unknown:
        raise ScenarioError(f"{where}: expect.{sorted(map(str, unknown))[0]}", "unknown key")
    out = dict(raw)
    key = f"{where}: expect"
    if "outcome" in out and (
        not isinstance(out["outcome"], str) or out["outcome"] not in _OUTCOMES.get(op, {"ok"})
    ):
        allowed = " | ".join(sorted(_OUTCOMES.get(op, {"ok"})))
        raise ScenarioError(f"{key}.outcome", f"must be {allowed}, got {show(out['outcome'])}")
    for k in ("nodes", "nodes_not", "preempted", "downgraded"):
        if k in out and (
            not isinstance(out[k], list) or not all(isinstance(v, (str, int)) for v in out[k])
        ):
            raise ScenarioError(f"{key}.{k}", "must be a list of names")
        if k in out:
            out[k] = sorted(str(v) for v in out[k])
    if "gpus" in out:
        gpus = out["gpus"]
        if not isinstance(gpus, Mapping) or not all(
            isinstance(v, list) and all(isinstance(g, int) and not isinstance(g, bool) for g in v)
            for v in gpus.values()
        ):
            raise ScenarioError(f"{key}.gpus", "must map node names to lists of GPU indices")
        out["gpus"] = {str(n): sorted(v) for n, v in gpus.items()}
    for k in ("pod_within", "job_within"):
        if k in out and (not isinstance(out[k], str) or out[k] not in types):
            raise ScenarioError(f"{key}.{k}", f"unknown cell type {show(out[k])}")
    if "free" in out:
        free = out["free"]
        if not isinstance(free, Mapping):
            raise ScenarioError(f"{key}.free", "must map cell types to counts")
        for t, n in free.items():
            if t not in types:
                raise ScenarioError(f"{key}.free", f"unknown cell type {show(t)}")
            _int(n, f"{key}.free.{t}", minimum=0)
    return out


def run_scenario(scenario: Scenario) -> Iterator[dict[str, Any]]:
    """Run every step; each record carries ``failed`` when its expectations were not met."""
    allocator = CellAllocator(scenario.config)
    if scenario.healthy is not None:
        keep = set(scenario.healthy)
        for name, _ in scenario.config.nodes():
            if name not in keep:
                allocator.set_bad(name)
    for step in scenario.steps:
        record: dict[str, Any] = {"step": step.number, "op": step.op}
        if step.op == "allocate":
            result = allocator.allocate(step.request)
            record.update(_allocate_record(step.job, result))
            failed = _check_allocate(step.expect, result, allocator)
        else:
            if step.op == "release":
                record["job"] = step.job
                allocator.release(step.job)
            elif step.op == "set_bad":
                record["node"] = step.node
                allocator.set_bad(step.node)
            elif step.op == "set_healthy":
                record["node"] = step.node
                allocator.set_healthy(step.node)
            record["outcome"] = "ok"
            failed = _check_outcome(step.expect, "ok")
            if step.op == "check":
                record["free"] = allocator.free_cells()
                failed += _check_free(step.expect, record["free"])
        if failed:
            record["failed"] = failed
        yield record


def _allocate_record(job: str, result: Result) -> dict[str, Any]:
    out: dict[str, Any] = {"job": job, "outcome": result.outcome}
    if result.outcome == "placed":
        out["pods"] = [{"node": p.node, "gpus": list(p.gpus)} for p in result.pods]
        out["preempted"] = list(result.preempted)
        out["downgraded"] = list(result.downgraded)
    else:
        out["reason"] = result.reason
    return out


def _check_outcome(expect: Mapping[str, Any], got: str) -> list[str]:
    want = expect.get("outcome")
    return [] if want is None or want == got else [f"outcome: expected {want}, got {got}"]


def _check_allocate(
    expect: Mapping[str, Any], result: Result, allocator: CellAllocator
) -> list[str]:
    failed = _check_outcome(expect, result.outcome)
    placed = result.outcome == "placed"
    by_node = result.by_node()
    nodes = sorted(by_node)
    if "nodes" in expect and (not placed or nodes != expect["nodes"]):
        failed.append(
            f"nodes: expected {expect['nodes']}, got {nodes if placed else 'no placement'}"
        )
    if "nodes_not" in expect:
        bad = sorted(set(nodes) & set(expect["nodes_not"]))
        if bad or not placed:
            failed.append(
                f"nodes_not: expected none of {expect['nodes_not']}, got "
                f"{nodes if placed else 'no placement'}"
            )
    for node, gpus in expect.get("gpus", {}).items():
        got = sorted(by_node.get(node, ()))
        if got != gpus:
            failed.append(f"gpus: expected {node}: {gpus}, got {node}: {got}")
    if "pod_within" in expect:
        t = expect["pod_within"]
        outside = [
            i
            for i, pod in enumerate(result.pods)
            if t not in allocator.enclosing_types({pod.node: pod.gpus})
        ]
        if outside or not placed:
            failed.append(
                f"pod_within: expected every pod inside one {t}, got "
                f"{'pods ' + str(outside) if placed else 'no placement'} outside"
            )
    if "job_within" in expect:
        t = expect["job_within"]
        if not placed or t not in allocator.enclosing_types(by_node):
            failed.append(
                f"job_within: expected the job inside one {t}, got "
                f"{by_node if placed else 'no placement'}"
            )
    for key, got in (("preempted", result.preempted), ("downgraded", result.downgraded)):
        if key in expect and sorted(got) != expect[key]:
            failed.append(f"{key}: expected {expect[key]}, got {sorted(got)}")
    return failed


def _check_free(expect: Mapping[str, Any], free: Mapping[str, int]) -> list[str]:
    return [
        f"free: expected {t}: {n}, got {t}: {free.get(t, 0)}"
        for t, n in expect.get("free", {}).items()
        if free.get(t, 0) != n
    ]
