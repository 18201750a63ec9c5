"""The watch-fed copies (``chronus_py/backends/kueue/watch.py``) against the real API server: they
follow creations, changes and deletions. (That they refuse to be read while the API server is
away and follow it again once it is back is checked in test_kueue_serve.py's restart test: one
restart for all.)"""

from __future__ import annotations

import pytest

pytest.importorskip("lightkube")

from kueue_helpers import KUEUE, follows, wait, watch_all  # noqa: E402


def workload(name: str, ns: str) -> dict:
    return {
        "apiVersion": KUEUE.removeprefix("/apis/"),
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


def test_the_copy_follows_the_api_server(kube, kube_ns):
    base = f"{KUEUE}/namespaces/{kube_ns}/workloads"
    for i in range(5):
        kube.api("POST", base, workload(f"w{i}", kube_ns))
    node = f"{kube_ns}-n"
    kube.add_node(node, 2)
    watches = watch_all(kube)
    try:
        assert watches.wait_synced(30)
        # Kueue may write a new Workload between the list and the check: the copy catches up
        wait(lambda: follows(watches, kube, kube_ns), 30, "the copy to hold the first list")
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

        kube.remove_node(node)
        wait(lambda: node not in watches.stores["nodes"].snapshot(), 30, "the node's deletion seen")
    finally:
        watches.stop()
