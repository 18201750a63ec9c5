"""One elastic replay from files: trace + throughput tables + cluster size + policy -> metrics."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

from chronus_py.elastic.jobs import read_elastic_trace
from chronus_py.elastic.throughputs import read_throughputs
from chronus_py.errors import InputError
from chronus_py.model import Cluster
from chronus_py.overhead import make_overhead
from chronus_py.policies import make_policy
from chronus_py.readers import trace_path
from chronus_py.replay import ReplayResult, replay, summarize


def replay_trace(
    trace: str | Path,
    *,
    throughputs: Path | None,
    policy: str,
    nodes: int,
    gpus_per_node: int,
    resize_scale: float = 1.0,
    overhead: str = "pause",
    backend: str = "greedy",
    options: Mapping[str, Any] | None = None,
    skip_bad_rows: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
) -> tuple[dict, ReplayResult]:
    """Replay an ITP trace under an elastic policy; ``backend`` "cpsat" gives elastic Chronus
    CP-SAT admission where its greedy plan refuses (the metrics then count those calls).
    ``overhead`` names the overhead model (``chronus_py.overhead``), scaled by ``resize_scale``;
    ``options`` are the policy's (``chronus_py.policies.make_policy``: lease, headroom, ...)."""
    if nodes <= 0 or gpus_per_node <= 0:
        raise InputError("--nodes/--gpus-per-node", "must be positive")
    if backend != "greedy" and policy != "elastic-chronus":
        raise InputError("--elastic-backend", f"only elastic-chronus has one, not {policy}")
    try:
        model = make_overhead(overhead, resize_scale)
    except ValueError as exc:
        raise InputError("--overhead", str(exc)) from None
    name, path = trace_path(trace)
    table = read_throughputs(throughputs)
    cluster = Cluster.uniform(nodes, gpus_per_node)
    jobs, checked = read_elastic_trace(
        path, table, cluster_gpus=cluster.gpus, skip_bad_rows=skip_bad_rows
    )
    given = {**(options or {}), **({"backend": backend} if backend != "greedy" else {})}
    chosen = make_policy(policy, given)
    result = replay(jobs, cluster, chosen, overhead=model, on_progress=on_progress)
    metrics = summarize(result, trace=name, dropped=checked.dropped)
    if backend != "greedy":
        metrics["exact"] = dict(chosen.exact_stats)
    return metrics, result
