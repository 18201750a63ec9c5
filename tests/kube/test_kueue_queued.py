"""What Kueue decides before chronus sees a Workload (chronus sees one only once Kueue has
reserved quota for it): the count it reserved, and how long it queued it.

An elastic range is Kueue's partial admission: a Job asks for its largest size (``parallelism``)
and allows its smallest (``kueue.x-k8s.io/job-min-parallelism``); Kueue reserves what its quota
allows, and chronus plans and places the Job at exactly the count Kueue reserved (an admission
check cannot change a count: README, "Elastic ranges"). A Job whose last deadline passed while
Kueue queued it runs best-effort instead of being refused.
"""

from __future__ import annotations

import pytest

pytest.importorskip("lightkube")

from kueue_helpers import make_setup, wait  # noqa: E402

from chronus_py.backends.kueue.lab import job  # noqa: E402


def test_partial_admission_and_a_deadline_passed_in_kueues_queue(
    kube, kube_ns, kube_queues, chronus_kubeconfig, tmp_path
):
    s = make_setup(kube, kube_ns, kube_queues, chronus_kubeconfig, quota=4)
    (node,) = s.add_nodes("a", gpus=8)
    with s.serve(tmp_path) as serve:
        s.submit("holder", gpus=2, run_seconds=8, notes={"chronus.io/estimate": "8m"})
        wait(lambda: s.running_nodes("holder"), 60, "the holder's pod running")
        elastic = job(
            "elastic",
            s.queue,
            namespace=s.ns,
            gpus=1,
            pods=4,
            run_seconds=2,
            annotations={
                "chronus.io/estimate": "2m",
                "kueue.x-k8s.io/job-min-parallelism": "1",
            },
        )
        s.cp.apply(elastic)
        overdue = {"chronus.io/estimate": "1m", "chronus.io/deadline": "2020-01-01T00:00:00Z"}
        s.submit("overdue", gpus=1, run_seconds=1, notes=overdue)
        wait(lambda: s.succeeded("elastic"), 60, "the elastic Job to complete")
        wait(lambda: s.succeeded("overdue"), 60, "the overdue Job to run anyway")
        late = serve.jobs()[s.chronus_id("overdue")]
        assert late["admission"]["decision"] == "not_guaranteed", late
        assert [e["job"] for e in serve.events("kueue_deadline_passed")] == [late["id"]]
        view = serve.jobs()[s.chronus_id("elastic")]
        assert view["gpus"] == 2, view  # the 2 GPUs of quota the holder left
        ((placed, gpus),) = next(
            e["placement"] for e in serve.events("start") if e["job"] == view["id"]
        ).items()
        assert (placed, len(gpus)) == (node, 2)
        pods = s.pods("elastic")
        assert {p["spec"]["nodeName"] for p in pods} == {node}
        assert s.job_obj("elastic")["spec"]["parallelism"] == 2
