"""What the kueue backend's end-to-end tests share: a chronus admission check and queue for one
test, Jobs submitted the way users would (``kubectl apply`` of a Job with the queue label and
chronus's annotations), and reading back what the cluster recorded (Workloads, Pods)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from lightkube.resources.core_v1 import Node
from polling import wait_for

from chronus_py.backends.base import BackendUnavailable
from chronus_py.backends.kueue import harness
from chronus_py.backends.kueue.kube import APIS, config
from chronus_py.backends.kueue.lab import KUEUE_VARIABLE, KUEUES, ControlPlane, job
from chronus_py.backends.kueue.watch import Kind, Watches, name_key, namespaced_key
from chronus_py.cli import main

#: The Kueue API of the lab's Kueue (``$CHRONUS_TEST_KUEUE``; a value the lab does not know
#: fails or skips every test at the control plane's start, ``lab.why_not_here``).
KUEUE = f"/apis/kueue.x-k8s.io/{KUEUES.get(os.environ.get(KUEUE_VARIABLE, ''), KUEUES['']).api}"


@dataclass
class Setup:
    """One test's cluster: its namespace, chronus's check and queue, and the label that
    marks its nodes (chronus serve is given it as ``--kueue-node-selector``)."""

    cp: ControlPlane
    ns: str
    check: str
    queue: str
    node_label: str
    kubeconfig: Path

    def add_nodes(self, *names: str, gpus: int = 4) -> list[str]:
        """Nodes of this test, all created before waiting for any to be Ready (kwok readies
        them together)."""
        full = [f"{self.ns}-{n}" for n in names]
        for name in full:
            self.cp.add_node(name, gpus, labels={"chronus-test": self.node_label}, wait=False)
        for name in full:
            wait(lambda n=name: self.cp.node_ready(n), 60, f"node {name} Ready")
        return full

    def check_config(self, tmp: Path) -> int:
        """``chronus serve --backend kueue --check`` as this test's controller, with the
        controller's own least-privilege kubeconfig; its exit code."""
        return main(
            [
                "serve",
                "--backend=kueue",
                f"--kubeconfig={self.kubeconfig}",
                f"--kueue-controller-name=chronus.io/{self.ns}",
                f"--db={tmp / 'c.db'}",
                "--check",
            ]
        )

    def serve(self, tmp: Path, name: str = "serve", *extra: str, **kw) -> harness.ServeProcess:
        return harness.ServeProcess(
            self.cp,
            self.kubeconfig,
            tmp / f"{name}.db",
            f"--kueue-node-selector=chronus-test={self.node_label}",
            f"--kueue-controller-name=chronus.io/{self.ns}",
            *extra,
            **kw,
        )

    def submit(
        self,
        name: str,
        *,
        gpus: int = 4,
        pods: int = 1,
        run_seconds: float = 3.0,
        notes: dict[str, str] | None = None,
        queue: str | None = None,
    ) -> str:
        self.cp.apply(
            job(
                name,
                queue or self.queue,
                namespace=self.ns,
                gpus=gpus,
                pods=pods,
                run_seconds=run_seconds,
                annotations=notes,
            )
        )
        return name

    def workload(self, job_name: str) -> dict | None:
        items = self.cp.api("GET", f"{KUEUE}/namespaces/{self.ns}/workloads")["items"]
        for wl in items:
            refs = wl["metadata"].get("ownerReferences") or []
            if any(r.get("kind") == "Job" and r.get("name") == job_name for r in refs):
                return wl
        return None

    def chronus_id(self, job_name: str) -> str:
        wl = wait(lambda: self.workload(job_name), 30, f"the Workload of {job_name}")
        return f"{self.ns}.{wl['metadata']['name']}"

    def promise(self, job_name: str) -> str | None:
        """The guarantee chronus recorded on the Job's Workload (its annotation), or None."""
        wl = self.workload(job_name) or {"metadata": {}}
        return (wl["metadata"].get("annotations") or {}).get("chronus.io/guarantee")

    def entry(self, job_name: str) -> dict:
        wl = self.workload(job_name) or {}
        for e in (wl.get("status") or {}).get("admissionChecks") or []:
            if e["name"] == self.check:
                return e
        return {}

    def pods(self, job_name: str) -> list[dict]:
        return self.cp.api(
            "GET",
            f"/api/v1/namespaces/{self.ns}/pods",
            params={"labelSelector": f"job-name={job_name}"},
        )["items"]

    def running_nodes(self, job_name: str) -> list[str]:
        return sorted(
            p["spec"].get("nodeName", "")
            for p in self.pods(job_name)
            if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
        )

    def bound_nodes(self, job_name: str) -> list[str]:
        """Nodes the Job's live pods are bound to, running or not yet (a gang's pods need not
        start together: one may wait for GPUs a preempted pod still holds in its grace)."""
        return sorted(
            p["spec"].get("nodeName", "")
            for p in self.pods(job_name)
            if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
        )

    def finish(self, job_name: str, pods: int) -> None:
        """End the Job's run now (kwok completes its ``pods`` live pods: ``lab.finish_pods``):
        a Job submitted with a long ``run_seconds`` runs exactly until the test has checked
        what it needed while it ran."""
        assert self.cp.finish_pods(self.ns, job_name) == pods, self.pods(job_name)

    def job_obj(self, job_name: str) -> dict:
        return self.cp.api("GET", f"/apis/batch/v1/namespaces/{self.ns}/jobs/{job_name}")

    def succeeded(self, job_name: str) -> bool:
        return (self.job_obj(job_name).get("status") or {}).get("succeeded", 0) >= 1

    def delete_job(self, job_name: str) -> None:
        self.cp.api(
            "DELETE",
            f"/apis/batch/v1/namespaces/{self.ns}/jobs/{job_name}",
            {"propagationPolicy": "Background"},
            ok=(200, 202, 404),
        )


