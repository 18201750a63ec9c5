"""The watch-fed copies (``chronus_py/service/kueue/watch.py``) against the real API server: they
follow creations, changes and deletions; while the API server is away they refuse to be read;
once it is back they are listed again and follow it again."""

from __future__ import annotations

import pytest

pytest.importorskip("lightkube")

from kueue_helpers import KUEUE, wait  # noqa: E402
from lightkube.resources.core_v1 import Node  # noqa: E402

from chronus_py.service.backend import BackendUnavailable  # noqa: E402
from chronus_py.service.kueue.kube import Workload, config  # noqa: E402
from chronus_py.service.kueue.watch import Kind, Watches, name_key, namespaced_key  # noqa: E402


def workload(name: str, ns: str) -> dict:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "queueName": "nowhere",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}},
                }
            ],
        },
    }


def versions(snapshot: dict, ns: str) -> dict[str, str]:
    return {
        k: w["metadata"]["resourceVersion"] for k, w in snapshot.items() if k.startswith(ns + "/")
    }


def listed(kube, ns: str) -> dict[str, str]:
    items = kube.api("GET", f"{KUEUE}/namespaces/{ns}/workloads")["items"]
    return {f"{ns}/{w['metadata']['name']}": w["metadata"]["resourceVersion"] for w in items}


def follows(watches: Watches, kube, ns: str) -> bool:
    try:
        return versions(watches.stores["workloads"].snapshot(), ns) == listed(kube, ns)
    except BackendUnavailable:
        return False


def test_the_copy_follows_the_api_server_and_its_restart(kube, kube_ns):
    base = f"{KUEUE}/namespaces/{kube_ns}/workloads"
    for i in range(5):
        kube.api("POST", base, workload(f"w{i}", kube_ns))
    node = f"{kube_ns}-n"
    kube.add_node(node, 2)
    watches = Watches(
        config(str(kube.kubeconfig)),
        {
            "workloads": Kind(Workload, namespaced_key, namespaced=True),
            "nodes": Kind(Node, name_key, namespaced=False),
        },
    ).start()
    try:
        assert watches.wait_synced(30)
        assert versions(watches.stores["workloads"].snapshot(), kube_ns) == listed(kube, kube_ns)
        assert node in watches.stores["nodes"].snapshot()

        kube.api("DELETE", f"{base}/w0")
        kube.api("POST", base, workload("w5", kube_ns))
        kube.api(
            "PATCH",
            f"{base}/w1",
            {"metadata": {"labels": {"changed": "yes"}}},
            content_type="application/merge-patch+json",
        )
        wait(lambda: follows(watches, kube, kube_ns), 30, "the copy to follow the changes")
        assert watches.stores["workloads"].snapshot()[f"{kube_ns}/w1"]["metadata"]["labels"] == {
            "changed": "yes"
        }

        kube.stop_apiserver()

        def refused() -> bool:
            try:
                watches.stores["workloads"].snapshot()
            except BackendUnavailable as exc:
                return "watch of workloads" in str(exc)
            return False

        wait(refused, 30, "the copy to refuse reads while the API server is away")
        kube.start_apiserver()
        kube.api("DELETE", f"{base}/w2")  # changed while no watch ran: found by the new list
        wait(lambda: follows(watches, kube, kube_ns), 60, "the copy to follow after the restart")
        kube.remove_node(node)
        wait(lambda: node not in watches.stores["nodes"].snapshot(), 30, "the node's deletion seen")
    finally:
        watches.stop()
