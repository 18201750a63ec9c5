"""Chronus's records on Workloads that this chronus did not write: records of an older chronus
(before ``Job.pod_gpus``), read after an upgrade, and records someone else put on a Workload.
On the session's control plane, chronus as a child process (``kueue_helpers.Setup``)."""

from __future__ import annotations

import json
import sqlite3

import pytest

pytest.importorskip("lightkube")

from kueue_helpers import KUEUE, wait  # noqa: E402

from chronus_py.backends.kueue import workloads as wls  # noqa: E402

EST, DL = "chronus.io/estimate", "chronus.io/deadline"


def write_records(s, job_name: str, records: dict[str, str], manager: str) -> None:
    """Make ``records`` the annotations ``manager`` applies on the Job's Workload (a server-side
    apply, as chronus writes its records)."""
    wl = s.workload(job_name)
    s.cp.api(
        "PATCH",
        f"{KUEUE}/namespaces/{s.ns}/workloads/{wl['metadata']['name']}",
        {
            "apiVersion": s.cp.kueue_api,
            "kind": "Workload",
            "metadata": {"name": wl["metadata"]["name"], "annotations": records},
        },
        content_type="application/apply-patch+yaml",
        params={"fieldManager": manager, "force": "true"},
    )


def as_before_pod_gpus(s, job_name: str) -> None:
    """Chronus's records on the Job's Workload as a chronus from before ``Job.pod_gpus`` wrote
    them: the job record without it, by chronus's field manager."""
    mine = wls.records(s.workload(job_name))
    fields = json.loads(mine[wls.JOB])
    del fields["pod_gpus"]
    write_records(s, job_name, {**mine, wls.JOB: wls.encode(fields)}, "chronus")


def test_records_from_before_pod_gpus_are_read_as_their_workload_s_pods(setup, tmp_path):
    """After an upgrade, a running and a waiting Workload accepted by a chronus that did not
    record ``pod_gpus`` (its job record and its database row without it): the running one goes
    on, and the waiting one, 2 pods of 3 GPUs on 4-GPU nodes, is planned as those pods (3 + 3)
    and runs, its record completed with ``pod_gpus``. Read as a 6-GPU gang of no fixed pods it
    was planned 4 + 2, which its pods cannot fill, and every start of it failed."""
    s = setup
    a, b = s.add_nodes("a", "b")
    first = s.serve(tmp_path, "first").start()
    try:
        s.submit("holder", gpus=4, run_seconds=600, notes={EST: "30m"})  # until ``finish``
        wait(lambda: s.running_nodes("holder"), 60, "holder running")
        s.submit("wide", gpus=3, pods=2, run_seconds=3, notes={EST: "60m"})  # behind holder
        wait(
            lambda: "waits for free GPUs" in s.entry("wide").get("message", ""),
            60,
            "wide accepted and told it waits",
        )
    finally:
        first.stop()
    ids = {name: s.chronus_id(name) for name in ("holder", "wide")}
    for name in ids:
        as_before_pod_gpus(s, name)
    second = s.serve(tmp_path, "second", origin=first.origin)
    old, new = sqlite3.connect(first.db), sqlite3.connect(second.db)
    with old:
        old.execute("UPDATE job SET spec = json_remove(spec, '$.pod_gpus')")
    old.backup(new)  # the upgraded chronus keeps the database (its rows as the old one wrote)
    specs = [json.loads(row[0]) for row in new.execute("SELECT spec FROM job")]
    old.close()
    new.close()
    assert len(specs) == 2 and not any("pod_gpus" in spec for spec in specs), specs

    with second:
        # the holder taken in running, and a round decided with it so, its commands issued
        # (they are before the next round's): a start of it again would be that round's
        wait(
            lambda: (
                second.jobs().get(ids["holder"], {}).get("state") == "running"
                and second.client.health()["rounds"] >= 2
                and s.running_nodes("holder")
            ),
            30,
            "the upgraded chronus to go on with the running holder",
        )
        s.finish("holder", 1)
        wait(lambda: s.succeeded("wide"), 90, "wide to complete")
        assert sorted(p["spec"]["nodeName"] for p in s.pods("wide")) == [a, b]
        wait(
            lambda: (
                {n: wls.accepted(s.workload(n)).get("pod_gpus") for n in ids}
                == {"holder": 4, "wide": 3}
            ),
            30,
            "both records completed with pod_gpus",
        )
        starts = [e["job"] for e in second.events("start")]
        assert starts == [ids["wide"]], starts  # the running holder was not started again
        assert not second.events("backend_error"), second.events("backend_error")


def test_records_chronus_did_not_write_are_not_taken_for_its_own(setup, tmp_path):
    """Records someone else put on a Workload (any account that may patch Workloads can): a
    promise and work done on a Workload before chronus accepted it are dropped at its
    acceptance (the promise is chronus's own decision, no work is credited), and a promise
    on an accepted Job that is none of its deadline options (here a best-effort Job's) is not
    taken for one by a controller rebuilding from the cluster, and is taken off. Before, the
    work done stayed on the record, to be credited at the next rebuild, and the promise was
    adopted there."""
    s = setup
    s.add_nodes("a", "b")
    first = s.serve(tmp_path, "first").start()  # it makes chronus's check Active for Kueue
    try:
        s.submit("plain", run_seconds=600, notes={EST: "10h"})
        wait(lambda: s.running_nodes("plain"), 90, "plain to run")
    finally:
        first.stop()
    s.submit("early", run_seconds=3, notes={EST: "3m", DL: "+6h"})
    wait(lambda: wls.reserved(s.workload("early") or {}), 60, "Kueue to reserve for early")
    forged = {
        wls.GUARANTEE: wls.encode({"at": 1.0, "value": 1.0}),
        wls.WORK_DONE: wls.encode({"seconds": 100000.0, "runs": 3}),
    }
    write_records(s, "early", forged, "intruder")
    at = first.origin + 3 * 3600.0
    write_records(s, "plain", {wls.GUARANTEE: wls.encode({"at": at, "value": 1.0})}, "intruder")
    plain = s.chronus_id("plain")
    with s.serve(tmp_path, "second", origin=first.origin) as second:
        wait(lambda: s.succeeded("early"), 90, "early to complete")
        records = wait(
            lambda: (
                wls.GUARANTEE in (r := wls.records(s.workload("early")))
                and wls.WORK_DONE not in r
                and r
            ),
            30,
            "early's promise recorded by chronus, the work done taken off",
        )
        (option,) = json.loads(records[wls.JOB])["deadlines"]
        assert json.loads(records[wls.GUARANTEE]) == option, records
        wait(
            lambda: wls.GUARANTEE not in wls.records(s.workload("plain")),
            30,
            "the forged promise taken off plain",
        )
        assert second.jobs()[plain]["guaranteed"] is None, second.jobs()[plain]
        assert s.running_nodes("plain"), "plain was stopped"
