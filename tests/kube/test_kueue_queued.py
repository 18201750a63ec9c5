"""What Kueue decides before chronus sees a Workload (chronus sees one only once Kueue has
reserved quota for it): the count it reserved, and how long it queued it.

An elastic range is Kueue's partial admission: a Job asks for its largest size (``parallelism``)
and allows its smallest (``kueue.x-k8s.io/job-min-parallelism``); Kueue reserves what its quota
allows, and chronus plans and places the Job at exactly the count Kueue reserved (an admission
check cannot change a count: README, "Elastic ranges"), also when Kueue reserves a count other
than before after chronus preempted it. A Job whose last deadline passed while Kueue queued it
runs best-effort instead of being refused.
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
    runs best-effort. An elastic Job of 4 one-GPU pods (min 1) is reserved and started at 4;
    an urgent 2-GPU Job makes chronus preempt it, and a 1-GPU filler queued meanwhile is
    ahead of it in Kueue's queue (Kueue orders a Workload an admission check evicted by its
    eviction), so Kueue reserves it again at fewer pods. Chronus re-plans it at that count
    (its work stretched, its promise kept: it still fits), says so in the check's message and
    starts it at that count once the GPUs are free."""
    s = make_setup(kube, kube_ns, kube_queues, chronus_kubeconfig, quota=6)
    (node,) = s.add_nodes("a", gpus=4)
    with s.serve(tmp_path) as serve:
        overdue = {"chronus.io/estimate": "1m", "chronus.io/deadline": "2020-01-01T00:00:00Z"}
        s.submit("overdue", gpus=1, run_seconds=1, notes=overdue)
        elastic = job(
            "elastic",
            s.queue,
            namespace=s.ns,
            gpus=1,
            pods=4,
            run_seconds=4,
            annotations={
                "chronus.io/estimate": "4m",
                "chronus.io/deadline": "+120m",
                "kueue.x-k8s.io/job-min-parallelism": "1",
            },
        )
        s.cp.apply(elastic)
        wait(lambda: s.succeeded("overdue"), 60, "the overdue Job to run anyway")
        late = serve.jobs()[s.chronus_id("overdue")]
        assert late["admission"]["decision"] == "not_guaranteed", late
        assert [e["job"] for e in serve.events("kueue_deadline_passed")] == [late["id"]]

        wait(lambda: len(s.running_nodes("elastic")) == 4, 60, "elastic running at 4 pods")
        elastic_id = s.chronus_id("elastic")
        promised = wait(lambda: s.promise("elastic"), 30, "elastic's promise recorded")
        s.submit(
            "urgent",
            gpus=2,
            run_seconds=3,
            notes={"chronus.io/estimate": "3m", "chronus.io/deadline": "+12m"},
        )
        s.submit("filler", gpus=1, run_seconds=1, notes={"chronus.io/estimate": "1m"})
        wait(lambda: s.succeeded("elastic"), 120, "the elastic Job to complete at its new count")
        assert s.succeeded("urgent") and s.succeeded("filler")
        assert any(e["job"] == elastic_id for e in serve.events("preempt"))
        ((was, count),) = [(e["from"], e["to"]) for e in serve.events("kueue_resized")]
        assert was == 4 and 1 <= count < 4, (was, count)
        assert [(e["was"], e["gpus"]) for e in serve.events("resized")] == [(4, count)]
        view = serve.jobs()[elastic_id]
        assert view["gpus"] == count, view
        assert s.promise("elastic") == promised  # re-planned at the new count: it still fits
        assert not [e for e in serve.events("demoted") if e["job"] == elastic_id]
        starts = [e["placement"] for e in serve.events("start") if e["job"] == elastic_id]
        assert [{n: len(g) for n, g in p.items()} for p in starts] == [{node: 4}, {node: count}]
        message = s.entry("elastic")["message"]
        assert f"Kueue reserved it again at {count} GPUs (was 4)" in message, message
        assert "guaranteed to finish by" in message, message
        assert s.job_obj("elastic")["spec"]["parallelism"] == count
        assert {p["spec"]["nodeName"] for p in s.pods("elastic")} == {node}
