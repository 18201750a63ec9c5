"""Throughput and latency of ``placement.CellAllocator`` on large synthetic clusters.

Targets (issue 3): >= 50,000 allocate+release pairs per second for 1-8 GPU jobs on a 1,024-node
(8,192-GPU) cluster, and one allocation on a 10,000-node cluster in under 5 ms (median). The
latency run also times gangs of 2-4 whole nodes (allocated, then released). Maxima include
Python's garbage collector (a full collection over ~10^5 cells takes tens of ms or more).

Cluster: 8-GPU nodes (2 sockets x 2 PCIe switches x 2 GPUs) in racks of 16 nodes, as a HiveD
config; ``--tenants`` VCs share the racks, each promised an equal number of whole racks
(``--promise rack``) or of single nodes (``--promise node``, much more binding/unbinding churn).

Workload: fill the cluster with random jobs (1-8 GPUs, uniform, one pod, priority 0, random
tenant) to ``--load`` of the GPUs, then time ``--pairs`` iterations of "allocate a new random job,
release a random running job" (steady state). A pair counts whether or not the allocation was
placed; the placed fraction is reported. Throughput is given per wall-clock second and per CPU
second of
this process (the latter is what the code costs when the machine is shared), per seed and as the
median over seeds per setting. The latency runs time single ``allocate`` calls on 1,024- and
10,000-node clusters at the same load, each followed by the release of a random running job:
guaranteed one-pod jobs, guaranteed gangs of 2-4 whole nodes (released at once), and the same two
shapes as opportunistic (priority -1) jobs, which may use any idle GPU of the cluster.

    PYTHONPATH=. python benchmarks/allocator.py [--pairs 200000] [--repeat 3] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

from placement import CellAllocator, PodSpec, Request, load_config

RESULTS = Path(__file__).resolve().parent / "results" / "allocator.json"


def cluster_config(nodes: int, *, rack: int = 16, tenants: int = 4, promise: str = "rack") -> dict:
    """A HiveD config: ``nodes`` 8-GPU nodes in racks of ``rack``; tenants share the racks."""
    racks = nodes // rack
    cell_types = {
        "V100-SWITCH": {"childCellType": "V100", "childCellNumber": 2},
        "V100-SOCKET": {"childCellType": "V100-SWITCH", "childCellNumber": 2},
        "V100-NODE": {"childCellType": "V100-SOCKET", "childCellNumber": 2, "isNodeLevel": True},
        "V100-RACK": {"childCellType": "V100-NODE", "childCellNumber": rack},
    }
    physical = [
        {
            "cellType": "V100-RACK",
            "cellAddress": f"r{r}",
            "cellChildren": [{"cellAddress": f"r{r}-n{n}"} for n in range(rack)],
        }
        for r in range(racks)
    ]
    if promise == "rack":
        share = {"cellType": "V100-RACK", "cellNumber": racks // tenants}
    else:
        share = {"cellType": "V100-RACK.V100-NODE", "cellNumber": racks * rack // tenants}
    vcs = {f"vc{t}": {"virtualCells": [dict(share)]} for t in range(tenants)}
    return {
        "physicalCluster": {"cellTypes": cell_types, "physicalCells": physical},
        "virtualClusters": vcs,
    }


def steady_state(
    allocator: CellAllocator, rng: random.Random, tenants: list[str], load: float
) -> list[str]:
    total = sum(n.gpus for n in allocator.nodes())
    running: list[str] = []
    serial = 0
    misses = 0
    while allocator.free_gpus() > total * (1 - load) and misses < 1000:
        serial += 1
        name = f"fill{serial}"
        request = Request(name, (PodSpec(rng.randint(1, 8)),), vc=rng.choice(tenants))
        if allocator.allocate(request).outcome == "placed":
            running.append(name)
        else:
            misses += 1
    return running


def throughput(
    nodes: int, pairs: int, *, load: float, promise: str, tenants: int, seed: int
) -> dict:
    config = load_config(cluster_config(nodes, tenants=tenants, promise=promise))
    allocator = CellAllocator(config)
    rng = random.Random(seed)
    names = list(config.virtual_clusters)
    running = steady_state(allocator, rng, names, load)
    requests = [
        Request(f"job{i}", (PodSpec(rng.randint(1, 8)),), vc=rng.choice(names))
        for i in range(pairs)
    ]
    victims = [rng.random() for _ in range(pairs)]
    placed = 0
    allocate, release = allocator.allocate, allocator.release
    start = time.perf_counter()
    cpu = time.process_time()
    for request, r in zip(requests, victims):
        if allocate(request).outcome == "placed":
            running.append(request.job)
            placed += 1
        i = int(r * len(running))
        running[i], running[-1] = running[-1], running[i]
        release(running.pop())
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu
    assert allocator.audit() == [], "allocator state inconsistent after the run"
    return {
        "nodes": nodes,
        "gpus": nodes * 8,
        "tenants": tenants,
        "promise": promise,
        "load": load,
        "pairs": pairs,
        "seconds": round(elapsed, 3),
        "pairs_per_second": round(pairs / elapsed),
        "pairs_per_cpu_second": round(pairs / cpu),
        "placed_fraction": round(placed / pairs, 4),
    }


def _timed(
    allocator: CellAllocator,
    requests: list[Request],
    running: list[str],
    rng: random.Random,
    *,
    keep: bool,
) -> dict:
    """Latency summary of ``allocate`` over ``requests``; a placed job joins ``running``
    (``keep``) or is released at once. After each request of a kept kind a random running job is
    released, so the load stays put."""
    times = []
    placed = 0
    for request in requests:
        t0 = time.perf_counter()
        result = allocator.allocate(request)
        times.append(time.perf_counter() - t0)
        if result.outcome == "placed":
            placed += 1
            if not keep:
                allocator.release(request.job)
                continue
            running.append(request.job)
        if keep:
            i = rng.randrange(len(running))
            running[i], running[-1] = running[-1], running[i]
            allocator.release(running.pop())
    return {**_summary(times), "placed_fraction": round(placed / len(requests), 4)}


def latency(
    nodes: int, samples: int, *, load: float, promise: str, tenants: int, seed: int
) -> dict:
    started = time.perf_counter()
    config = load_config(cluster_config(nodes, tenants=tenants, promise=promise))
    allocator = CellAllocator(config)
    build = time.perf_counter() - started
    rng = random.Random(seed)
    names = list(config.virtual_clusters)
    running = steady_state(allocator, rng, names, load)
    one = [
        Request(f"probe{i}", (PodSpec(rng.randint(1, 8)),), vc=rng.choice(names))
        for i in range(samples)
    ]
    one_pod = _timed(allocator, one, running, rng, keep=True)
    gangs = [
        Request(f"gang{i}", (PodSpec(8, rng.randint(2, 4)),), vc=rng.choice(names))
        for i in range(samples // 10)
    ]
    gang = _timed(allocator, gangs, running, rng, keep=False)
    opp = [
        Request(f"opp{i}", (PodSpec(rng.randint(1, 8)),), vc=rng.choice(names), priority=-1)
        for i in range(samples)
    ]
    opp_pod = _timed(allocator, opp, running, rng, keep=True)
    opp_gangs = [
        Request(f"oppgang{i}", (PodSpec(8, rng.randint(2, 4)),), vc=rng.choice(names), priority=-1)
        for i in range(samples // 10)
    ]
    opp_gang = _timed(allocator, opp_gangs, running, rng, keep=False)
    assert allocator.audit() == [], "allocator state inconsistent after the run"
    return {
        "nodes": nodes,
        "gpus": nodes * 8,
        "tenants": tenants,
        "promise": promise,
        "load": load,
        "build_seconds": round(build, 2),
        "one_pod_1_8_gpus": one_pod,
        "gang_2_4_nodes": gang,
        "opportunistic_one_pod_1_8_gpus": opp_pod,
        "opportunistic_gang_2_4_nodes": opp_gang,
    }


def _summary(seconds: list[float]) -> dict:
    ms = sorted(t * 1000 for t in seconds)
    return {
        "samples": len(ms),
        "median_ms": round(statistics.median(ms), 4),
        "p99_ms": round(ms[int(len(ms) * 0.99) - 1], 4),
        "max_ms": round(ms[-1], 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=200_000)
    parser.add_argument("--samples", type=int, default=20_000)
    parser.add_argument("--load", type=float, default=0.8)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--repeat", type=int, default=3, help="throughput runs per setting (seeds seed..)"
    )
    parser.add_argument("--quick", action="store_true", help="small run (for a smoke test)")
    args = parser.parse_args(argv)
    load_at_start = os.getloadavg()[0]
    pairs, samples = (5_000, 1_000) if args.quick else (args.pairs, args.samples)
    if args.quick:
        args.repeat = 1
    runs = []
    for promise in ("rack", "node"):
        for rep in range(args.repeat):
            r = throughput(
                1024, pairs, load=args.load, promise=promise, tenants=4, seed=args.seed + rep
            )
            print(
                f"1,024 nodes, {promise} promises, seed {args.seed + rep}: "
                f"{r['pairs_per_second']:,} "
                f"allocate+release pairs/s wall, {r['pairs_per_cpu_second']:,} per CPU second "
                f"({r['placed_fraction']:.1%} placed)",
                flush=True,
            )
            runs.append(r)
    settings = []
    for promise in ("rack", "node"):
        per_seed = [r for r in runs if r["promise"] == promise]
        wall = statistics.median(r["pairs_per_second"] for r in per_seed)
        cpu = statistics.median(r["pairs_per_cpu_second"] for r in per_seed)
        settings.append(
            {
                "promise": promise,
                "seeds": len(per_seed),
                "median_pairs_per_second": round(wall),
                "median_pairs_per_cpu_second": round(cpu),
                "min_pairs_per_second": min(r["pairs_per_second"] for r in per_seed),
            }
        )
        print(
            f"1,024 nodes, {promise} promises, median of {len(per_seed)} seeds: {round(wall):,} "
            f"pairs/s wall, "
            f"{round(cpu):,} per CPU second",
            flush=True,
        )
    big = []
    for size, tenants in ((1024, 4), (10_000, 5)):
        for promise in ("rack", "node"):
            r = latency(
                size, samples, load=args.load, promise=promise, tenants=tenants, seed=args.seed
            )
            rows = (
                ("guaranteed 1-8 GPU pod", "one_pod_1_8_gpus"),
                ("guaranteed 2-4 node gang", "gang_2_4_nodes"),
                ("opportunistic 1-8 GPU pod", "opportunistic_one_pod_1_8_gpus"),
                ("opportunistic 2-4 node gang", "opportunistic_gang_2_4_nodes"),
            )
            for label, key in rows:
                t = r[key]
                print(
                    f"{size:,} nodes, {promise} promises, {label}: allocate median "
                    f"{t['median_ms']} ms, "
                    f"p99 {t['p99_ms']} ms, max {t['max_ms']} ms ({t['samples']} samples, "
                    f"{t['placed_fraction']:.1%} placed)",
                    flush=True,
                )
            print(f"{size:,} nodes, {promise} promises: build {r['build_seconds']} s", flush=True)
            big.append(r)
    result = {
        "command": "PYTHONPATH=. python benchmarks/allocator.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "processor": platform.processor(),
        "cpus": os.cpu_count(),
        "load_average_at_start": load_at_start,
        "load_average_at_end": os.getloadavg()[0],
        "throughput": runs,
        "throughput_medians": settings,
        "latency": big,
        "targets": {"pairs_per_second": 50_000, "median_ms": 5.0},
    }
    if not args.quick:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
