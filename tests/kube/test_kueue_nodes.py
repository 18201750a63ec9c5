"""Nodes on the kueue backend: Nodes that join, leave or change while ``chronus serve`` runs are
followed without a restart, and a HiveD cell tree keyed by Kubernetes node names places jobs
through the cell allocator, with the pods pinned where it chose. On the session's control
plane, each test in its own namespace with its own nodes (``kueue_helpers.Setup``)."""

from __future__ import annotations

from collections import Counter

import pytest

pytest.importorskip("lightkube")

from kueue_helpers import wait  # noqa: E402

from chronus_py.backends.kueue.lab import GPU, job  # noqa: E402
from chronus_py.cli import main  # noqa: E402


def seen(serve) -> dict[str, int]:
    """Node -> GPUs, as chronus's API says it schedules them now."""
    return {n["name"]: n["gpus"] for n in serve.client.cluster()["nodes"]}


def follows(serve, changes: int, nodes: dict[str, int], what: str) -> list[dict]:
    """Wait for chronus's ``changes``-th cluster change and its API showing ``nodes``; the
    changes so far. (Its API alone could show a node gone that the cluster never dropped: a
    node seen missing by a rebuild and back before the next round looked.)"""
    wait(
        lambda: len(serve.events("cluster_changed")) >= changes and seen(serve) == nodes,
        30,
        f"chronus to follow {what}",
    )
    return serve.events("cluster_changed")


def patch_node(cp, name: str, body: dict, sub: str = "") -> None:
    cp.api("PATCH", f"/api/v1/nodes/{name}{sub}", body, content_type="application/merge-patch+json")


def test_nodes_that_join_change_or_leave_are_followed_without_a_restart(setup, tmp_path):
    """A node added while chronus serves gets work (the only schedulable one, the other being
    cordoned); a changed allocatable count, a label that takes a node out of
    ``--kueue-node-selector`` and back in, and a deleted node each change chronus's cluster."""
    s = setup
    (a,) = s.add_nodes("a")
    with s.serve(tmp_path) as serve:
        wait(lambda: seen(serve) == {a: 4}, 30, "chronus to see node a")
        (b,) = s.add_nodes("b")
        follows(serve, 1, {a: 4, b: 4}, "the new node b")
        s.cp.cordon_node(a)
        wait(  # chronus follows Nodes by a watch: the Job must not come before the cordon does
            lambda: (
                [n["healthy"] for n in serve.client.cluster()["nodes"] if n["name"] == a] == [False]
            ),
            30,
            "chronus to see node a cordoned",
        )
        s.submit("on-b", gpus=4, run_seconds=2, notes={"chronus.io/estimate": "2m"})
        wait(lambda: s.succeeded("on-b"), 60, "the Job to run on the new node")
        assert {p["spec"]["nodeName"] for p in s.pods("on-b")} == {b}
        s.cp.cordon_node(a, False)

        patch_node(s.cp, b, {"status": {"allocatable": {GPU: "2"}}}, "/status")
        follows(serve, 2, {a: 4, b: 2}, "b's GPUs down to 2")
        patch_node(s.cp, a, {"metadata": {"labels": {"chronus-test": "elsewhere"}}})
        follows(serve, 3, {b: 2}, "a out of the node selector")
        patch_node(s.cp, a, {"metadata": {"labels": {"chronus-test": s.node_label}}})
        follows(serve, 4, {a: 4, b: 2}, "a back in the node selector")
        s.cp.remove_node(b)
        changes = follows(serve, 5, {a: 4}, "b gone")

        assert serve.proc.poll() is None  # the same process throughout
        assert [c["joined"] for c in changes] == [[b], [], [], [a], []], changes
        assert [c["left"] for c in changes] == [[], [], [a], [], [b]], changes
        assert changes[1]["resized"] == {b: [4, 2]}, changes


def hived(ns: str, a: str, b: str) -> str:
    """A row of two 4-GPU nodes in GPU pairs, all of it the virtual cluster ``ns`` (a
    namespace is its Jobs' tenant)."""
    return f"""physicalCluster:
  cellTypes:
    PAIR: {{childCellType: GPU, childCellNumber: 2}}
    NODE: {{childCellType: PAIR, childCellNumber: 2, isNodeLevel: true}}
    ROW: {{childCellType: NODE, childCellNumber: 2}}
  physicalCells:
  - cellType: ROW
    cellAddress: row0
    cellChildren: [{{cellAddress: {a}}}, {{cellAddress: {b}}}]
virtualClusters:
  {ns}:
    virtualCells: [{{cellType: ROW, cellNumber: 1}}]
"""


