"""Sloppy users against ``chronus serve --backend kueue``: every Job's annotations malformed in
another way, all submitted at once next to a good Job. Each bad Job must be told, where
``kubectl describe workload`` shows it (chronus's check ``Rejected``, whose message Kueue
copies into the Workload's events), one short line naming the annotation and what is wrong
with its value; the controller must go on deciding for everyone else (no traceback, no round
lost), and an annotation that is right must be read as its author meant it.

Before these fixes: ``chronus.io/iterations: "²"`` (a digit to ``str.isdigit``, not to ``int``)
failed every round with a traceback, so no Job of any queue started again until it was
deleted; values the service then refused (a number too large for a float, an estimate past the
planning horizon, 17 deadline options, a gang wider than the cluster) were told "it cannot run
on chronus's nodes (more GPUs than they have, or its last deadline has passed)"; a 100 KB value
was quoted whole into the message and the refusal record; and a deadline with a time-zone
offset (``...T10:00:00+05:30``) was read as a soft deadline of value 30 at ``+05``."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone

import pytest

pytest.importorskip("lightkube")

from kueue_helpers import KUEUE, make_setup, wait  # noqa: E402

from chronus_py.backends.kueue import workloads as wls  # noqa: E402
from chronus_py.backends.kueue.lab import job  # noqa: E402
from chronus_py.backends.kueue.names import GPU  # noqa: E402

EST, DL, IT = "chronus.io/estimate", "chronus.io/deadline", "chronus.io/iterations"

# Job name -> (its annotations, GPUs per pod, pods, what the check's message must start with)
BAD = {
    "iter-superscript": ({IT: "\u00b2"}, 1, 1, "chronus.io/iterations: expected an integer"),
    "iter-5000-digits": ({IT: "9" * 5000}, 1, 1, "chronus.io/iterations: 5000 characters"),
    "est-overflow": ({EST: "9" * 400}, 1, 1, "chronus.io/estimate: '999999999"),
    "est-horizon": ({EST: "1000d"}, 1, 1, "chronus.io/estimate: '1000d' is more than 366 days"),
    "dl-17-options": (
        {EST: "1m", DL: ",".join(f"+{i}h" for i in range(1, 18))},
        1,
        1,
        "chronus.io/deadline: at most 16 options",
    ),
    "dl-100kb": ({EST: "1m", DL: "+" + "x" * 100_000}, 1, 1, "chronus.io/deadline: 100001 char"),
    "dl-before-creation": (
        {EST: "1m", DL: "2020-01-01T00:00:00Z"},
        1,
        1,
        "chronus.io/deadline: '2020-01-01T00:00:00Z' is before the Job was created",
    ),
    "dl-horizon": (
        {EST: "1m", DL: "+1h:1,+400d:0.5"},
        1,
        1,
        "chronus.io/deadline: '+400d' is more",
    ),
    "wider-than-cluster": (
        {EST: "1m"},
        4,
        3,
        "resources: the Job asks 12 GPUs (3 pods of 4), chronus's 2 nodes have 8",
    ),
}


def job_events(s, name: str) -> list[dict]:
    """chronus's Events on the Job ``name``."""
    items = s.cp.api(
        "GET",
        f"/api/v1/namespaces/{s.ns}/events",
        params={"fieldSelector": f"involvedObject.kind=Job,involvedObject.name={name}"},
    )["items"]
    return [e for e in items if e["reason"] == "ChronusRefused"]


