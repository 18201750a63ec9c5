"""An elastic range on the kueue backend is Kueue's partial admission: a Job asks for its
largest size (``parallelism``) and allows its smallest (``kueue.x-k8s.io/job-min-parallelism``);
Kueue reserves what its quota allows, and chronus plans and places the Job at exactly the count
Kueue reserved (an admission check cannot change a count: README, "Elastic ranges")."""

from __future__ import annotations

import pytest

pytest.importorskip("lightkube")

from kueue_helpers import make_setup, wait  # noqa: E402

from chronus_py.backends.kueue import harness  # noqa: E402
from chronus_py.backends.kueue.lab import job  # noqa: E402


@pytest.fixture(scope="module")
def chronus_kubeconfig(control_plane):
    return harness.install_rbac(control_plane)


def test_a_partially_admitted_job_runs_at_the_count_kueue_reserved(
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
        wait(lambda: s.succeeded("elastic"), 60, "the elastic Job to complete")
        view = serve.jobs()[s.chronus_id("elastic")]
        assert view["gpus"] == 2, view  # the 2 GPUs of quota the holder left
        ((placed, gpus),) = next(
            e["placement"] for e in serve.events("start") if e["job"] == view["id"]
        ).items()
        assert (placed, len(gpus)) == (node, 2)
        pods = s.pods("elastic")
        assert {p["spec"]["nodeName"] for p in pods} == {node}
        assert s.job_obj("elastic")["spec"]["parallelism"] == 2
