"""One elastic replay from a :class:`~chronus_py.engine.setup.ReplaySetup`: trace + throughput
tables + cluster size + policy -> metrics. The trace is read by the readers (same formats and
options as a rigid replay), the replay is :func:`chronus_py.engine.replay` (the elastic policy
runs on its event loop) and the summary and ``jobs.csv`` are the rigid replay's."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from chronus_py.engine import ReplayResult, replay, summarize
from chronus_py.engine.setup import ReplaySetup, overhead_model, read_setup_trace, scale_load
from chronus_py.jobs.model import Cluster
from chronus_py.policies import make_policy
from chronus_py.readers import TraceRead


def run_elastic_setup(
    setup: ReplaySetup,
    *,
    on_read: Callable[[TraceRead], None] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> tuple[dict, ReplayResult, TraceRead]:
    """Read the trace as elastic jobs and replay it under ``setup.policy`` with its options
    (lease, headroom, ...); ``elastic_backend`` "cpsat" gives elastic Chronus CP-SAT admission
    where its greedy plan refuses (the metrics then count those calls); ``overhead`` names the
    overhead model (``chronus_py.jobs.overhead``; default the pause), scaled by ``resize_scale``."""
    setup.check()
    cluster = Cluster.uniform(setup.nodes, setup.gpus_per_node)
    trace = read_setup_trace(setup, cluster_gpus=cluster.gpus)
    if on_read is not None:
        on_read(trace)
    model = overhead_model(setup)
    backend = setup.elastic_backend
    options = {**setup.options, **({"backend": backend} if backend != "greedy" else {})}
    chosen = make_policy(setup.policy, options)
    jobs = scale_load(trace.jobs, setup.load)
    result = replay(jobs, cluster, chosen, overhead=model, on_progress=on_progress)
    metrics = summarize(result, trace=trace.name, dropped=trace.dropped)
    if backend != "greedy":
        metrics["exact"] = dict(chosen.exact_stats)
    return metrics, result, trace


def replay_trace(
    trace: str | Path,
    *,
    throughputs: Path | None,
    policy: str,
    nodes: int,
    gpus_per_node: int,
    resize_scale: float = 1.0,
    backend: str = "greedy",
    overhead: str | None = None,
    options: dict | None = None,
    skip_bad_rows: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
) -> tuple[dict, ReplayResult]:
    """An elastic replay of a trace with the default reading (for sweeps and benchmarks)."""
    setup = ReplaySetup(
        trace=str(trace),
        policy=policy,
        options=options or {},
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        throughputs=throughputs,
        resize_scale=resize_scale,
        overhead=overhead,
        elastic_backend=backend,
        skip_bad_rows=skip_bad_rows,
    )
    metrics, result, _ = run_elastic_setup(setup, on_progress=on_progress)
    return metrics, result