def test_every_bad_annotation_is_one_line_on_its_workload_and_the_rest_runs(
    kube, kube_ns, kube_queues, chronus_kubeconfig, tmp_path
):
    s = make_setup(kube, kube_ns, kube_queues, chronus_kubeconfig, quota=64)
    s.add_nodes("a", "b")
    with s.serve(tmp_path) as serve:
        for name, (notes, gpus, pods, _) in BAD.items():
            s.submit(name, gpus=gpus, pods=pods, notes=notes, run_seconds=2)
        # a deadline given in another time zone, two hours after now in chronus's time
        at = datetime.fromtimestamp(time.time() + 7200, timezone(timedelta(hours=5, minutes=30)))
        at = at.replace(microsecond=0)
        zoned = at.isoformat()
        s.submit("zoned", gpus=1, run_seconds=2, notes={EST: "2m", DL: zoned})
        # a YAML block scalar (`chronus.io/deadline: |`) ends the value with a newline
        s.submit("good", gpus=4, run_seconds=2, notes={EST: "2m", DL: "+60m\n"})
        # an init container that takes 4 GPUs before a trainer of 1: the pod asks 4
        init = job("init4", s.queue, namespace=s.ns, annotations={EST: "2m"}, run_seconds=2)
        pod = init["spec"]["template"]["spec"]
        pod["initContainers"] = [
            {**pod["containers"][0], "name": "fetch", "resources": {"limits": {GPU: "4"}}}
        ]
        s.cp.apply(init)
        # parallelism 0: its pods ask a GPU, but there are none (was: "request no GPU")
        paused = job("paused", s.queue, namespace=s.ns, annotations={EST: "2m"})
        paused["spec"]["parallelism"] = 0
        s.cp.apply(paused)

        for name, (_, _, _, says) in BAD.items():
            entry = wait(
                lambda n=name: (e := s.entry(n)).get("state") == "Rejected" and e,
                60,
                f"{name}'s check Rejected",
            )
            text = entry["message"]
            assert text.startswith("chronus refused it: " + says), (name, text)
            assert "\n" not in text and len(text) < 300, (name, len(text), text[:400])
            why = s.workload(name)["metadata"]["annotations"][wls.REFUSED]
            assert len(why) < 300, (name, len(why))
            # and on the Job, where `kubectl describe job` shows it (Kueue's are on the Workload)
            (event,) = wait(lambda n=name: job_events(s, n), 30, f"an Event on {name}")
            assert (event["type"], event["message"]) == ("Warning", text), event
        says = wait(
            lambda: (e := s.entry("paused")).get("state") == "Rejected" and e["message"],
            60,
            "the Job of no pods refused",
        )
        assert says == "chronus refused it: resources: the Workload has no pods (the Job's " + (
            "parallelism is 0); nothing to run"
        ), says
        for name in ("good", "zoned", "init4"):
            wait(lambda n=name: s.succeeded(n), 90, f"{name} to complete")
        init_id = s.chronus_id("init4")
        assert serve.jobs()[init_id]["gpus"] == 4, serve.jobs()[init_id]
        record = wls.accepted(s.workload("zoned"))
        assert record["deadlines"] == [{"at": at.timestamp(), "value": 1.0}], record
        log = serve.log.read_text(errors="replace")
        assert "Traceback" not in log, log[-3000:]
        assert not serve.events("round_failed", "backend_error"), serve.events("backend_error")
        refused = {e["job"] for e in serve.events("kueue_refuse")}
        assert len(refused) == len(BAD) + 1, refused  # and "paused"
        for e in serve.events("kueue_refuse"):
            assert len(json.dumps(e)) < 500, e
        assert serve.proc.poll() is None


def test_damaged_records_refuse_one_workload_and_stall_none(setup, tmp_path):
    """Chronus's records on Workloads edited by hand while the controller was down (SIGKILL):
    a ``chronus.io/job`` that is no job, a ``work-done`` and a ``guarantee`` whose numbers are
    not numbers (``NaN`` is JSON to Python), a ``placement`` naming GPU 'a'. The restarted
    controller refuses the Workload whose job it cannot read, saying so on it, reads the others'
    damaged records as absent (less work credited, no promise, no run: it errs safe), and runs
    them. Before, ``float('abc')`` failed every round and the unreadable job failed the
    rebuild, so nothing started again."""
    s = setup
    s.add_nodes("a")
    first = s.serve(tmp_path, "first").start()
    names = ("hold", "job-bad", "done-bad", "place-bad")
    try:
        s.submit("hold", run_seconds=600, notes={EST: "8m"})  # until ``finish``
        wait(lambda: s.running_nodes("hold"), 60, "hold to run")
        for name in names[1:]:
            s.submit(name, run_seconds=2, notes={EST: "2m", DL: "+300m"})
        wait(
            lambda: all(wls.accepted(s.workload(n) or {}) for n in names),
            60,
            "every Job accepted (its record written)",
        )
        first.kill9()
    finally:
        first.stop()
    damage = {
        "job-bad": {wls.JOB: json.dumps({"id": s.chronus_id("job-bad"), "gpus": "lots"})},
        "done-bad": {wls.WORK_DONE: '{"seconds":"abc","runs":[1]}', wls.GUARANTEE: '{"at":NaN}'},
        "place-bad": {wls.PLACEMENT: '{"nodes":{"x":["a"]},"since":"soon"}'},
    }
    for name, notes in damage.items():
        wl = s.workload(name)["metadata"]["name"]
        s.cp.api(
            "PATCH",
            f"{KUEUE}/namespaces/{s.ns}/workloads/{wl}",
            {"metadata": {"annotations": notes}},
            content_type="application/merge-patch+json",
        )
    with s.serve(tmp_path, "second", origin=first.origin) as second:
        entry = wait(
            lambda: (e := s.entry("job-bad")).get("state") == "Rejected" and e,
            60,
            "the Workload with the damaged job record refused",
        )
        assert entry["message"].startswith(
            "chronus refused it: chronus.io/job: chronus's record of the job is damaged (gpus: "
        ), entry
        s.finish("hold", 1)
        for name in ("hold", "done-bad", "place-bad"):
            wait(lambda n=name: s.succeeded(n), 90, f"{name} to complete")
        assert not s.succeeded("job-bad")
        log = second.log.read_text(errors="replace")
        assert "Traceback" not in log, log[-3000:]
        assert not second.events("round_failed")


