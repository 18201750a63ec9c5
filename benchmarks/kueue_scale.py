"""The kueue backend at many Workloads, on the private control plane: the cost of one look at the
cluster, the length of a round, and whether the HTTP API keeps answering while Workloads churn;
for this checkout and, side by side on the same cluster, another (``--before DIR``).

``--workloads N`` Workloads (1 GPU each, chronus annotations on the Workload itself) are created,
split evenly between the checkouts compared: each gets a namespace ``scale-I`` with a
ClusterQueue with an AdmissionCheck of its own (``chronus.io/scale-I``) and 64 GPUs of quota on
8 kwok nodes x 8 GPUs of its own, so Kueue reserves for 64 of its Workloads at a time and the
rest wait in Kueue's queue, as a busy cluster's would; every controller sees all N Workloads.
Then, for each checkout in turn (``--before`` first), ``chronus serve --backend kueue``
(``--kueue-poll 1``) from that checkout's code runs for ``--seconds`` on its own queue while

- the churn deletes the ``--churn`` oldest Workloads of its namespace every 2 s (the ones Kueue
  reserved for and chronus admitted) and creates as many new ones, so Kueue reserves again and
  chronus admits;
- two samplers ask ``GET /healthz`` (no lock) and ``GET /v1/cluster`` (takes the service's lock,
  so it waits for a round), each 0.2 s after its last answer, with a 30 s timeout.

Reported per checkout: the HTTP latencies (median, p99, max, timeouts), the rounds and their
length (p50, p99 of the latest, as ``/healthz`` says), the decisions the log shows (starts,
preemptions, backend errors), the daemon's resident memory, and, timed in
a separate process with that checkout's backend code against the same API server after the run,
one full look (``jobs()`` + ``arrivals()``, the Workloads picked anew) over ``--looks``, and
how its Workloads stand then (accepted by chronus, reserved by Kueue, the check's state).

    PYTHONPATH=. python benchmarks/kueue_scale.py --workloads 5000 --before /tmp/old-checkout
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import yaml

from chronus_py.backends.kueue import harness
from chronus_py.backends.kueue.lab import GPU, why_not_here

HERE = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
LOOK = """
import json, sys, time
from chronus_py.backends.kueue import workloads as wls
from chronus_py.backends.kueue.backend import KueueBackend
from chronus_py.backends.kueue.kube import Kube, config
t0 = time.perf_counter()
backend = KueueBackend(Kube(config(sys.argv[1]), manager="chronus-bench"), controller=sys.argv[3])
ready = time.perf_counter() - t0
looks = []
for _ in range(int(sys.argv[2])):
    backend._listed_at = -float("inf")  # the Workloads picked anew, as every poll does
    t0 = time.perf_counter()
    backend.jobs()
    backend.arrivals()
    looks.append(time.perf_counter() - t0)
ours = backend._ours().values()
states = {}
for wl in ours:
    state = (wls.check_entry(wl, backend.checks) or {}).get("state")
    key = ("accepted " if wls.accepted(wl) else "") + ("reserved " if wls.reserved(wl) else "")
    states[key + str(state)] = states.get(key + str(state), 0) + 1
print(json.dumps({"looks": looks, "ours": len(ours), "states": states, "ready": ready}))
backend.close()
"""


def workload(i: int, ns: str, api: str) -> dict:
    return {
        "apiVersion": api,
        "kind": "Workload",
        "metadata": {
            "name": f"w{i:05d}",
            "namespace": ns,
            "annotations": {"chronus.io/estimate": "1h"},
        },
        "spec": {
            "queueName": ns,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "x",
                                    "resources": {"requests": {GPU: "1"}, "limits": {GPU: "1"}},
                                }
                            ],
                        }
                    },
                }
            ],
        },
    }


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def side_env(code: Path) -> dict[str, str]:
    """Run ``python -m chronus_py`` from ``code``, whatever the working directory."""
    return {**os.environ, "PYTHONPATH": str(code), "PYTHONSAFEPATH": "1"}


class Churn(threading.Thread):
    """While ``on`` is set, every 2 s, delete the ``n`` oldest Workloads and create ``n`` new
    ones (a daemon thread: it ends with the benchmark)."""

    def __init__(self, cp, ns: str, newest: int, n: int):
        super().__init__(daemon=True)
        self.cp, self.ns, self.oldest, self.newest, self.n = cp, ns, 0, newest, n
        self.on = threading.Event()

    def run(self) -> None:
        base = f"/apis/{self.cp.kueue_api}/namespaces/{self.ns}/workloads"
        while True:
            self.on.wait()
            time.sleep(2.0)
            for _ in range(self.n):
                self.cp.api("DELETE", f"{base}/w{self.oldest:05d}", ok=(200, 202, 404))
                self.oldest += 1
                self.cp.api("POST", base, workload(self.newest, self.ns, self.cp.kueue_api))
                self.newest += 1


class Sampler(threading.Thread):
    """``GET`` one path every 0.2 s after the last answer: latencies, None for a timeout; the
    last answer's body."""

    def __init__(self, url: str):
        super().__init__(daemon=True)
        self.url = url
        self.seen: list[float | None] = []
        self.last = b""
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            t0 = time.perf_counter()
            try:
                with urllib.request.urlopen(self.url, timeout=30) as r:
                    self.last = r.read()
                self.seen.append(time.perf_counter() - t0)
            except (urllib.error.URLError, TimeoutError, OSError):
                self.seen.append(None)
            self.stop.wait(0.2)


