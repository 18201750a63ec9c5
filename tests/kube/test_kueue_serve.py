"""``chronus serve --backend kueue`` end to end: the real API server, Kueue's real controller and
webhooks, kube-scheduler binding pods onto kwok nodes; chronus as a child process acting as the
ServiceAccount of ``deploy/kueue/controller.yaml`` with that manifest's RBAC.

Time is compressed: one wall second is a chronus minute (``--kueue-time-scale 60``), so a Job
whose pods kwok runs for 3 s is 3 minutes of work, and a 5-minute lease lasts 5 s. What is
checked comes from the cluster: the Workload's check (state, message), where the Job's pods were
bound, the Job's status; chronus's decisions come from its decision log and its HTTP API.
"""

from __future__ import annotations

from contextlib import contextmanager

import httpx
import pytest

pytest.importorskip("lightkube")

from kueue_helpers import (  # noqa: E402
    KUEUE,
    follows,
    make_setup,
    refused,
    wait,
    watch_all,
)

from chronus_py.backends.kueue import harness  # noqa: E402


@contextmanager
def watches_stopped(watches):
    try:
        yield watches
    finally:
        watches.stop()


def managers(wl: dict) -> set[str]:
    return {m.get("manager") for m in wl["metadata"].get("managedFields") or []}


def test_admission_guarantee_pool_placement_and_bad_annotation(setup, tmp_path, kube_queues):
    """A Job with a deadline it can meet is guaranteed and runs where the allocator placed it;
    one whose deadline is hopeless is told why and still runs in the pool; a bad annotation is
    rejected naming it, and the controller goes on; a Job of a queue without chronus's check
    is Kueue's alone."""
    s = setup
    s.add_nodes("a", "b")
    s.cp.add_node(f"{s.ns}-plain", 2, labels={"chronus-test": f"{s.ns}-other"})
    plain_q = kube_queues(2, node_labels={"chronus-test": f"{s.ns}-other"})
    with s.serve(tmp_path) as serve:
        s.submit("bad", notes={"chronus.io/estimate": "1h", "chronus.io/deadline": "tomorrow"})
        s.submit("urgent", notes={"chronus.io/estimate": "4m", "chronus.io/deadline": "+60m"})
        s.submit("late", notes={"chronus.io/estimate": "2h", "chronus.io/deadline": "+1h"})
        s.submit("plain", gpus=2, run_seconds=2, queue=plain_q)

        rejected = wait(  # one read: Kueue may reset the check to Pending between two
            lambda: (e := s.entry("bad")).get("state") == "Rejected" and e,
            60,
            "the bad Job's check Rejected",
        )
        assert "chronus.io/deadline:" in rejected["message"], rejected
        wait(lambda: s.workload("bad")["spec"].get("active") is False, 30, "bad deactivated")

        for name in ("urgent", "late"):
            wait(lambda n=name: s.succeeded(n), 90, f"{name} to complete")
        wait(lambda: s.succeeded("plain"), 60, "the plain Job to complete")

        urgent, late = s.chronus_id("urgent"), s.chronus_id("late")
        jobs = wait(
            lambda: (
                (j := serve.jobs()).get(urgent, {}).get("state") == "finished"
                and j.get(late, {}).get("state") == "finished"
                and j
            ),
            30,
            "chronus to see both finish",
        )
        assert jobs[urgent]["admission"]["decision"] == "guaranteed"
        assert jobs[urgent]["tenant"] == s.ns
        assert jobs[late]["admission"]["decision"] == "not_guaranteed"
        # the messages are queued after the start (never ahead of one): written soon after it
        wait(lambda: "guaranteed to finish by" in s.entry("urgent")["message"], 15, "urgent's")
        late_says = wait(
            lambda: (m := s.entry("late")["message"]).count("not guaranteed:") == 1 and m,
            15,
            "late's message",
        )
        assert "cannot meet its last deadline" in late_says

        starts = {e["job"]: e["placement"] for e in serve.events("start")}
        for name, job_id in (("urgent", urgent), ("late", late)):
            (node,) = starts[job_id]  # one node, as the allocator chose
            bound = {p["spec"]["nodeName"] for p in s.pods(name)}
            assert bound == {node}, (name, bound, starts[job_id])
        assert not any(e["job"].endswith(("bad",)) for e in serve.events("start"))

        # Kueue resets every check to Pending when it evicts the deactivated Workload; chronus
        # says again why, and the Job stays suspended
        wait(
            lambda: (
                s.entry("bad").get("state") == "Rejected"
                and "chronus.io/deadline:" in s.entry("bad")["message"]
            ),
            30,
            "the refusal shown again after Kueue's reset",
        )
        assert s.job_obj("bad")["spec"]["suspend"] is True

        plain = s.workload("plain")
        assert "chronus" not in managers(plain)
        assert not any(
            k.startswith("chronus.io/") for k in plain["metadata"].get("annotations", {})
        )
        assert serve.proc.poll() is None