def test_a_deadline_that_passed_in_kueue_s_queue_is_named_on_the_workload(
    kube, kube_ns, kube_queues, chronus_kubeconfig, tmp_path
):
    """A Job whose deadline passed while Kueue held it back for quota runs best-effort (README);
    its check said "best-effort job: no deadline to guarantee", as if its owner had given
    none. It now names the deadline and why (recorded on the Workload, so a restarted
    controller says it too)."""
    s = make_setup(kube, kube_ns, kube_queues, chronus_kubeconfig, quota=4)
    s.add_nodes("a")
    with s.serve(tmp_path) as serve:
        s.submit("hold", run_seconds=600, notes={EST: "10m"})  # until ``finish``
        wait(lambda: s.running_nodes("hold"), 60, "hold to run")
        s.submit("late", run_seconds=2, notes={EST: "2m", DL: "+3m"})
        # late's deadline is 3 minutes after its Workload's creation (in chronus's time): once
        # chronus's clock is 3 minutes past a moment after that, it has passed in Kueue's queue
        s.chronus_id("late")
        created_by = serve.client.health()["now"]
        wait(
            lambda: serve.client.health()["now"] > created_by + 180,
            30,
            "late's deadline to pass while Kueue holds it back",
        )
        s.finish("hold", 1)
        says = wait(
            lambda: (
                "passed before Kueue reserved" in (m := s.entry("late").get("message", "")) and m
            ),
            60,
            "late's message to say its deadline passed",
        )
        (event,) = [e for e in serve.events("kueue_deadline_passed")]
        at = wls.rfc3339(event["at"])
        assert (
            f"not guaranteed: its deadline {at} passed before Kueue reserved quota for it, "
            + ("so it runs best-effort")
            in says
        ), says
        assert "no deadline to guarantee" not in says
        wait(lambda: s.succeeded("late"), 60, "late to complete")


def test_a_gang_runs_as_its_pods_and_what_cannot_run_is_refused(setup, tmp_path):
    """Chronus places a Job as its pods (``Job.pod_gpus``), each whole on one node: 3 pods of 2
    GPUs on two 4-GPU nodes are 4 + 2, 5 pods of 1 are 4 + 1. Before, a Job wider than a node
    was split equally over the fewest nodes (3 + 3, five nodes of 1) and both were refused at
    arrival. A pod wider than every node, or pod sets of different sizes (one pod size per
    job), is refused in one line naming it; the rest runs."""
    s = setup
    s.add_nodes("a", "b")
    with s.serve(tmp_path) as serve:
        s.submit("three-by-two", gpus=2, pods=3, run_seconds=2, notes={EST: "2m"})
        s.submit("five-by-one", gpus=1, pods=5, run_seconds=2, notes={EST: "2m"})
        s.submit("five-wide", gpus=5, notes={EST: "2m"})
        s.cp.apply(two_sizes(s, "two-sizes"))
        for name in ("three-by-two", "five-by-one"):
            wait(lambda n=name: s.succeeded(n), 90, f"{name} to complete")
        ids = {s.chronus_id(n): n for n in ("three-by-two", "five-by-one")}
        placed = {
            ids[e["job"]]: sorted(len(g) for g in e["placement"].values())
            for e in serve.events("start")
        }
        assert placed == {"three-by-two": [2, 4], "five-by-one": [1, 4]}, placed
        for name, says in (
            (
                "five-wide",
                "resources: the Job's pods ask 5 GPUs each (1 of them); chronus's nodes hold "
                "0 such pods (a pod runs on one node)",
            ),
            (
                "two-sizes",
                "resources: chronus runs a Workload whose pods ask the same GPUs; its pod "
                "sets ask launcher: 1, workers: 2",
            ),
        ):
            entry = wait(
                lambda n=name: (e := entry_of(s, n)).get("state") == "Rejected" and e,
                60,
                f"{name} refused",
            )
            assert entry["message"] == "chronus refused it: " + says, entry
        assert not serve.events("backend_error"), serve.events("backend_error")[:3]


def two_sizes(s, name: str) -> dict:
    """A Workload of its own (no Job: as an MPIJob's or a JobSet's) with a launcher pod of 1
    GPU and 2 worker pods of 2."""

    def pods(size: int) -> dict:
        limits = {GPU: str(size)}
        container = {"name": "c", "image": "x", "resources": {"requests": limits, "limits": limits}}
        return {"spec": {"restartPolicy": "Never", "containers": [container]}}

    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": s.ns, "annotations": {EST: "2m"}},
        "spec": {
            "queueName": s.queue,
            "podSets": [
                {"name": "launcher", "count": 1, "template": pods(1)},
                {"name": "workers", "count": 2, "template": pods(2)},
            ],
        },
    }


def entry_of(s, name: str) -> dict:
    """chronus's check entry of the Job ``name``'s Workload, or of the Workload ``name``."""
    wl = s.workload(name) or s.cp.api(
        "GET", f"{KUEUE}/namespaces/{s.ns}/workloads/{name}", ok=(200, 404)
    )
    for e in (wl.get("status") or {}).get("admissionChecks") or []:
        if e["name"] == s.check:
            return e
    return {}
