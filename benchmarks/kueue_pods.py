"""What the kueue backend's Pod watch costs (``chronus_py/backends/kueue/pods.py``): memory and CPU
for N bound pods, on the private control plane.

For each N of ``--pods``, N bare pods (no Job, so kwok keeps them Running) are bound by nodeName
to 10 kwok nodes, every second one asking 1 GPU. Then, in a child process per variant, the
backend's watch machinery (``watch.Watches``) follows the pods alone:

- ``kept``: as the backend does (field selector ``pods.BOUND``, only ``pods.gpu_pod``'s fields
  of the GPU pods held);
- ``whole``: the same selector, every pod held whole (what a plain watch of pods would keep).

Reported per variant: the first list's wall seconds, the resident memory it added (MB, after a
garbage collection), the CPU seconds of the list, then the CPU seconds and the watch events of a
churn of ``--churn`` more GPU pods created (kwok binds them Running) and deleted, and per event;
and for ``kept`` the wall time of one ``pods.held`` over the copy (what ``cluster_nodes`` adds,
at least once a second), and of one ``pods.began`` over it, every pod taken as one of 500
Jobs' (what a look adds while a start's pods are not yet seen bound, ``binding.py``, or do not
all run yet, ``KueueBackend._run_start``: one pass serves both).

    PYTHONPATH=. nice python benchmarks/kueue_pods.py --pods 1000 5000 --churn 500
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import yaml

from chronus_py.backends.kueue import harness
from chronus_py.backends.kueue.lab import GPU, KWOK_NODE, why_not_here

HERE = Path(__file__).resolve().parents[1]
CHILD = """
import gc, json, resource, sys, time
from chronus_py.backends.kueue import pods
from chronus_py.backends.kueue.kube import config
from chronus_py.backends.kueue.watch import Kind, Watches, namespaced_key

def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024

def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

events = 0
def keep(pod):
    global events
    events += 1
    return pods.gpu_pod(pod, "nvidia.com/gpu") if sys.argv[2] == "kept" else pod

cfg = config(sys.argv[1])
gc.collect()
rss0, cpu0, t0 = rss(), cpu(), time.perf_counter()
kind = Kind(pods.POD, namespaced_key, namespaced=True, fields=pods.BOUND, keep=keep)
w = Watches(cfg, {"pods": kind}).start()
assert w.wait_synced(600)
listed, cpu1 = time.perf_counter() - t0, cpu()
gc.collect()
out = {"variant": sys.argv[2], "held": len(w.stores["pods"].snapshot()), "list_s": listed,
       "rss_added_mb": rss() - rss0, "list_cpu_s": cpu1 - cpu0}
if sys.argv[2] == "kept":
    snap = w.stores["pods"].snapshot()
    t = time.perf_counter()
    for _ in range(20):
        pods.held(snap.values(), set())
    out["held_ms"] = (time.perf_counter() - t) / 20 * 1000
    owned = [{**p, "job": str(i % 500)} for i, p in enumerate(snap.values())]  # Jobs' pods
    t = time.perf_counter()
    for _ in range(20):
        pods.began(owned)
    out["began_ms"] = (time.perf_counter() - t) / 20 * 1000
print(json.dumps(out), flush=True)
sys.stdin.readline()  # the churn begins
cpu2, events0 = cpu(), events
want = int(sys.stdin.readline())  # the churn is over: this many pods are held again
while len(w.stores["pods"].snapshot()) != want:
    time.sleep(0.05)
time.sleep(1.0)  # late MODIFIED events of the deleted pods
out = {"churn_cpu_s": cpu() - cpu2, "churn_events": events - events0}
out["cpu_ms_per_event"] = out["churn_cpu_s"] * 1000 / max(out["churn_events"], 1)
print(json.dumps(out), flush=True)
w.stop()
"""


def pod(i: int, ns: str, nodes: int, gpu: bool, prefix: str) -> dict:
    ask = {"limits": {GPU: "1"}, "requests": {GPU: "1"}} if gpu else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{prefix}-{i}",
            "namespace": ns,
            "labels": {"bench": prefix},
            "annotations": {
                f"{st}.stage.kwok.x-k8s.io/{k}": "0s"
                for st in ("pod-create", "pod-ready", "pod-delete")
                for k in ("delay", "jitter-delay")
            },
        },
        "spec": {
            "nodeName": f"pods-{i % nodes}",
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "c", "image": "x", "resources": ask}],
        },
    }


def create(cp, docs: list[dict]) -> None:
    for start in range(0, len(docs), 250):
        cp.kubectl("create", "-f", "-", input=yaml.safe_dump_all(docs[start : start + 250]))


def running(cp, ns: str, prefix: str) -> int:
    items = cp.api(
        "GET", f"/api/v1/namespaces/{ns}/pods", params={"labelSelector": f"bench={prefix}"}
    )["items"]
    return sum(1 for p in items if (p.get("status") or {}).get("phase") == "Running")


def wait(cond, what: str, timeout: float = 900.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise SystemExit(f"kueue_pods: not within {timeout:g} s: {what}")
        time.sleep(1.0)


def measure(cp, kubeconfig: Path, ns: str, variant: str, churn: int, gpu_pods: int) -> dict:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(kubeconfig), variant],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=HERE,
        env={"PYTHONPATH": str(HERE), "PATH": "/usr/bin:/bin"},
    )
    result = json.loads(child.stdout.readline())
    child.stdin.write("go\n")
    child.stdin.flush()
    create(cp, [pod(i, ns, 10, True, "churn") for i in range(churn)])
    wait(lambda: running(cp, ns, "churn") == churn, "the churn's pods Running")
    cp.kubectl("delete", "pods", "-n", ns, "-l", "bench=churn", "--grace-period=0", "--wait")
    child.stdin.write(f"{gpu_pods if variant == 'kept' else result['held']}\n")
    child.stdin.flush()
    result.update(json.loads(child.stdout.readline()))
    child.wait(timeout=60)
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pods", type=int, nargs="+", default=[1000, 5000])
    p.add_argument("--churn", type=int, default=500)
    args = p.parse_args(argv)
    why = why_not_here()
    if why is not None:
        print(f"kueue_pods: {why}", file=sys.stderr)
        return 2
    with harness.control_plane("chronus-kueue-pods-") as (cp, kubeconfig, tmp):
        ns = "pods"
        cp.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        account = f"/api/v1/namespaces/{ns}/serviceaccounts/default"  # a pod needs it
        wait(lambda: cp.api("GET", account, ok=(200, 404)).get("metadata"), "its account", 60)
        for n in range(10):
            cp.api(
                "POST",
                "/api/v1/nodes",
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": f"pods-{n}", "annotations": {KWOK_NODE: "fake"}},
                    "status": {
                        "allocatable": {"cpu": "640", "pods": "10000", GPU: "1000"},
                        "capacity": {"cpu": "640", "pods": "10000", GPU: "1000"},
                    },
                },
            )
        have = 0
        for n in sorted(args.pods):
            began = time.monotonic()
            create(cp, [pod(i, ns, 10, i % 2 == 0, "base") for i in range(have, n)])
            wait(lambda n=n: running(cp, ns, "base") == n, f"{n} pods Running")
            have = n
            made = time.monotonic() - began
            for variant in ("kept", "whole"):
                row = measure(cp, kubeconfig, ns, variant, args.churn, (n + 1) // 2)
                row.update(pods=n, gpu_pods=(n + 1) // 2, created_s=round(made, 1))
                print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
