"""An open-loop load generator for ``chronus serve``, run as its own process so its work never
counts against the server's (``benchmarks/serve_load.py --churn`` starts it).

    python benchmarks/load_client.py --url http://127.0.0.1:8080 --seconds 20 \
        --submits 500 --cancels 500 --reads 100 --cancel-ids ids.txt --out out.json

Three request streams, each on its own fixed schedule (open loop: every request's latency counts
from the instant it was due, so a slow server cannot hide by slowing the client down):
submissions of new jobs, cancellations (first of the ids in ``--cancel-ids``, then of this run's
own submissions, so pending stays level when the two rates are equal), and status reads of a
random job this run knows. Writes per stream: count, statuses (0: the connection failed),
p50/p95/p99/max latency (ms); and ``timeline``, every request as (the instant it was due on
the server's clock, kind, latency in s), to single out the requests around an event the
server logs (a lease re-plan) by the server's own time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
from collections import deque
from pathlib import Path

import aiohttp


def job(i: int, rng: random.Random, now: float) -> dict:
    est = rng.choice((7200.0, 14400.0, 28800.0, 57600.0))
    body = {"id": f"c{i}", "gpus": rng.choice((1, 1, 1, 2, 4, 8)), "estimate_seconds": est}
    if rng.random() < 0.7:
        body["deadlines"] = [{"at": now + est * rng.uniform(1.5, 4.0)}]
    return body


def quantiles(latencies: list[float]) -> dict:
    if not latencies:
        return {"count": 0}
    ordered = sorted(latencies)
    pick = lambda q: 1000 * ordered[min(int(q * len(ordered)), len(ordered) - 1)]  # noqa: E731
    return {
        "count": len(ordered),
        "p50_ms": pick(0.5),
        "p95_ms": pick(0.95),
        "p99_ms": pick(0.99),
        "max_ms": 1000 * ordered[-1],
    }


async def run(args: argparse.Namespace) -> dict:
    rng = random.Random(args.seed)
    cancellable = deque(Path(args.cancel_ids).read_text().split()) if args.cancel_ids else deque()
    known = list(cancellable)
    results: dict[str, list[float]] = {"submit": [], "cancel": [], "read": []}
    statuses: dict[str, dict[int, int]] = {k: {} for k in results}
    timeline: list[tuple[float, str, float]] = []  # (due, server's clock; kind; latency s)
    connector = aiohttp.TCPConnector(limit=args.connections)
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(args.url, connector=connector, timeout=timeout) as http:
        async with http.get("/v1/cluster") as resp:
            now = (await resp.json())["now"]
        asked = time.perf_counter()  # the server's clock read ``now`` about here
        start = asked + 0.5
        counter = [0]

        async def one(kind: str, due: float) -> None:
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            if kind == "submit":
                counter[0] += 1
                body = job(counter[0], rng, now)
                request = http.post("/v1/jobs", json=body)
            elif kind == "cancel":
                if not cancellable:
                    return
                request = http.delete(f"/v1/jobs/{cancellable.popleft()}")
            else:
                request = http.get(f"/v1/jobs/{rng.choice(known)}")
            try:
                async with request as resp:
                    await resp.read()
                    status = resp.status
            except aiohttp.ClientError:
                status = 0  # the connection failed (counted under status 0, not dropped)
            results[kind].append(time.perf_counter() - due)
            timeline.append((now + due - asked, kind, results[kind][-1]))
            statuses[kind][status] = statuses[kind].get(status, 0) + 1
            if kind == "submit" and status == 201:
                cancellable.append(body["id"])
                known.append(body["id"])

        schedule = []
        rates = {"submit": args.submits, "cancel": args.cancels, "read": args.reads}
        for kind, rate in rates.items():
            if rate > 0:
                schedule += [(start + i / rate, kind) for i in range(int(rate * args.seconds))]
        schedule.sort()
        tasks = [asyncio.create_task(one(kind, due)) for due, kind in schedule]
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - start
    return {
        "seconds": elapsed,
        **{kind: {**quantiles(lat), "statuses": statuses[kind]} for kind, lat in results.items()},
        "timeline": sorted(timeline),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", required=True)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--submits", type=float, default=500.0, help="submissions per second")
    p.add_argument("--cancels", type=float, default=500.0, help="cancellations per second")
    p.add_argument("--reads", type=float, default=100.0, help="status reads per second")
    p.add_argument("--cancel-ids", help="file of job ids to cancel first (whitespace-separated)")
    p.add_argument("--connections", type=int, default=64)
    p.add_argument("--seed", type=int, default=2)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    out = asyncio.run(run(args))
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
