"""Does the service schedule like the replay? The first simulated day of philly-mix1, submitted
through ``chronus serve``'s HTTP API on the sim backend, against ``chronus replay`` of the same
jobs on the same cluster (120 nodes x 8 GPUs, the chronus policy, oracle estimates).

    python benchmarks/serve_equivalence.py [--speed 1000]

The client sends each job when the server's clock reaches its trace submission time (times on
the sim clock start at 0, as the trace's), with the trace's absolute deadlines, its duration as
both estimate and true work, and waits until every job has finished. Differences come from the
service running in real time: a job is submitted, and a completion seen, some wall
milliseconds (x ``--speed`` simulated seconds) after the replay would have. Writes
benchmarks/results/serve_equivalence.json.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_load import Conn, free_port  # noqa: E402


def first_day(trace: str = "philly-mix1"):
    from chronus_py.readers import read_trace

    jobs = read_trace(trace).jobs
    return [j for j in jobs if j.submit < jobs[0].submit + 86400.0]


def replay_ratio(jobs) -> tuple[float, dict]:
    from chronus_py.engine import replay, summarize
    from chronus_py.jobs.model import Cluster
    from chronus_py.policies import make_policy

    result = replay(jobs, Cluster.uniform(120, 8), make_policy("chronus"))
    from collections import Counter

    metrics = summarize(result, trace="philly-mix1 day 1", dropped=Counter())
    return metrics["slo_deadline_ratio"], metrics


def body(job) -> dict:
    out = {
        "id": job.id,
        "gpus": job.gpus,
        "estimate_seconds": job.duration,
        "duration_seconds": job.duration,
        "deadlines": [{"at": d.at, "value": d.value} for d in job.deadlines],
    }
    if job.iterations:
        out["iterations"] = job.iterations
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--speed", type=float, default=1000.0)
    args = p.parse_args()
    jobs = first_day()
    started = time.perf_counter()
    expected, replay_metrics = replay_ratio(jobs)
    replay_wall = time.perf_counter() - started
    print(
        f"replay: {len(jobs)} jobs, first-deadline ratio {expected:.4f} ({replay_wall:.0f} s)",
        flush=True,
    )

    workdir = Path(tempfile.mkdtemp(prefix="serve-equiv-"))
    port = free_port()
    log = open(workdir / "serve.log", "wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "chronus_py",
            "serve",
            "--listen",
            f"127.0.0.1:{port}",
            "--db",
            str(workdir / "chronus.db"),
            "--nodes",
            "120",
            "--gpus-per-node",
            "8",
            "--speed",
            str(args.speed),
        ],
        stdout=log,
        stderr=log,
    )
    lags: list[float] = []
    try:
        for _ in range(600):
            try:
                cluster = Conn(port).call("GET", "/v1/cluster")[1]
                break
            except OSError:
                time.sleep(0.05)
        now0, wall0 = cluster["now"], time.perf_counter()
        todo: queue.Queue = queue.Queue()
        lock = threading.Lock()

        def sender():
            conn = Conn(port)
            while (job := todo.get()) is not None:
                status, out = conn.call("POST", "/v1/jobs", body(job))
                assert status == 201, out
                with lock:
                    lags.append(out["now"] - job.submit)

        threads = [threading.Thread(target=sender) for _ in range(4)]
        for t in threads:
            t.start()
        for job in jobs:
            wait = (job.submit - now0) / args.speed - (time.perf_counter() - wall0)
            if wait > 0:
                time.sleep(wait)
            todo.put(job)
        for _ in threads:
            todo.put(None)
        for t in threads:
            t.join()
        print(f"submitted {len(jobs)} in {time.perf_counter() - wall0:.0f} s", flush=True)
        while True:
            got = Conn(port).call("GET", "/v1/jobs?state=finished&limit=10000")[1]["jobs"]
            if len(got) == len(jobs):
                break
            time.sleep(2.0)
        total_wall = time.perf_counter() - wall0
        health = Conn(port).call("GET", "/healthz")[1]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    slo = [j for j in got if j["deadlines"]]
    served = sum(j["met_first_deadline"] for j in slo) / len(slo)
    lags.sort()
    out = {
        "command": " ".join(["python", *sys.argv]),
        "cpus": os.cpu_count(),
        "load_average_at_end": os.getloadavg(),
        "jobs": len(jobs),
        "slo_jobs": len(slo),
        "speed": args.speed,
        "replay_first_deadline_ratio": expected,
        "served_first_deadline_ratio": served,
        "difference": served - expected,
        "within_0.005": abs(served - expected) <= 0.005,
        "replay_guaranteed_jobs": replay_metrics["guaranteed_jobs"],
        "served_guaranteed_at_arrival": sum(
            j["admission"]["decision"] == "guaranteed" for j in got
        ),
        "served_guaranteed_jobs": sum(j["guaranteed"] is not None for j in got),
        "submission_lag_sim_s_p50": lags[len(lags) // 2],
        "submission_lag_sim_s_max": lags[-1],
        "serve_wall_s": total_wall,
        "replay_wall_s": replay_wall,
        "round_p50_ms": 1000 * health["round_seconds_p50"],
        "round_p99_ms": 1000 * health["round_seconds_p99"],
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "serve_equivalence.json").write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
