"""The test control plane itself: Kueue admits a suspended Job within its ClusterQueue's GPU
quota, kube-scheduler binds its pod to a kwok node, kwok runs it to completion; a Job beyond
the quota waits suspended until the quota is free. The rest is what the kueue backend's tests
rely on: Kueue's webhook and RBAC. (Kueue carrying on after an API server restart is checked
with chronus's own restart, in test_kueue_serve.py: one restart for both.)"""

from __future__ import annotations

import re
import subprocess

from polling import wait_for

from chronus_py.backends.kueue.lab import GPU, SOURCES, job


def get_job(kube, ns, name):
    return kube.api("GET", f"/apis/batch/v1/namespaces/{ns}/jobs/{name}")


def pods_of(kube, ns, name):
    return kube.api(
        "GET", f"/api/v1/namespaces/{ns}/pods", params={"labelSelector": f"job-name={name}"}
    )["items"]


def succeeded(kube, ns, name):
    return get_job(kube, ns, name).get("status", {}).get("succeeded", 0) >= 1


def held_back(kube, ns, name) -> bool:
    """Whether Kueue tried the Workload of Job ``name`` and found no quota for it (its
    ``QuotaReserved`` condition False, reason ``Pending``)."""
    items = kube.api("GET", f"/apis/{kube.kueue_api}/namespaces/{ns}/workloads")["items"]
    return any(
        c["type"] == "QuotaReserved" and c["status"] == "False" and c.get("reason") == "Pending"
        for w in items
        if any(o.get("name") == name for o in w["metadata"].get("ownerReferences") or [])
        for c in (w.get("status") or {}).get("conditions") or []
    )


def test_the_daemons_are_the_kubernetes_release_asked_for(kube):
    """``$CHRONUS_TEST_KUBE`` picks the API server, controller manager and scheduler: each is
    the release its ``go.mod`` pins (a build that put one release's binaries where the other's
    belong would pass every other test on the wrong Kubernetes)."""
    pins = (SOURCES / kube.kube / "go.mod").read_text()
    (pinned,) = re.findall(r"^(?:require)?\s*k8s\.io/kubernetes (v[\d.]+)\b", pins, re.M)
    assert kube.api("GET", "/version")["gitVersion"] == pinned
    for daemon in ("kube-controller-manager", "kube-scheduler"):
        out = subprocess.run(
            [str(kube.bin / kube.kube / daemon), "--version"], capture_output=True, text=True
        ).stdout
        assert out.split() == ["Kubernetes", pinned], out


def test_a_job_is_admitted_scheduled_run_and_completed_within_quota(kube, kube_ns, kube_queues):
    node = f"gpu-{kube_ns}"
    kube.add_node(node, gpus=4)
    queue = kube_queues(4)
    jobs = f"/apis/batch/v1/namespaces/{kube_ns}/jobs"

    # first runs until the test has seen second held back (``finish_pods``)
    kube.api("POST", jobs, job("first", queue, namespace=kube_ns, gpus=4, run_seconds=600))
    pods = wait_for(
        lambda: [
            p for p in pods_of(kube, kube_ns, "first") if p["status"].get("phase") == "Running"
        ],
        60,
        "first's pod to run",
        every=0.25,
    )
    assert pods[0]["spec"]["nodeName"] == node
    assert pods[0]["spec"]["containers"][0]["resources"]["requests"][GPU] == "4"
    assert get_job(kube, kube_ns, "first")["spec"]["suspend"] is False
    # Created unsuspended: Kueue's mutating webhook suspends it, so it waits for quota too.
    # Only now: Kueue orders Workloads by creation time, to the second, so a second created in
    # first's second could be admitted before it (it then ran and ended before first ran).
    second = kube.api("POST", jobs, job("second", queue, namespace=kube_ns, gpus=2, suspend=False))
    assert second["spec"]["suspend"] is True
    # 4 + 2 GPUs exceed the quota of 4: Kueue tries second and holds it back, suspended, podless.
    wait_for(
        lambda: held_back(kube, kube_ns, "second"), 30, "Kueue to hold second back", every=0.25
    )
    assert get_job(kube, kube_ns, "second")["spec"]["suspend"] is True
    assert pods_of(kube, kube_ns, "second") == []
    assert kube.finish_pods(kube_ns, "first") == 1

    wait_for(lambda: succeeded(kube, kube_ns, "first"), 60, "first to complete", every=0.25)
    wait_for(lambda: succeeded(kube, kube_ns, "second"), 60, "second to complete", every=0.25)

    def finished():  # Kueue marks a Workload Finished after its Job succeeded, not at once
        workloads = kube.api("GET", f"/apis/{kube.kueue_api}/namespaces/{kube_ns}/workloads")
        return [
            w
            for w in workloads["items"]
            for c in (w.get("status") or {}).get("conditions") or []
            if c["type"] == "Finished" and c["status"] == "True"
        ]

    wait_for(lambda: len(finished()) == 2, 30, "both Workloads Finished", every=0.25)


def test_rbac_is_enforced_for_service_accounts(kube, kube_ns):
    config = kube.service_account_kubeconfig(kube_ns, "nobody")
    denied = subprocess.run(
        [
            str(kube.bin / "kubectl"),
            f"--kubeconfig={config}",
            "get",
            "workloads.kueue.x-k8s.io",
            "-A",
        ],
        capture_output=True,
        text=True,
    )
    assert denied.returncode != 0
    assert "forbidden" in denied.stderr
