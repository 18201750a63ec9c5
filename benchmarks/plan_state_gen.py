"""A seeded synthetic STATE file for ``chronus plan`` at cluster scale (used by plan_speed.py).

The cluster is ``nodes`` x ``gpus_per_node``; running jobs fill about ``busy`` of the GPUs, packed
node by node as a consolidating allocator would have left them; ``pending`` jobs arrived over the
last hour. Job sizes follow a Philly-like mix (mostly 1-8 GPUs, a few 16-32), runtimes are
log-normal around an hour, about 70% of jobs are SLO jobs (a third of those soft, with two or three
deadline options) and a quarter of the running SLO jobs hold a guarantee (with a deadline
that leaves room for it). Usage:

    python benchmarks/plan_state_gen.py -o state.json [--nodes 1024] [--pending 5000] [--seed 0]
"""

from __future__ import annotations

import argparse
import json

import numpy as np

SIZES = np.array([1, 2, 4, 8, 16, 32])
SIZE_P = np.array([0.45, 0.2, 0.15, 0.15, 0.04, 0.01])


def generate(
    *,
    nodes: int = 1024,
    gpus_per_node: int = 8,
    pending: int = 5000,
    busy: float = 0.8,
    now: float = 86_400.0,
    seed: int = 0,
) -> dict:
    """The state as a mapping (dump it as YAML or JSON)."""
    rng = np.random.default_rng(seed)
    width = len(str(nodes - 1))
    names = [f"node{i:0{width}d}" for i in range(nodes)]
    running, cursor, target = [], 0, int(busy * nodes * gpus_per_node)
    while cursor < target:
        gpus = int(rng.choice(SIZES, p=SIZE_P))
        if gpus > gpus_per_node and cursor % gpus_per_node:
            cursor += gpus_per_node - cursor % gpus_per_node
        if cursor % gpus_per_node + gpus > gpus_per_node and gpus <= gpus_per_node:
            cursor += gpus_per_node - cursor % gpus_per_node
        if cursor + gpus > nodes * gpus_per_node:
            break
        placement: dict[str, list[int]] = {}
        for slot in range(cursor, cursor + gpus):
            placement.setdefault(names[slot // gpus_per_node], []).append(slot % gpus_per_node)
        cursor += gpus
        job = _job(rng, f"r{len(running)}", gpus, now - float(rng.uniform(600, 20_000)), now)
        job["placement"] = placement
        job["progress_seconds"] = round(float(rng.uniform(0.05, 0.9)) * job["estimate_seconds"], 1)
        if job.get("deadlines") and rng.random() < 0.25:
            left = job["estimate_seconds"] - job["progress_seconds"]
            at = round(now + left * float(rng.uniform(1.5, 3.0)) + 2400, 1)
            job["deadlines"] = [{"at": at, "value": 1.0}]
            job["guaranteed_deadline"] = at
        running.append(job)
    waiting = [
        _job(rng, f"p{i}", int(rng.choice(SIZES, p=SIZE_P)), now - float(rng.uniform(0, 3600)), now)
        for i in range(pending)
    ]
    return {
        "now": now,
        "lease": 1200,
        "policy": "chronus",
        "cluster": {"nodes": nodes, "gpus_per_node": gpus_per_node},
        "running": running,
        "pending": waiting,
    }


def _job(rng: np.random.Generator, job_id: str, gpus: int, submit: float, now: float) -> dict:
    estimate = round(float(np.clip(rng.lognormal(np.log(3600), 1.0), 120, 200_000)), 1)
    job = {"id": job_id, "gpus": gpus, "submit": round(submit, 1), "estimate_seconds": estimate}
    if rng.random() < 0.7:
        first = max(submit + estimate * float(rng.uniform(1.2, 3.0)), now + 60)
        options = 1 if rng.random() < 0.67 else int(rng.integers(2, 4))
        job["deadlines"] = [
            {"at": round(first * (1 + 0.5 * k), 1), "value": float(options - k)}
            for k in range(options)
        ]
    return job


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", required=True)
    parser.add_argument("--nodes", type=int, default=1024)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--pending", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    state = generate(
        nodes=args.nodes, gpus_per_node=args.gpus_per_node, pending=args.pending, seed=args.seed
    )
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump(state, f)
    print(f"{args.output}: {len(state['running'])} running, {len(state['pending'])} pending jobs")


if __name__ == "__main__":
    main()