def make_setup(cp, ns, kube_queues, kubeconfig, *, quota: int = 16) -> Setup:
    """Quota 16 for tests with 8 GPUs of nodes: chronus can only decide between Workloads
    Kueue reserved for, so the quota is a cap per queue, above the GPUs (README)."""
    check = f"chronus-{ns}"
    harness.admission_check(cp, check, f"chronus.io/{ns}")
    queue = kube_queues(quota, admission_checks=[check])
    return Setup(cp, ns, check, queue, ns, kubeconfig)


def wait(cond, timeout: float, what: str, during=None):
    """``cond()``'s first true value (``polling.wait_for``), asked of the API server every
    0.25 s."""
    return wait_for(cond, timeout, what, during, every=0.25)


def watch_all(cp: ControlPlane) -> Watches:
    """The backend's watch-fed copies of every Workload and Node, as the lab's admin."""
    return Watches(
        config(str(cp.kubeconfig)),
        {
            "workloads": Kind(APIS[cp.kueue.api].workload, namespaced_key, namespaced=True),
            "nodes": Kind(Node, name_key, namespaced=False),
        },
    ).start()


def versions(snapshot: dict, ns: str) -> dict[str, str]:
    return {
        k: w["metadata"]["resourceVersion"] for k, w in snapshot.items() if k.startswith(ns + "/")
    }


def listed(cp: ControlPlane, ns: str) -> dict[str, str]:
    items = cp.api("GET", f"{KUEUE}/namespaces/{ns}/workloads")["items"]
    return {f"{ns}/{w['metadata']['name']}": w["metadata"]["resourceVersion"] for w in items}


def follows(watches: Watches, cp: ControlPlane, ns: str) -> bool:
    """Whether the copy holds ``ns``'s Workloads at the versions a fresh list has."""
    try:
        return versions(watches.stores["workloads"].snapshot(), ns) == listed(cp, ns)
    except BackendUnavailable:
        return False


def refused(watches: Watches) -> bool:
    """Whether reading the Workloads' copy is refused, saying its watch is down."""
    try:
        watches.stores["workloads"].snapshot()
    except BackendUnavailable as exc:
        return "watch of workloads" in str(exc)
    return False
