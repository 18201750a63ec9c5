"""One-command demo: ``python -m chronus_py.backends.kueue.demo`` (the control plane built by
``tests/kube/controlplane/build.sh``).

Starts a private control plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager,
kwok nodes, Kueue) in a temporary directory, ``chronus serve --backend kueue`` as its
ServiceAccount, a chronus ClusterQueue on two 4-GPU nodes, and submits Jobs the way users would
(``kueue.x-k8s.io/queue-name`` plus chronus annotations), in compressed time (1 wall second =
1 minute). It prints what ``kubectl describe workload`` would show of chronus's check for each
Job, and where its pods ran, then stops every daemon it started.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from chronus_py.backends.kueue import harness
from chronus_py.backends.kueue.lab import ControlPlane, job, why_not_here

JOBS = (  # name, GPUs, wall seconds (= minutes of work), annotations
    ("resnet", 4, 6, {"chronus.io/estimate": "6m", "chronus.io/deadline": "+30m"}),
    ("bert", 4, 4, {"chronus.io/estimate": "4m", "chronus.io/deadline": "+20m"}),
    ("sweep", 4, 3, {"chronus.io/estimate": "3m"}),
    ("rushed", 4, 5, {"chronus.io/estimate": "2h", "chronus.io/deadline": "+1h"}),
    ("typo", 4, 3, {"chronus.io/estimate": "1h", "chronus.io/deadline": "tomorrow"}),
)


def main() -> int:
    why = why_not_here()
    if why is not None:
        print(f"demo: {why}", file=sys.stderr)
        return 2
    with harness.control_plane("chronus-kueue-demo-") as (cp, kubeconfig, tmp):
        return _run(cp, kubeconfig, tmp)


def _run(cp: ControlPlane, kubeconfig: Path, tmp: Path) -> int:
    for node in ("gpu-1", "gpu-2"):
        cp.add_node(node, 4)
    harness.admission_check(cp, "chronus")
    cp.make_queues("training", 16, "team-a", admission_checks=["chronus"])
    print("control plane up: 2 kwok nodes x 4 GPUs, ClusterQueue 'training' with check 'chronus'")
    with harness.ServeProcess(cp, kubeconfig, tmp / "chronus.db"):
        for name, gpus, seconds, notes in JOBS:
            cp.apply(
                job(
                    name,
                    "training",
                    namespace="team-a",
                    gpus=gpus,
                    run_seconds=seconds,
                    annotations=notes,
                )
            )
        print(f"submitted {len(JOBS)} Jobs to team-a/training; waiting for them to end")
        end = time.monotonic() + 120
        while time.monotonic() < end and not _all_ended(cp):
            time.sleep(1)
        for name, *_ in JOBS:
            wl = _workload(cp, name) or {}
            entry = next(iter((wl.get("status") or {}).get("admissionChecks") or []), {})
            pods = cp.api(
                "GET",
                "/api/v1/namespaces/team-a/pods",
                params={"labelSelector": f"job-name={name}"},
            )["items"]
            nodes = sorted({p["spec"].get("nodeName") or "-" for p in pods}) or ["-"]
            print(
                f"{name:>7}: {entry.get('state', '-'):<8} on {','.join(nodes):<12} "
                f"{entry.get('message', '')}"
            )
    return 0


def _workload(cp: ControlPlane, name: str) -> dict | None:
    for wl in cp.api("GET", f"/apis/{cp.kueue_api}/namespaces/team-a/workloads")["items"]:
        if any(r.get("name") == name for r in wl["metadata"].get("ownerReferences") or []):
            return wl
    return None


def _all_ended(cp: ControlPlane) -> bool:
    for name, *_ in JOBS:
        wl = _workload(cp, name)
        conditions = {
            c["type"]: c["status"] for c in (wl or {}).get("status", {}).get("conditions", [])
        }
        active = (wl or {}).get("spec", {}).get("active", True)
        if wl is None or (conditions.get("Finished") != "True" and active):
            return False
    return True


if __name__ == "__main__":
    sys.exit(main())