def test_quota_is_respected(kube, kube_ns, kube_queues, chronus_kubeconfig, tmp_path):
    """With 4 GPUs of quota on 8 GPUs of nodes, Kueue reserves for one 4-GPU Job at a time, and
    chronus never starts the other before it has its quota."""
    s = make_setup(kube, kube_ns, kube_queues, chronus_kubeconfig, quota=4)
    s.add_nodes("a", "b")
    with s.serve(tmp_path):
        for name in ("q1", "q2"):
            s.submit(name, run_seconds=2, notes={"chronus.io/estimate": "2m"})
        overlap = []

        def look():
            if len(s.running_nodes("q1")) + len(s.running_nodes("q2")) > 1:
                overlap.append(True)

        wait(lambda: s.succeeded("q1") and s.succeeded("q2"), 90, "both to complete", look)
        assert not overlap


def test_preempt_resume_elsewhere_and_cancel(setup, tmp_path):
    """A long best-effort Job runs; a wide guaranteed one arrives that cannot wait for it:
    chronus preempts the first (Kueue evicts it: pods deleted, Job suspended), runs the wide one
    on both nodes (a two-pod gang pinned by a node label), and once it is done resumes the first
    on the node that was not cordoned meanwhile. Deleting a Job cancels its chronus job."""
    s = setup
    a, b = s.add_nodes("a", "b")
    with s.serve(tmp_path) as serve:
        s.submit("long", run_seconds=600, notes={"chronus.io/estimate": "60m"})
        first = wait(lambda: s.running_nodes("long"), 60, "long to run")
        long_id = s.chronus_id("long")
        s.submit(
            "wide",
            pods=2,
            # Its pods run until the test ends them (``finish``), both bound by then: a pod
            # that finished before the preempted pod had gone (4.7 s once in CI) freed its node
            # for the other, which then bound there too and the pair never held both nodes.
            run_seconds=600,
            # 50 minutes: chronus starts it as late as its guarantee allows and credits no work
            # before its pods run, which here waits for long's pods to end their termination
            # grace (3.7 wall s, 220 chronus s, once on Kubernetes 1.37). The plan charges each
            # start that grace (5 s, 300 chronus s) and the latency measured on earlier starts
            # (a minute per wall second at this compression); a loaded machine needs room
            notes={"chronus.io/estimate": "12m", "chronus.io/deadline": "+50m"},
        )
        wait(
            lambda: any(e["job"] == long_id for e in serve.events("preempt")),
            60,
            "chronus to preempt long",
        )
        wait(lambda: s.job_obj("long")["spec"].get("suspend") is True, 30, "long suspended")
        wide_id = s.chronus_id("wide")
        wait(lambda: s.bound_nodes("wide") == sorted([a, b]), 60, "wide bound to both nodes")
        # Seen running by chronus before the cordon: else the next plan has a pending wide
        # job on one healthy node, breaks its guarantee and stops it (2 of 13 runs on Kueue
        # 0.14, slack 133 s against the 120 s restart overhead).
        wait(lambda: serve.jobs()[wide_id]["state"] == "running", 30, "chronus to see wide run")
        s.cp.cordon_node(first[0])  # running pods stay; nothing new goes there
        (placement,) = [e["placement"] for e in serve.events("start") if e["job"] == wide_id]
        assert sorted(placement) == sorted([a, b]) and all(len(g) == 4 for g in placement.values())
        assert serve.jobs()[wide_id]["admission"]["decision"] == "guaranteed"
        wait(lambda: "guaranteed to finish by" in s.entry("wide")["message"], 15, "wide's message")
        wait(  # chronus follows Nodes by a watch: wide must not end before the cordon is seen
            lambda: (
                [n["healthy"] for n in serve.client.cluster()["nodes"] if n["name"] == first[0]]
                == [False]
            ),
            30,
            "chronus to see the cordon",
        )
        s.finish("wide", 2)
        wait(lambda: s.succeeded("wide"), 60, "wide to complete")
        again = wait(lambda: s.running_nodes("long"), 60, "long to resume")
        assert first[0] not in again, (first, again)
        job = wait(
            lambda: serve.jobs()[long_id]["starts"] == 2 and serve.jobs()[long_id],
            30,
            "chronus to count the second run",
        )
        assert job["state"] == "running"
        nodes = {n["metadata"]["name"]: n for n in s.cp.api("GET", "/api/v1/nodes")["items"]}
        for node in (a, b):
            labels = nodes[node]["metadata"]["labels"]
            assert not any(k.startswith("chronus.io/gang-") for k in labels), labels

        s.delete_job("long")
        wait(lambda: serve.jobs()[long_id]["state"] == "cancelled", 60, "long cancelled")