def test_a_hived_cell_tree_places_jobs_on_kubernetes_nodes(setup, tmp_path, capsys):
    """``--cluster hived.yaml`` naming the Kubernetes nodes: every gang is placed in a cell (a
    2-GPU Job in a GPU pair, a 4-GPU Job in a whole node) and its pods run on the node chosen.
    A config naming a node Kubernetes does not have is refused in one line, and a Job of a
    namespace with no virtual cluster is refused on its Workload (it was taken and waited for
    ever, the service's reason never reaching it)."""
    s = setup
    a, b = s.add_nodes("a", "b")
    config = tmp_path / "hived.yaml"
    config.write_text(hived(s.ns, a, b))
    with s.serve(tmp_path, "serve", f"--cluster={config}") as serve:
        names = [
            s.submit(f"j{i}", gpus=g, run_seconds=2, notes={"chronus.io/estimate": "2m"})
            for i, g in enumerate((4, 2, 2, 2))
        ]
        for name in names:
            wait(lambda n=name: s.succeeded(n), 90, f"{name} to complete")
        ids = {s.chronus_id(n): n for n in names}
        starts = {e["job"]: e["placement"] for e in serve.events("start")}
        assert set(starts) == set(ids), starts
        for job_id, placement in starts.items():
            ((node, gpus),) = placement.items()
            assert tuple(gpus) in ((0, 1), (2, 3), (0, 1, 2, 3)), placement  # whole cells
            assert {p["spec"]["nodeName"] for p in s.pods(ids[job_id])} == {node}

    config.write_text(hived("elsewhere", a, b))
    with s.serve(tmp_path, "stray", f"--cluster={config}") as serve:
        s.submit("stray", gpus=2, run_seconds=2, notes={"chronus.io/estimate": "2m"})
        entry = wait(
            lambda: (e := s.entry("stray")).get("state") == "Rejected" and e, 60, "a refusal"
        )
        assert entry["message"] == (
            f"chronus refused it: namespace: {s.ns!r} is no virtual cluster of the cell "
            "allocator (have: elsewhere)"
        ), entry
        assert not serve.jobs()

    config.write_text(hived(s.ns, a, f"{s.ns}-missing"))
    code = main(
        [
            "serve",
            "--backend=kueue",
            f"--kubeconfig={s.kubeconfig}",
            f"--kueue-node-selector=chronus-test={s.node_label}",
            f"--kueue-controller-name=chronus.io/{s.ns}",
            f"--cluster={config}",
            f"--db={tmp_path / 'refused.db'}",
            "--listen=127.0.0.1:0",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].endswith(
        f"--cluster: nodes {s.ns}-missing are not Kubernetes nodes with allocatable GPUs "
        f"matching --kueue-node-selector (there are: {a}, {b})"
    ), err


def foreign_pod(s, name: str, node: str, gpus: int) -> None:
    """A bare pod (no Job, no Kueue) asking ``gpus`` GPUs, bound to ``node`` by kube-scheduler
    (its hostname as nodeSelector); kwok runs it until it is deleted, then removes it at once."""
    stages = {"pod-create": 0, "pod-ready": 0, "pod-delete": 0}
    s.cp.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": s.ns,
                "annotations": {
                    f"{st}.stage.kwok.x-k8s.io/{k}": f"{v}s"
                    for st, v in stages.items()
                    for k in ("delay", "jitter-delay")
                },
            },
            "spec": {
                "nodeSelector": {"kubernetes.io/hostname": node},
                "terminationGracePeriodSeconds": 0,
                "containers": [
                    {
                        "name": "other",
                        "image": "other:latest",
                        "resources": {"requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}},
                    }
                ],
            },
        }
    )


def health(serve) -> dict[str, tuple[bool, str]]:
    return {n["name"]: (n["healthy"], n["reason"]) for n in serve.client.cluster()["nodes"]}


