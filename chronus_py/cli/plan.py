"""``chronus plan STATE.yaml``: plan one scheduling round for a real cluster manager.

    chronus plan examples/state.yaml [--layers-dir DIR] [--timings]

Reads the cluster, running and pending jobs (schema: ``chronus_py/state_file.py``), runs the
round of ``chronus_py/round.py`` (the same steps replay and the service run), and prints one JSON
object (schema: ``chronus_py/plan.py``): per job
start / continue / preempt / wait with placement, guarantee and deadline, the lease end, the lease
plan of guaranteed jobs, and solver statistics. The same input gives byte-identical output unless
``--timings`` adds wall-clock times. ``--layers-dir`` also writes ``DIR/<node>.json`` (scx_layered
config) and ``DIR/<node>.env`` (``/etc/default/scx`` for scx.service) for every node with a host
model and an opted-in job running there after the round, and removes those files of other
nodes (left by an earlier round), so the directory always mirrors the latest plan.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plan",
        help="plan one scheduling round from a cluster manager's STATE.yaml",
        description="Plan one round: decisions, placements, guarantees and the lease plan as JSON.",
    )
    p.add_argument("state", metavar="STATE.yaml", help="cluster, now, running and pending jobs")
    p.add_argument(
        "--layers-dir",
        type=Path,
        metavar="DIR",
        help="write DIR/<node>.json and DIR/<node>.env for nodes with opted-in jobs",
    )
    p.add_argument(
        "--timings",
        action="store_true",
        help="add wall-clock timings (makes the output differ between runs)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from chronus_py.round import build_scheduler, run_round
    from chronus_py.state_file import load_state

    started = time.perf_counter()
    state = load_state(args.state)
    scheduler = build_scheduler(state)
    hosts = state.hosts if args.layers_dir else {}
    plan = run_round(
        scheduler, state.now, hosts=hosts, layers={e.job.id: e.layers for e in state.jobs}
    )
    plan = dataclasses.replace(
        plan, timings={**plan.timings, "total_s": time.perf_counter() - started}
    )
    if args.layers_dir:
        write_layers(args.layers_dir, plan.host_layers, [n.name for n in state.cluster.nodes])
    sys.stdout.write(plan.to_json(timings=args.timings))
    return 0


def write_layers(directory: Path, layers, nodes) -> None:
    """``<node>.json`` and ``<node>.env`` per node with a config; the env line points at where the
    JSON is installed on the node (``/etc/scx_layered/<node>.json``). Files a previous round left
    for the other nodes are removed, so the directory always mirrors this plan."""
    from chronus_py.errors import InputError
    from chronus_py.layers.emit import DEFAULT_CONFIG_DIR

    try:
        directory.mkdir(parents=True, exist_ok=True)
        for node in nodes:
            out = layers.get(node)
            json_path, env_path = directory / f"{node}.json", directory / f"{node}.env"
            if out is None:
                json_path.unlink(missing_ok=True)
                env_path.unlink(missing_ok=True)
            else:
                json_path.write_text(out.to_json(), encoding="utf-8")
                env_path.write_text(
                    out.env_file(f"{DEFAULT_CONFIG_DIR}/{node}.json"), encoding="utf-8"
                )
    except OSError as exc:
        raise InputError(directory, f"cannot write: {exc.strerror or exc}") from None