def test_controller_killed_mid_round_rebuilds_from_the_cluster(setup, tmp_path):
    """SIGKILL the controller while it decides; a new one with an empty database (a new Pod)
    finds the running Job (never started again: same pod), its promise kept, and the waiting one
    started when the first ends."""
    s = setup
    (node,) = s.add_nodes("a")
    first = s.serve(tmp_path, "first").start()
    try:
        # each runs until the test ends it (``finish``)
        s.submit(
            "g1",
            run_seconds=600,
            notes={"chronus.io/estimate": "8m", "chronus.io/deadline": "+60m"},
        )
        s.submit(
            "g2",
            run_seconds=600,
            notes={"chronus.io/estimate": "6m", "chronus.io/deadline": "+90m"},
        )
        wait(lambda: s.running_nodes("g1") or s.running_nodes("g2"), 60, "a job to run")
        runner = "g1" if s.running_nodes("g1") else "g2"
        uid = s.pods(runner)[0]["metadata"]["uid"]
        promised = wait(
            lambda: (
                all(s.promise(n) for n in ("g1", "g2")) and {n: s.promise(n) for n in ("g1", "g2")}
            ),
            30,
            "both promises recorded on the Workloads",
        )
        first.kill9()
    finally:
        first.stop()
    second = s.serve(tmp_path, "second", origin=first.origin).start()
    try:
        ids = {n: s.chronus_id(n) for n in ("g1", "g2")}
        jobs = second.jobs()
        waiting = "g2" if runner == "g1" else "g1"
        assert jobs[ids[waiting]]["guaranteed"] is not None, jobs[ids[waiting]]
        for name in ("g1", "g2"):
            assert s.promise(name) == promised[name]
        # running and adopted with its promise, never started again (its first round decided
        # with it running, its commands issued: they are before the next round's)
        wait(lambda: second.client.health()["rounds"] >= 2, 30, "the new controller's rounds")
        assert jobs[ids[runner]]["state"] == "running", jobs[ids[runner]]
        assert jobs[ids[runner]]["guaranteed"] is not None, jobs[ids[runner]]
        assert not any(e["job"] == ids[runner] for e in second.events("start"))
        assert s.running_nodes(runner)
        s.finish(runner, 1)
        wait(lambda: s.succeeded(runner), 90, f"{runner} to complete")
        wait(lambda: s.running_nodes(waiting), 60, f"{waiting} to start once {runner} ended")
        s.finish(waiting, 1)
        wait(lambda: s.succeeded(waiting), 90, f"{waiting} to complete")
        assert {p["metadata"]["uid"] for p in s.pods(runner)} == {uid}
    finally:
        second.stop()


