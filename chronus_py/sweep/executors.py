"""Where runs execute: in this process, a local process pool, or a Ray cluster.

Each executor maps the same pure ``safe_run`` over the configs and yields results as they finish
(not in submission order), so the caller can stream them to the results file. A run that raises
comes back as an error row from ``safe_run``; a worker that dies (killed, out of memory) is caught
here and recorded the same way.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Iterator, Sequence

from chronus_py.errors import InputError
from chronus_py.sweep.grid import RunConfig
from chronus_py.sweep.run import RunResult, failed, safe_run

EXECUTORS = ("serial", "process", "ray")


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)))


def execute(
    configs: Sequence[RunConfig],
    executor: str = "process",
    *,
    workers: int | None = None,
    ray_address: str | None = None,
) -> Iterator[RunResult]:
    """Yield one :class:`RunResult` per config, in completion order."""
    if not configs:
        return iter(())
    if executor == "serial":
        return (safe_run(c) for c in configs)
    if executor == "process":
        return _process(configs, workers or default_workers())
    if executor == "ray":
        return _ray(configs, workers, ray_address)
    raise InputError("--executor", f"unknown executor {executor!r} (have: {', '.join(EXECUTORS)})")


def _process(configs: Sequence[RunConfig], workers: int) -> Iterator[RunResult]:
    # spawn, not fork: the parent may hold solver threads, and a forked copy of them can deadlock.
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(workers, len(configs)), mp_context=context) as pool:
        futures = {pool.submit(safe_run, c): c for c in configs}
        for future in as_completed(futures):
            try:
                yield future.result()
            except Exception as exc:  # the worker died: record it against its run
                yield failed(futures[future], exc)


def _ray(
    configs: Sequence[RunConfig], workers: int | None, address: str | None
) -> Iterator[RunResult]:
    try:
        import ray
    except ImportError:
        raise InputError("--executor ray", "needs Ray: pip install 'chronus-py[ray]'") from None
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(
            address=address,
            num_cpus=None if address else workers,
            include_dashboard=False,
            log_to_driver=False,
            logging_level="ERROR",
        )
    try:
        remote = ray.remote(num_cpus=1)(safe_run)
        pending = {remote.remote(c): c for c in configs}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                config = pending.pop(ref)
                try:
                    yield ray.get(ref)
                except Exception as exc:  # the task or its worker died
                    yield failed(config, exc)
    finally:
        if started_here:
            ray.shutdown()
