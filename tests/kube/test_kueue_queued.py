"""What Kueue decides before chronus sees a Workload (chronus sees one only once Kueue has
reserved quota for it): the count it reserved, and how long it queued it.

An elastic range is Kueue's partial admission: a Job asks for its largest size (``parallelism``)
and allows its smallest (``kueue.x-k8s.io/job-min-parallelism``); Kueue reserves what its quota
allows, and chronus plans and places the Job at exactly the count Kueue reserved (an admission
check cannot change a count: README, "Elastic ranges"), also when Kueue reserves another count
after chronus preempted it (here more: the quota that held it back at first is free by
then). A Job whose last deadline passed while Kueue queued it runs best-effort instead of being
refused.
"""

from __future__ import annotations

import pytest

pytest.importorskip("lightkube")

from kueue_helpers import make_setup, wait  # noqa: E402

from chronus_py.backends.kueue.lab import job  # noqa: E402


def test_partial_admission_a_count_changed_after_preemption_and_a_deadline_passed(
    kube, kube_ns, kube_queues, chronus_kubeconfig, tmp_path
):
    """One 4-GPU node, 6 GPUs of quota. A Job whose last deadline passed while Kueue queued it
    runs best-effort. A holder keeps 4 GPUs of quota, so Kueue reserves 2 of an elastic Job's
    4 one-GPU pods (min 1), and chronus starts it at 2 once the holder is done. An urgent Job
    of 3 pods makes chronus preempt it, and Kueue reserves it again at the 3 pods its quota
    then allows. Chronus re-plans it at 3 (no speed-up assumed, its promise kept: it still
    fits), says so in the check's message and starts it at 3 once the urgent Job is done (its
    run there is not awaited)."""
    s = make_setup(kube, kube_ns, kube_queues, chronus_kubeconfig, quota=6)
    (node,) = s.add_nodes("a", gpus=4)
    with s.serve(tmp_path) as serve:
        # one chronus second after its creation: passed (or too close to start in) by the time
        # Kueue reserved and chronus looked (a deadline before the creation is refused since
        # it is a mistake: test_kueue_sloppy.py; a wait in Kueue's queue is tested there too)
        overdue = {"chronus.io/estimate": "1m", "chronus.io/deadline": "+1s"}
        s.submit("overdue", gpus=1, run_seconds=1, notes=overdue)
        s.submit("holder", gpus=4, run_seconds=3, notes={"chronus.io/estimate": "3m"})
        wait(lambda: s.succeeded("overdue"), 60, "the overdue Job to run anyway")
        late = serve.jobs()[s.chronus_id("overdue")]
        assert late["admission"]["decision"] == "not_guaranteed", late
        assert [e["job"] for e in serve.events("kueue_deadline_passed")] == [late["id"]]
        wait(lambda: finished(s.workload("overdue")), 30, "Kueue to release its quota")

        elastic = job(
            "elastic",
            s.queue,
            namespace=s.ns,
            gpus=1,
            pods=4,
            run_seconds=30,  # preempted long before: only its start at the new count is awaited
            annotations={
                "chronus.io/estimate": "30m",
                "chronus.io/deadline": "+180m",
                "kueue.x-k8s.io/job-min-parallelism": "1",
            },
        )
        s.cp.apply(elastic)
        wait(lambda: len(s.running_nodes("elastic")) == 2, 60, "elastic running at 2 pods")
        elastic_id = s.chronus_id("elastic")
        promised = wait(lambda: s.promise("elastic"), 30, "elastic's promise recorded")
        s.submit(
            "urgent",
            gpus=1,
            pods=3,
            run_seconds=600,  # until the test ends it (``finish``)
            notes={"chronus.io/estimate": "3m", "chronus.io/deadline": "+12m"},
        )
        ((was, count),) = wait(
            lambda: [(e["from"], e["to"]) for e in serve.events("kueue_resized")],
            90,
            "Kueue to reserve the preempted elastic Job again, at another count",
        )
        assert (was, count) == (2, 3)
        wait(lambda: len(s.running_nodes("urgent")) == 3, 60, "urgent running")
        s.finish("urgent", 3)
        wait(lambda: len(s.running_nodes("elastic")) == 3, 60, "elastic at 3 pods")
        assert s.succeeded("urgent")  # the GPUs it needed came from the preemption
        assert any(e["job"] == elastic_id for e in serve.events("preempt"))
        assert [(e["was"], e["gpus"]) for e in serve.events("resized")] == [(2, 3)]
        view = serve.jobs()[elastic_id]
        assert view["gpus"] == 3, view
        assert s.promise("elastic") == promised  # re-planned at the new count: it still fits
        assert not [e for e in serve.events("demoted") if e["job"] == elastic_id]
        starts = [e["placement"] for e in serve.events("start") if e["job"] == elastic_id]
        assert [{n: len(g) for n, g in p.items()} for p in starts] == [{node: 2}, {node: 3}]
        note = "Kueue reserved it again at 3 GPUs (was 2), planned at that size: "
        message = wait(  # the round after the start rewrites the message
            lambda: (m := s.entry("elastic").get("message", "")) and note in m and m,
            30,
            "the check's message to say the new count",
        )
        assert note + "guaranteed to finish by" in message, message
        assert s.job_obj("elastic")["spec"]["parallelism"] == 3
        assert {p["spec"]["nodeName"] for p in s.pods("elastic")} == {node}


def finished(wl: dict | None) -> bool:
    conditions = ((wl or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Finished" and c["status"] == "True" for c in conditions)