def test_api_server_restart(setup, tmp_path, kube_queues):
    """The API server goes away mid-run and comes back: the controller keeps running, decides
    nothing meanwhile, and then carries on; so does Kueue alone, for a Job of a queue without
    chronus's check submitted after the restart; and the backend's watch-fed copy refuses to be
    read while the API server is away, then is listed again and follows it (one restart serves
    all three: it is the slowest step of the suite)."""
    s = setup
    s.add_nodes("a")
    s.cp.add_node(f"{s.ns}-plain", 2, labels={"chronus-test": f"{s.ns}-other"})
    plain_q = kube_queues(2, node_labels={"chronus-test": f"{s.ns}-other"})
    watches = watch_all(s.cp)
    with watches_stopped(watches), s.serve(tmp_path) as serve:
        # each runs until the test ends it (``finish``): one across the outage, one after it
        s.submit("r1", run_seconds=600, notes={"chronus.io/estimate": "4m"})
        s.submit("r2", run_seconds=600, notes={"chronus.io/estimate": "2m"})
        first = wait(
            lambda: next((n for n in ("r1", "r2") if s.running_nodes(n)), None), 60, "a job to run"
        )
        s.cp.stop_apiserver()
        with pytest.raises(httpx.HTTPError):
            s.cp.api("GET", "/api/v1/nodes")
        wait(lambda: refused(watches), 30, "the copy to refuse reads while the API server is away")
        s.cp.start_apiserver()
        s.submit("plain", gpus=2, run_seconds=1, queue=plain_q)
        s.finish(first, 1)
        (then,) = {"r1", "r2"} - {first}
        wait(lambda: s.running_nodes(then), 120, f"{then} started after the restart")
        s.finish(then, 1)
        for name in ("r1", "r2", "plain"):
            wait(lambda n=name: s.succeeded(n), 120, f"{name} to complete")
        wait(lambda: follows(watches, s.cp, s.ns), 30, "the copy to follow after the restart")
        assert serve.proc.poll() is None
        assert serve.events("backend_error"), "the outage went unnoticed"
        ids = [s.chronus_id(n) for n in ("r1", "r2")]
        wait(
            lambda: all(serve.jobs()[i]["state"] == "finished" for i in ids),
            30,
            "chronus to see both finish",
        )


def test_manifests_apply_on_the_api_server(kube):
    """The deployment manifests are valid for this API server and Kueue (server-side dry run:
    the API server, Kueue's CRD schemas and webhooks check them, nothing is stored). On Kueue
    0.14 with their Kueue objects' ``apiVersion`` changed to ``v1beta1``, as the README says:
    the fields they set are the same in both versions."""
    docs = sorted(harness.DEPLOY.glob("*.yaml"))
    assert {d.name for d in docs} >= {"controller.yaml", "admissioncheck.yaml"}
    for ns in ("chronus-system", "team-a"):  # namespaced objects are checked in real ones
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    for doc in docs:
        text = doc.read_text().replace("kueue.x-k8s.io/v1beta2", kube.kueue_api)
        out = kube.kubectl("apply", "--server-side", "--dry-run=server", "-f", "-", input=text)
        assert "server dry run" in out, out
    wl = kube.api("GET", f"{KUEUE}/workloads")
    assert "items" in wl
