"""What a Job's owner does to it while chronus runs it, end to end (``chronus serve --backend
kueue``, one wall second a chronus minute): whatever the owner does, chronus reports it as the
owner meant it and the other Jobs go on."""

from __future__ import annotations

import pytest

pytest.importorskip("lightkube")

from kueue_helpers import wait  # noqa: E402

from chronus_py.backends.kueue.lab import job  # noqa: E402

EST = "chronus.io/estimate"


def test_a_running_job_whose_namespace_is_deleted_is_cancelled(setup, tmp_path):
    """Its owner deleted it, with its namespace: cancelled, as a deleted Job is. It was
    reported failed (the namespace's deletion kills its pods before its Workload goes)."""
    s = setup
    s.add_nodes("a")
    gone = f"{s.ns}-gone"
    s.cp.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": gone}},
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": s.queue, "namespace": gone},
            "spec": {"clusterQueue": s.queue},
        },
    )
    try:
        with s.serve(tmp_path) as serve:
            s.cp.apply(
                job(
                    "long",
                    s.queue,
                    namespace=gone,
                    gpus=4,
                    run_seconds=60,
                    annotations={EST: "60m"},
                )
            )
            wait(
                lambda: any(e["job"].startswith(gone + ".") for e in serve.events("start")),
                60,
                "long to start",
            )
            (long_id,) = [e["job"] for e in serve.events("start")]
            s.cp.api("DELETE", f"/api/v1/namespaces/{gone}", ok=(200, 202))
            state = wait(
                lambda: (st := serve.jobs()[long_id]["state"]) in ("cancelled", "failed") and st,
                90,
                "chronus to end long",
            )
            assert state == "cancelled", serve.jobs()[long_id]
            s.submit("next", run_seconds=1, notes={EST: "1m"})
            wait(lambda: s.succeeded("next"), 60, "the next Job to run")
    finally:
        s.cp.api("DELETE", f"/api/v1/namespaces/{gone}", ok=(200, 202, 404, 409))
