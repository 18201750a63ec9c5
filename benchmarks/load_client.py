"""An open-loop load generator for ``chronus serve``, run as its own processes so its work never
counts against the server's (``benchmarks/serve_load.py --churn`` starts it).

    python benchmarks/load_client.py --url http://127.0.0.1:8080 --seconds 20 \
        --submits 500 --cancels 500 --reads 100 --cancel-ids ids.txt --out out.json

Three request streams, each on its own fixed schedule (open loop: every request's latency counts
from the instant it was due, so a slow server cannot hide by slowing the client down):
submissions of new jobs, cancellations (first of the ids in ``--cancel-ids``, then of this run's
own submissions, so pending stays level when the two rates are equal), and status reads of a
random job this run knows. Writes per stream: count, statuses (0: the connection failed),
p50/p95/p99/max latency (ms); and ``timeline``, every request as (the instant it was due on
the server's clock, kind, latency in s, how late it was sent in s), to single out the requests
around an event the server logs (a lease re-plan) by the server's own time, and the part of
each one's wait that the client spent before sending it.

The client's own lag is in every latency it records (a request sent late waited that long too),
so it is measured and reported beside them: ``sent_late`` per stream, how long after its due
instant each request was handed to the HTTP client, and ``client_cpu_seconds``. Why several
processes (``--procs``, each with its share of every stream and of the ids): one Python process
sending 1,100 requests a second (issue 27's churn) used 0.42 of a core and sent them 16 ms late
at the median and 195 ms at p99 (session 14), which is what the churn's p50 was; split over
processes on uvloop the lag falls and the latencies left are the server's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import random
import time
from collections import deque
from pathlib import Path

import aiohttp

KINDS = ("submit", "cancel", "read")


def job(name: str, rng: random.Random, now: float) -> dict:
    est = rng.choice((7200.0, 14400.0, 28800.0, 57600.0))
    body = {"id": name, "gpus": rng.choice((1, 1, 1, 2, 4, 8)), "estimate_seconds": est}
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


async def run(args: argparse.Namespace, shard: int, ids: list[str], start_at: float) -> dict:
    """One process's share: every stream at ``1/procs`` of its rate, from ``start_at`` (the
    wall clock, the same for every process), ids prefixed by the shard."""
    rng = random.Random(args.seed * 1000 + shard)
    cancellable = deque(ids)
    known = list(ids)
    late: dict[str, list[float]] = {k: [] for k in KINDS}
    statuses: dict[str, dict[int, int]] = {k: {} for k in KINDS}
    # (due, server's clock; kind; latency s; how late it was sent, s)
    timeline: list[tuple[float, str, float, float]] = []
    connector = aiohttp.TCPConnector(limit=max(1, args.connections // args.procs))
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(args.url, connector=connector, timeout=timeout) as http:
        async with http.get("/v1/cluster") as resp:
            now = (await resp.json())["now"]
        asked = time.perf_counter()  # the server's clock read ``now`` about here
        start = asked + (start_at - time.time())
        counter = [0]

        async def one(kind: str, due: float) -> None:
            sent = time.perf_counter() - due
            late[kind].append(sent)
            if kind == "submit":
                counter[0] += 1
                body = job(f"c{shard}-{counter[0]}", rng, now)
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
            timeline.append((now + due - asked, kind, time.perf_counter() - due, sent))
            statuses[kind][status] = statuses[kind].get(status, 0) + 1
            if kind == "submit" and status == 201:
                cancellable.append(body["id"])
                known.append(body["id"])

        schedule = []
        rates = {"submit": args.submits, "cancel": args.cancels, "read": args.reads}
        for kind, rate in rates.items():
            share = rate / args.procs
            if share > 0:
                first = start + shard / rate  # the processes' requests interleave
                schedule += [(first + i / share, kind) for i in range(int(share * args.seconds))]
        schedule.sort()
        cpu = time.process_time()
        tasks = []
        for due, kind in schedule:  # one timer at a time, not one per request
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(kind, due)))
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - start
        cpu = time.process_time() - cpu
    return {
        "seconds": elapsed,
        "cpu": cpu,
        "late": late,
        "statuses": statuses,
        "timeline": timeline,
    }


def shard_main(args: argparse.Namespace, shard: int, ids: list[str], start_at: float) -> dict:
    try:
        import uvloop
    except ImportError:  # not on Windows: asyncio's own loop
        return asyncio.run(run(args, shard, ids, start_at))
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(run(args, shard, ids, start_at))


def merge(parts: list[dict]) -> dict:
    timeline = sorted(t for part in parts for t in part["timeline"])
    out: dict = {
        "seconds": max(part["seconds"] for part in parts),
        "procs": len(parts),
        "client_cpu_seconds": sum(part["cpu"] for part in parts),
    }
    for kind in KINDS:
        statuses: dict[int, int] = {}
        for part in parts:
            for status, n in part["statuses"][kind].items():
                statuses[status] = statuses.get(status, 0) + n
        out[kind] = {
            **quantiles([lat for _, k, lat, _ in timeline if k == kind]),
            "statuses": statuses,
            "sent_late": quantiles([x for part in parts for x in part["late"][kind]]),
        }
    out["timeline"] = timeline
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", required=True)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--submits", type=float, default=500.0, help="submissions per second")
    p.add_argument("--cancels", type=float, default=500.0, help="cancellations per second")
    p.add_argument("--reads", type=float, default=100.0, help="status reads per second")
    p.add_argument("--cancel-ids", help="file of job ids to cancel first (whitespace-separated)")
    p.add_argument("--connections", type=int, default=64, help="in all, shared by the processes")
    p.add_argument("--procs", type=int, default=2, help="client processes sharing the streams")
    p.add_argument("--seed", type=int, default=2)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    ids = Path(args.cancel_ids).read_text().split() if args.cancel_ids else []
    start_at = time.time() + 1.0  # every process connected and scheduled by then
    with multiprocessing.get_context("spawn").Pool(args.procs) as pool:
        parts = pool.starmap(
            shard_main, [(args, s, ids[s :: args.procs], start_at) for s in range(args.procs)]
        )
    Path(args.out).write_text(json.dumps(merge(parts), indent=2) + "\n")


if __name__ == "__main__":
    main()
