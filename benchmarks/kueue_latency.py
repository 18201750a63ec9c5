"""Decision-to-running latency of ``chronus serve --backend kueue`` on the private control plane
(``chronus_py/backends/kueue/lab.py``: real API server, Kueue, kube-scheduler, kwok nodes), and
the delay chronus adds to a Job's start compared with Kueue alone on the same Jobs.

One 1-GPU Job at a time on an idle 2-node cluster (4 GPUs per node), ``--samples`` times per
mode, each Job's pod running 1 s on kwok. This script polls the API server every 20 ms and
records, on its own clock:

- ``created``: just before the Job is created (``kubectl apply``);
- ``ready`` (chronus only): the Workload's chronus check first seen ``Ready``;
- ``running``: the Job's pod first seen ``Running`` (kwok moves a bound pod to Running after
  about a second: part of both modes' times alike).

decision -> running is ``running - ready``; the overhead chronus adds is the difference of the
medians of ``created -> running`` between the two modes (chronus: Kueue reserves, chronus notices
at its next ``--kueue-poll``, admits, decides, sets Ready; alone: Kueue admits at once).

    PYTHONPATH=. python benchmarks/kueue_latency.py [--samples 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from chronus_py.backends.kueue import harness
from chronus_py.backends.kueue.lab import ControlPlane, job, why_not_here

RESULTS = Path(__file__).resolve().parent / "results" / "kueue_latency.json"


def stats(xs: list[float]) -> dict:
    xs = sorted(xs)
    return {
        "n": len(xs),
        "median": round(statistics.median(xs), 3),
        "p99": round(xs[min(len(xs) - 1, int(0.99 * len(xs)))], 3),
        "max": round(xs[-1], 3),
    }


def one(cp: ControlPlane, ns: str, queue: str, name: str, check: str | None) -> dict:
    created = time.monotonic()
    notes = {"chronus.io/estimate": "60"}  # read by chronus only; the same Job in both modes
    cp.apply(job(name, queue, namespace=ns, gpus=1, run_seconds=1.0, annotations=notes))
    ready = running = None
    end = created + 120
    while running is None and time.monotonic() < end:
        if check is not None and ready is None:
            for wl in cp.api("GET", f"/apis/{cp.kueue_api}/namespaces/{ns}/workloads")["items"]:
                refs = wl["metadata"].get("ownerReferences") or []
                if any(r.get("name") == name for r in refs):
                    entries = (wl.get("status") or {}).get("admissionChecks") or []
                    if any(e["name"] == check and e["state"] == "Ready" for e in entries):
                        ready = time.monotonic()
        pods = cp.api(
            "GET", f"/api/v1/namespaces/{ns}/pods", params={"labelSelector": f"job-name={name}"}
        )["items"]
        if any(p["status"].get("phase") in ("Running", "Succeeded") for p in pods):
            running = time.monotonic()
        time.sleep(0.02)
    if running is None:
        raise RuntimeError(f"job {name} did not run within 120 s")
    out = {"submit_to_running": running - created}
    if check is not None:
        out["decision_to_running"] = running - (ready or running)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--samples", type=int, default=20)
    args = p.parse_args(argv)
    why = why_not_here()
    if why is not None:
        print(f"kueue_latency: {why}", file=sys.stderr)
        return 2
    with harness.control_plane("chronus-kueue-bench-") as (cp, kubeconfig, tmp):
        ns = "bench"
        for n in ("bench-a", "bench-b"):
            cp.add_node(n, 4, labels={"chronus-test": "bench"})
        harness.admission_check(cp, "chronus-bench")
        cp.make_queues("with-chronus", 8, ns, admission_checks=["chronus-bench"])
        cp.make_queues("alone", 8, ns)
        serve = harness.ServeProcess(
            cp,
            kubeconfig,
            tmp / "serve.db",
            "--kueue-node-selector=chronus-test=bench",
            scale=1.0,
            lease=1200.0,
        ).start()
        samples: dict[str, list[dict]] = {"chronus": [], "kueue": []}
        try:
            for i in range(args.samples):  # alternate, so load drifts hit both alike
                samples["chronus"].append(one(cp, ns, "with-chronus", f"c{i}", "chronus-bench"))
                samples["kueue"].append(one(cp, ns, "alone", f"k{i}", None))
        finally:
            serve.stop()
    result = {
        "samples": args.samples,
        "decision_to_running": stats([s["decision_to_running"] for s in samples["chronus"]]),
        "submit_to_running_chronus": stats([s["submit_to_running"] for s in samples["chronus"]]),
        "submit_to_running_kueue": stats([s["submit_to_running"] for s in samples["kueue"]]),
    }
    result["overhead_median_s"] = round(
        result["submit_to_running_chronus"]["median"] - result["submit_to_running_kueue"]["median"],
        3,
    )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
