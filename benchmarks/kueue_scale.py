"""The kueue backend at many Workloads: the cost of one look at the cluster (list every Workload,
pick chronus's, observe them) and the controller's memory, on the private control plane.

``--workloads N`` Workloads (1 GPU each, chronus annotations on the Workload itself) are created
in a ClusterQueue with chronus's check and 64 GPUs of quota on 8 kwok nodes x 8 GPUs, so Kueue
reserves for 64 of them at a time and the rest wait in Kueue's queue, as a busy cluster's would.
Then ``chronus serve --backend kueue`` runs for ``--seconds``; reported: its resident memory
(``VmRSS``, after the run), and, measured in this process with the backend's own code against the
same API server, the wall time of one full look (``jobs()`` + ``arrivals()`` after a fresh list)
over ``--looks`` repetitions.

    PYTHONPATH=. python benchmarks/kueue_scale.py [--workloads 5000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import yaml

from chronus_py.service.client import ClientError
from chronus_py.service.kueue import harness
from chronus_py.service.kueue.backend import KueueBackend
from chronus_py.service.kueue.kube import Kube, config
from chronus_py.service.kueue.lab import GPU, why_not_here

RESULTS = Path(__file__).resolve().parent / "results" / "kueue_scale.json"


def workload(i: int, queue: str, ns: str) -> dict:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": f"w{i:05d}",
            "namespace": ns,
            "annotations": {"chronus.io/estimate": "1h"},
        },
        "spec": {
            "queueName": queue,
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workloads", type=int, default=5000)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--looks", type=int, default=10)
    args = p.parse_args(argv)
    why = why_not_here()
    if why is not None:
        print(f"kueue_scale: {why}", file=sys.stderr)
        return 2
    with harness.control_plane("chronus-kueue-scale-") as (cp, kubeconfig, tmp):
        for n in range(8):
            cp.add_node(f"scale-{n}", 8, labels={"chronus-test": "scale"})
        harness.admission_check(cp, "chronus-scale")
        cp.make_queues("scale", 64, "scale", admission_checks=["chronus-scale"])
        began = time.monotonic()
        for start in range(0, args.workloads, 500):
            docs = [
                workload(i, "scale", "scale")
                for i in range(start, min(start + 500, args.workloads))
            ]
            cp.kubectl("create", "-f", "-", input=yaml.safe_dump_all(docs))
        created = time.monotonic() - began
        serve = harness.ServeProcess(
            cp,
            kubeconfig,
            tmp / "serve.db",
            "--kueue-node-selector=chronus-test=scale",
            scale=1.0,
            lease=1200.0,
            poll=1.0,
        ).start(timeout=600)
        try:
            time.sleep(args.seconds)
            rss = rss_mb(serve.proc.pid)
            try:
                admitted: int | str = len(serve.jobs())
            except ClientError as exc:  # a round holding the lock longer than the timeout
                admitted = f"no answer: {exc}"
        finally:
            serve.stop()
        backend = KueueBackend(Kube(config(str(kubeconfig)), manager="chronus-bench"))
        looks = []
        for _ in range(args.looks):
            backend._listed_at = -float("inf")  # a fresh list, as every poll makes
            t0 = time.perf_counter()
            backend.jobs()
            backend.arrivals()
            looks.append(time.perf_counter() - t0)
        ours = len(backend._ours())
        backend.close()
    result = {
        "workloads": args.workloads,
        "chronus_workloads_seen": ours,
        "jobs_admitted_by_chronus": admitted,
        "create_seconds": round(created, 1),
        "serve_rss_mb": round(rss, 1),
        "look_seconds_median": round(statistics.median(looks), 3),
        "look_seconds_max": round(max(looks), 3),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