def latency(samples: list[float | None]) -> dict:
    got = sorted(s for s in samples if s is not None)
    if not got:
        return {"samples": len(samples), "timeouts": len(samples)}
    return {
        "samples": len(samples),
        "timeouts": len(samples) - len(got),
        "median_ms": round(statistics.median(got) * 1000, 1),
        "p99_ms": round(got[min(len(got) - 1, int(0.99 * len(got)))] * 1000, 1),
        "max_ms": round(got[-1] * 1000, 1),
    }


def run_side(cp, kubeconfig: Path, tmp: Path, code: Path, ns: str, args) -> dict:
    churn = Churn(cp, ns, args.workloads // args.sides, args.churn)
    churn.start()
    serve = harness.ServeProcess(
        cp,
        kubeconfig,
        tmp / f"serve-{code.name}.db",
        f"--kueue-node-selector=chronus-test={ns}",
        f"--kueue-controller-name=chronus.io/{ns}",
        scale=1.0,
        lease=1200.0,
        poll=1.0,
    )
    serve.env = side_env(code)
    began = time.monotonic()
    serve.start(timeout=900)
    out: dict = {
        "code": str(code),
        "namespace": ns,
        "start_seconds": round(time.monotonic() - began, 1),
    }
    samplers = {p: Sampler(serve.url + p) for p in ("/healthz", "/v1/cluster")}
    try:
        for sampler in samplers.values():
            sampler.start()
        churn.on.set()
        time.sleep(args.seconds)
        churn.on.clear()
        for sampler in samplers.values():
            sampler.stop.set()
            sampler.join()
        out["rss_mb"] = round(rss_mb(serve.proc.pid), 1)
        health = json.loads(samplers["/healthz"].last or b"{}")
        out["rounds"] = {
            k: health.get(k) for k in ("rounds", "round_seconds_p50", "round_seconds_p99")
        }
        out["decisions"] = {
            k: len(serve.events(k)) for k in ("admit", "start", "preempt", "backend_error")
        }
    finally:
        serve.stop()
        if args.logs is not None:
            args.logs.mkdir(parents=True, exist_ok=True)
            shutil.copy(serve.log, args.logs / f"serve-{code.name}.log")
    out["http"] = {p: latency(s.seen) for p, s in samplers.items()}
    look = subprocess.run(
        [sys.executable, "-c", LOOK, str(kubeconfig), str(args.looks), f"chronus.io/{ns}"],
        env=side_env(code),
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if look.returncode != 0:
        raise RuntimeError(f"timing a look with {code} failed:\n{look.stderr[-3000:]}")
    timed = json.loads(look.stdout.strip().splitlines()[-1])
    out["look_seconds_median"] = round(statistics.median(timed["looks"]), 3)
    out["look_seconds_max"] = round(max(timed["looks"]), 3)
    out["backend_ready_seconds"] = round(timed["ready"], 1)
    out["chronus_workloads_seen"] = timed["ours"]
    out["their_states_after"] = timed["states"]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workloads", type=int, default=5000)
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--looks", type=int, default=5)
    p.add_argument("--churn", type=int, default=4, help="Workloads replaced every 2 s")
    p.add_argument("--before", type=Path, default=None, help="another checkout, run first")
    p.add_argument("--out", default="kueue_scale.json")
    p.add_argument("--logs", type=Path, default=None, help="copy each daemon's log here")
    args = p.parse_args(argv)
    why = why_not_here()
    if why is not None:
        print(f"kueue_scale: {why}", file=sys.stderr)
        return 2
    sides = ([args.before.resolve()] if args.before else []) + [HERE]
    args.sides = len(sides)
    each = args.workloads // len(sides)
    with harness.control_plane("chronus-kueue-scale-") as (cp, kubeconfig, tmp):
        spaces = [f"scale-{i}" for i in range(len(sides))]
        for ns in spaces:
            for n in range(8):
                cp.add_node(f"{ns}-{n}", 8, labels={"chronus-test": ns})
            harness.admission_check(cp, f"chronus-{ns}", f"chronus.io/{ns}")
            cp.make_queues(ns, 64, ns, admission_checks=[f"chronus-{ns}"])
        began = time.monotonic()
        for start in range(0, each, 250):
            for ns in spaces:
                docs = [workload(i, ns, cp.kueue_api) for i in range(start, min(start + 250, each))]
                cp.kubectl("create", "-f", "-", input=yaml.safe_dump_all(docs))
        created = time.monotonic() - began
        results = [run_side(cp, kubeconfig, tmp, code, ns, args) for code, ns in zip(sides, spaces)]
    result = {
        "workloads": args.workloads,
        "create_seconds": round(created, 1),
        "seconds": args.seconds,
        "churn_per_2s": args.churn,
        "load_average": os.getloadavg(),
        "sides": results,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
