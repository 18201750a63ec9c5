"""How many of chronus's writes the private control plane's API server takes per second, and how
long each takes, with 1, 2 and 4 writers in flight: the bound on how fast a Kueue controller
can follow a compressed trace on this machine (issue 24, session 13).

One namespace with chronus's AdmissionCheck and a ClusterQueue of ample quota, ``--workloads``
Workloads that Kueue reserves; then, for each writer count in turn, for ``--seconds``, each
writer thread (a lightkube client of its own, as the controller's) applies, Workload after
Workload, the two writes a controller makes most: chronus's check entry with a new message (a
status apply, which Kueue reconciles) and, every other time, chronus's record annotation (an
apply on the object). Reported per writer count: writes per second, and each write's latency
(median, p99); with the load average at the start and end.

    PYTHONPATH=. python benchmarks/kueue_write_rate.py --workloads 100 --seconds 20
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

import yaml

from chronus_py.backends.kueue import harness
from chronus_py.backends.kueue import workloads as wls
from chronus_py.backends.kueue.kube import Kube, config
from chronus_py.backends.kueue.lab import why_not_here

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kueue_scale import workload  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
NS = "rate"
CHECK = "chronus-rate"


def writer(kube: Kube, names: list[str], stop: float, out: list[float], offset: int) -> None:
    i = offset
    while time.monotonic() < stop:
        name = names[i % len(names)]
        began = time.monotonic()
        if i % 2:
            kube.apply_workload_annotations(NS, name, {"chronus.io/work-done": str(i)})
        else:
            entry = {
                "name": CHECK,
                "state": "Pending",
                "message": f"planned start {i}",
                "lastTransitionTime": wls.rfc3339(time.time()),
            }
            kube.apply_workload_status(NS, name, {"admissionChecks": [entry]})
        out.append(time.monotonic() - began)
        i += 1


def measure(cfg, names: list[str], writers: int, seconds: float) -> dict:
    kubes = [Kube(cfg, manager="chronus") for _ in range(writers)]
    lists: list[list[float]] = [[] for _ in range(writers)]
    stop = time.monotonic() + seconds
    threads = [
        threading.Thread(target=writer, args=(k, names, stop, out, n * 7919))
        for n, (k, out) in enumerate(zip(kubes, lists))
    ]
    began = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - began
    for k in kubes:
        k.close()
    lat = sorted(x for out in lists for x in out)
    return {
        "writers": writers,
        "writes": len(lat),
        "writes_per_s": round(len(lat) / wall, 1),
        "latency_p50_ms": round(1000 * statistics.median(lat), 1),
        "latency_p99_ms": round(1000 * lat[int(0.99 * (len(lat) - 1))], 1),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workloads", type=int, default=100)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--writers", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--out", default="kueue_write_rate.json")
    args = p.parse_args(argv)
    why = why_not_here()
    if why is not None:
        print(f"kueue_write_rate: {why}", file=sys.stderr)
        return 2
    with harness.control_plane("chronus-kueue-rate-") as (cp, kubeconfig, _tmp):
        harness.admission_check(cp, CHECK, "chronus.io/rate")
        cp.make_queues(NS, 100_000, NS, admission_checks=[CHECK])
        docs = [workload(i, NS) for i in range(args.workloads)]
        cp.kubectl("create", "-f", "-", input=yaml.safe_dump_all(docs))
        names = [d["metadata"]["name"] for d in docs]
        cfg = config(str(kubeconfig))
        probe = Kube(cfg, manager="chronus-probe")
        end = time.monotonic() + 120
        while time.monotonic() < end:
            got = [probe.workload(NS, n) for n in names]
            if all(w is not None and wls.reserved(w) for w in got):
                break
            time.sleep(1)
        probe.close()
        load = [os.getloadavg()[0]]
        runs = [measure(cfg, names, w, args.seconds) for w in args.writers]
        load.append(os.getloadavg()[0])
    result = {"workloads": args.workloads, "seconds": args.seconds, "load": load, "runs": runs}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