def test_gpus_held_by_pods_chronus_did_not_start_keep_chronus_off_their_node(setup, tmp_path):
    """A pod asking GPUs on one of chronus's nodes that is not a pod of a Workload chronus
    started holds GPUs chronus would otherwise count free: the node takes no new work while it
    is there (chronus pinned a Workload's pods there and kube-scheduler left them Pending), and
    takes work again once it is gone. Chronus's own pods never make a node unhealthy."""
    s = setup
    a, b = s.add_nodes("a", "b")
    with s.serve(tmp_path) as serve:
        foreign_pod(s, "other", a, 2)
        wait(
            lambda: (
                health(serve).get(a) == (False, f"GPUs held by pod {s.ns}/other, not chronus's")
            ),
            30,
            "chronus to see node a's GPUs held by another's pod",
        )
        notes = {"chronus.io/estimate": "10h"}
        for name in ("one", "two"):
            s.submit(name, gpus=4, run_seconds=600, notes=notes)
        ids = {name: s.chronus_id(name) for name in ("one", "two")}

        # both decided: one started (on b), the other told it waits (never started on a)
        def decided():
            e = {n: s.entry(n) for n in ids}
            states = sorted(x.get("state", "") for x in e.values())
            return (
                states == ["Pending", "Ready"] and all(x.get("message") for x in e.values()) and e
            )

        entries = wait(decided, 60, "one Job started and the other told it waits")
        (ran,) = [n for n, e in entries.items() if e["state"] == "Ready"]
        (waits,) = [n for n in ids if n != ran]
        assert "waits for free GPUs" in entries[waits]["message"], entries
        wait(lambda: s.running_nodes(ran) == [b], 60, f"{ran} running on b")
        assert s.pods(waits) == [], s.pods(waits)  # its Job still suspended: nothing Pending
        assert health(serve)[b] == (True, ""), health(serve)  # chronus's own pod holds b

        s.cp.api("DELETE", f"/api/v1/namespaces/{s.ns}/pods/other", ok=(200, 202, 404))
        wait(lambda: health(serve).get(a) == (True, ""), 30, "node a healthy again")
        wait(lambda: s.running_nodes(waits) == [a], 60, f"{waits} running on a")
        events = serve.events("node_unhealthy", "node_healthy", "start")
        starts = {e["job"]: sorted(e["placement"]) for e in events if e["event"] == "start"}
        assert starts == {ids[ran]: [b], ids[waits]: [a]}, events


def test_a_gang_bound_otherwise_than_planned_keeps_new_work_off_the_node_it_crowds(setup, tmp_path):
    """A multi-node Workload is pinned by a label on its nodes, and kube-scheduler binds its
    pods among them as it likes: here as the Job prefers (node a), 4 + 1 where chronus planned
    2 + 3. Node a then holds 2 GPUs more than chronus placed there; it takes no new work while
    the gang runs (a Job placed there was left Pending), and a Job that arrives meanwhile
    waits, unstarted, until the gang is done."""
    s = setup
    a, b = s.add_nodes("a", "b")
    est = "chronus.io/estimate"
    with s.serve(tmp_path) as serve:
        s.cp.cordon_node(a)
        wait(lambda: health(serve).get(a, (None,))[0] is False, 30, "chronus to see a cordoned")
        s.submit("one", gpus=1, run_seconds=600, notes={est: "10h"})  # 1 GPU of b, for good
        wait(lambda: s.running_nodes("one") == [b], 60, "one running on b")
        s.cp.cordon_node(a, False)
        wait(lambda: health(serve).get(a) == (True, ""), 30, "chronus to see a uncordoned")

        gang = job(
            "gang", s.queue, namespace=s.ns, pods=5, run_seconds=600, annotations={est: "30m"}
        )  # it runs until late was told it waits (``finish``)
        gang["spec"]["template"]["spec"]["affinity"] = {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "preference": {
                            "matchExpressions": [
                                {"key": "kubernetes.io/hostname", "operator": "In", "values": [a]}
                            ]
                        },
                    }
                ]
            }
        }
        s.cp.apply(gang)
        gang_id = s.chronus_id("gang")
        wait(lambda: len(s.bound_nodes("gang")) == 5, 60, "the gang's pods bound")
        (start,) = [e for e in serve.events("start") if e["job"] == gang_id]
        planned = {n: len(g) for n, g in start["placement"].items()}
        assert planned == {a: 2, b: 3}, planned
        assert Counter(s.bound_nodes("gang")) == {a: 4, b: 1}, s.bound_nodes("gang")
        wait(
            lambda: (
                health(serve).get(a) == (False, f"{gang_id}'s pods hold 4 GPUs, chronus placed 2")
            ),
            30,
            "chronus to see node a crowded",
        )
        s.submit("late", gpus=2, run_seconds=2, notes={est: "10h"})  # behind the gang

        def told() -> dict | None:
            e = s.entry("late")
            return "waits for free GPUs" in e.get("message", "") and e

        entry = wait(told, 30, "late told it waits")
        assert entry["state"] == "Pending" and s.pods("late") == [], (entry, s.pods("late"))
        assert s.bound_nodes("gang"), "the gang ended before late was decided: nothing tested"
        s.finish("gang", 5)
        wait(lambda: s.succeeded("late"), 120, "late to run once the gang is done")
        wait(lambda: health(serve).get(a) == (True, ""), 30, "node a healthy again")
