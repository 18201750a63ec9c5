"""The pure parts of the kueue backend: reading chronus's annotations off a Job, a Workload's pod
sets and conditions, chronus's records, and the message users read. No cluster needed; the
behaviour against a real API server and Kueue is in test_kueue_*.py."""

from __future__ import annotations

import pytest

pytest.importorskip("lightkube")

from chronus_py.backends.base import JobReport  # noqa: E402
from chronus_py.backends.kueue import pods as gpus  # noqa: E402
from chronus_py.backends.kueue import workloads as wls  # noqa: E402
from chronus_py.backends.kueue.annotations import AnnotationError, job_fields  # noqa: E402
from chronus_py.backends.kueue.backend import message, resize_note  # noqa: E402
from chronus_py.jobs.model import DeadlineOption  # noqa: E402


def fields(notes: dict[str, str], gpus: int = 2, submit: float = 1000.0):
    return job_fields(notes, job_id="team-a.job-x-1", gpus=gpus, submit=submit, tenant="team-a")


def test_annotations_read_with_the_slurm_marker_grammar():
    got = fields(
        {
            "chronus.io/estimate": "1h30m",
            "chronus.io/deadline": "+2h:1, +4h:0.5",
            "chronus.io/iterations": "400",
            "chronus.io/model": "resnet50",
            "other.io/x": "ignored",
        }
    )
    assert got == {
        "id": "team-a.job-x-1",
        "gpus": 2,
        "tenant": "team-a",
        "submit": 1000.0,
        "estimate_seconds": 5400.0,
        "deadlines": [{"at": 8200.0, "value": 1.0}, {"at": 15400.0, "value": 0.5}],
        "iterations": 400,
        "model": "resnet50",
    }
    absolute = fields({"chronus.io/estimate": "60", "chronus.io/deadline": "1970-01-01T01:00:00Z"})
    assert absolute["deadlines"] == [{"at": 3600.0, "value": 1.0}]


@pytest.mark.parametrize(
    "notes, named",
    [
        ({"chronus.io/estimate": "soon"}, "chronus.io/estimate:"),
        ({"chronus.io/estimate": "1h", "chronus.io/deadline": "+2h,+1h"}, "chronus.io/deadline:"),
        ({"chronus.io/estimate": "1h", "chronus.io/deadline": "tomorrow"}, "chronus.io/deadline:"),
        ({"chronus.io/estimate": "1h", "chronus.io/iterations": "-3"}, "chronus.io/iterations:"),
        ({"chronus.io/estimate": "1h", "chronus.io/deadlin": "+1h"}, "chronus.io/deadlin:"),
        ({"chronus.io/model": "x"}, "chronus.io/estimate: required"),
        ({"chronus.io/iterations": "\u00b2"}, "chronus.io/iterations: expected an integer"),
        (
            {"chronus.io/iterations": "1" + "0" * 14 + "1"},
            "chronus.io/iterations: expected an integer",
        ),
        ({"chronus.io/estimate": "9" * 400}, "chronus.io/estimate: '9999"),
        (
            {"chronus.io/estimate": "1h", "chronus.io/deadline": "+1h:" + "9" * 400},
            "chronus.io/deadline: the value",
        ),
        (
            {"chronus.io/estimate": "1h", "chronus.io/deadline": "+2h:-0.4"},
            "chronus.io/deadline: the value",
        ),
        (
            {"chronus.io/estimate": "1h", "chronus.io/deadline": "1970-01-01T00:10:00Z"},
            "chronus.io/deadline: '1970-01-01T00:10:00Z' is before",
        ),
        (
            {"chronus.io/estimate": "1h", "chronus.io/deadline": "x" * 2000},
            "chronus.io/deadline: 2000 characters",
        ),
    ],
)
def test_a_bad_annotation_is_one_line_naming_it(notes, named):
    with pytest.raises(AnnotationError) as err:
        fields(notes)
    assert str(err.value).startswith(named), str(err.value)
    assert "\n" not in str(err.value)


def test_whitespace_in_a_deadline_is_ignored_as_in_an_estimate():
    """A YAML block scalar (``chronus.io/deadline: |``) ends the value with a newline; the
    estimate was stripped, the deadline refused ('got '6h\\n'')."""
    for text in ("+6h\n", "\t+6h :1,\n +8h:0.5\n"):
        got = fields({"chronus.io/estimate": "1h\n", "chronus.io/deadline": text})
        assert got["deadlines"][0] == {"at": 1000.0 + 6 * 3600, "value": 1.0}, text


def test_a_deadline_with_a_time_zone_is_that_instant():
    """An ISO time's own colons are not the ``:VALUE`` separator: ``+05:30`` was read as value
    30 at ``+05``, ``+01:00`` and a zoneless ``T08:00:00`` as value 0 (refused)."""
    for text, at in (
        ("1970-01-01T05:30:00+05:30", 0.0),
        ("1970-01-01T06:00:00+05:30:0.5", 1800.0),
        ("1970-01-01T02:00:00+01:00", 3600.0),
        ("1970-01-01T01:00:30", 3630.0),
    ):
        got = fields({"chronus.io/estimate": "1m", "chronus.io/deadline": text}, submit=-1.0)
        value = 0.5 if text.endswith(":0.5") else 1.0
        assert got["deadlines"] == [{"at": at, "value": value}], (text, got["deadlines"])


def test_a_pod_asks_what_kubernetes_counts_init_containers_and_sidecars_too():
    def c(n: str, **more) -> dict:
        return {"resources": {"limits": {"nvidia.com/gpu": n}}, **more}

    for spec, asks in (
        ({"containers": [c("1")], "initContainers": [c("4")]}, 4),
        ({"containers": [c("1")], "initContainers": [c("1", restartPolicy="Always"), c("2")]}, 3),
        ({"containers": [c("2"), c("1")], "initContainers": [c("1")]}, 3),
        ({"containers": [c("1k")]}, 1000),
        ({"containers": [c("2e3")]}, 2000),
    ):
        assert wls.pod_gpus({"spec": spec}, "nvidia.com/gpu") == asks, spec


def test_a_job_without_gpus_is_refused_by_its_resources():
    with pytest.raises(AnnotationError, match="^resources: .*nvidia.com/gpu"):
        fields({"chronus.io/estimate": "1h"}, gpus=0)


def workload(**status) -> dict:
    return {
        "metadata": {
            "namespace": "team-a",
            "name": "job-train-5b7c2",
            "annotations": {"chronus.io/guarantee": '{"at":9000,"value":1}', "user/x": "y"},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train"}],
        },
        "spec": {
            "podSets": [
                {
                    "name": "main",
                    "count": 3,
                    "template": {
                        "spec": {
                            "containers": [
                                {"resources": {"limits": {"nvidia.com/gpu": "2"}}},
                                {"resources": {"requests": {"cpu": "500m"}}},
                            ]
                        }
                    },
                }
            ]
        },
        "status": status,
    }


def test_a_workload_is_read_for_gpus_owner_checks_and_reservation():
    wl = workload(
        conditions=[{"type": "QuotaReserved", "status": "True"}],
        admissionChecks=[{"name": "chronus", "state": "Pending"}],
        admission={"podSetAssignments": [{"name": "main", "count": 2}]},
    )
    assert wls.gpus(wl, "nvidia.com/gpu") == 4  # the count Kueue reserved, not the spec's 3
    assert wls.owner_job(wl) == "train"
    assert wls.reserved(wl)
    assert wls.check_entry(wl, frozenset({"chronus"}))["state"] == "Pending"
    assert wls.check_entry(wl, frozenset({"other"})) is None
    assert wls.records(wl) == {"chronus.io/guarantee": '{"at":9000,"value":1}'}
    assert wls.guarantee(wl, wls.accepted(wl)) is None  # no job record: no option it could be
    for options, promise in (
        ([{"at": 5000.0, "value": 1.0}, {"at": 9000.0, "value": 1.0}], DeadlineOption(9000.0, 1.0)),
        ([{"at": 9000.0, "value": 0.5}], None),  # another option's value
        ([], None),  # a best-effort job's
    ):
        job = wls.encode({"id": "team-a.job-train-5b7c2", "gpus": 4, "deadlines": options})
        wl["metadata"]["annotations"][wls.JOB] = job
        assert wls.guarantee(wl, wls.accepted(wl)) == promise, options
    evicted = workload(
        conditions=[
            {"type": "QuotaReserved", "status": "True"},
            {"type": "Evicted", "status": "True"},
        ]
    )
    assert not wls.reserved(evicted)


def test_the_check_keeps_its_transition_time_until_its_state_changes():
    wl = workload(
        admissionChecks=[
            {"name": "chronus", "state": "Pending", "lastTransitionTime": "2026-01-01T00:00:00Z"}
        ]
    )
    same = wls.check_status(wl, "chronus", "Pending", "m", now_wall=2e9)
    assert same["admissionChecks"][0]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    moved = wls.check_status(wl, "chronus", "Ready", "m", now_wall=0.0, pod_set_updates=[{}])
    assert moved["admissionChecks"][0]["lastTransitionTime"] == "1970-01-01T00:00:00Z"
    assert moved["admissionChecks"][0]["podSetUpdates"] == [{}]


@pytest.mark.parametrize(
    "text, count",
    [("2", 2), (None, 0), ("", 0), ("-1", 0), ("two", 0), ("\u00b2", 0), ("9" * 5000, 0)],
)
def test_a_failed_starts_record_that_is_no_count_is_none(text, count):
    """Edited by hand, the record counts no failed start (a forged one can only change when
    the Workload's own Job is refused)."""
    records = {} if text is None else {wls.FAILED_STARTS: text}
    assert wls.failed_starts(records) == count


def test_ids_are_namespace_dot_name_and_fit_chronus_ids():
    assert wls.job_id("team-a", "job-train-5b7c2") == "team-a.job-train-5b7c2"
    long = wls.job_id("ns", "x" * 200)
    assert len(long) <= 128 and long != wls.job_id("ns", "x" * 201)


def test_messages_say_the_decision_in_words():
    promised = JobReport(False, DeadlineOption(7200.0, 1.0), 3600.0, "")
    assert message(promised) == (
        "guaranteed to finish by 1970-01-01T02:00:00Z; planned start 1970-01-01T01:00:00Z"
    )
    refused = JobReport(False, None, None, "no deadline option fits the lease plan")
    assert message(refused) == (
        "not guaranteed: no deadline option fits the lease plan; waits for free GPUs"
    )


def test_a_count_kueue_reserved_again_rescales_the_job_and_is_said_first():
    """Fewer GPUs stretch the estimate and the work behind it alike (the fraction done is
    kept); more GPUs are assumed to speed nothing up. The note survives the records a later
    run rewrites, and comes first in the check's message."""
    accepted = {"id": "ns.job-x", "gpus": 4, "tenant": "ns", "estimate_seconds": 600.0}
    shrunk, done = wls.resize(accepted, 150.0, 4, 3)
    assert shrunk == {**accepted, "gpus": 3, "estimate_seconds": 800.0}
    assert done == pytest.approx(200.0)
    grown, done = wls.resize(accepted, 150.0, 4, 6)
    assert grown == {**accepted, "gpus": 6} and done == 150.0
    assert wls.resize({"id": "ns.job-y", "gpus": 2, "iterations": 9}, 0.0, 2, 1)[0] == {
        "id": "ns.job-y",
        "gpus": 1,
        "iterations": 9,
    }

    wl = {"metadata": {"annotations": {wls.WORK_DONE: wls.encode({"seconds": 200, "runs": 1})}}}
    assert wls.resized(wl) is None and resize_note(wl) == ""
    wl["metadata"]["annotations"][wls.WORK_DONE] = wls.encode(
        {"seconds": 200, "runs": 1, "resized": [4, 3]}
    )
    assert wls.resized(wl) == (4, 3)
    assert wls.done_record(wl, 260.0, 2) == {"seconds": 260.0, "runs": 2, "resized": [4, 3]}
    assert "; " not in resize_note(wl)  # a started Workload's message is split at the first
    report = JobReport(False, DeadlineOption(7200.0, 1.0), None, "")
    text = resize_note(wl) + message(report)
    assert text == (
        "Kueue reserved it again at 3 GPUs (was 4), planned at that size: guaranteed to finish "
        "by 1970-01-01T02:00:00Z"
    )


def pod(name: str, node: str, gpus: int, job: str | None = None, init: int = 0) -> dict:
    refs = (
        []
        if job is None
        else [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": job, "controller": True}
        ]
    )
    ask = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    spec = {"nodeName": node, "containers": [{"name": "c", "resources": ask}]}
    if init:
        spec["initContainers"] = [
            {"name": "i", "resources": {"requests": {"nvidia.com/gpu": str(init)}}}
        ]
    return {
        "metadata": {
            "namespace": "ns",
            "name": name,
            "resourceVersion": "7",
            "ownerReferences": refs,
        },
        "spec": spec,
    }


def test_gpu_pods_not_of_chronus_workloads_make_their_node_unhealthy():
    """A pod asking GPUs (an init container's count too) is kept in a few fields; one asking
    none is not kept. A node's reason names the pods whose Job is not one of chronus's
    Workloads', at most three, and counts the rest; chronus's own pods make one only where a
    running Workload's live pods hold more than chronus placed there."""
    assert gpus.gpu_pod(pod("cpu", "n1", 0), "nvidia.com/gpu") is None
    kept = gpus.gpu_pod(pod("init", "n1", 0, init=2), "nvidia.com/gpu")
    assert kept == {
        "metadata": {"namespace": "ns", "name": "init", "resourceVersion": "7"},
        "node": "n1",
        "gpus": 2,
        "ending": False,
        "job": None,
        "running": None,
    }
    ending = pod("left", "n4", 2, job="uid-preempted")
    ending["metadata"]["deletionTimestamp"] = "2026-11-28T00:00:00Z"
    held = [
        gpus.gpu_pod(p, "nvidia.com/gpu")
        for p in (
            pod("mine", "n1", 4, job="uid-ours"),
            pod("bare", "n2", 1),
            *(pod(f"other-{i}", "n3", 1, job="uid-theirs") for i in range(5)),
            *(pod(f"gang-{i}", "n5" if i < 3 else "n6", 1, job="uid-gang") for i in range(4)),
            pod("waiting", "n7", 1, job="uid-waits"),
            ending,
        )
    ]
    ours = {
        "uid-ours": ("ns.ours", {"n1": 4}),
        "uid-gang": ("ns.gang", {"n5": 2, "n6": 2}),
        "uid-waits": ("ns.waits", None),  # not running: its pods are leaving
        "uid-preempted": ("ns.preempted", {"n4": 1}),
    }
    assert gpus.held(held, ours) == {
        "n2": "GPUs held by pod ns/bare, not chronus's",
        "n3": "GPUs held by pods ns/other-0, ns/other-1, ns/other-2 and 2 more, not chronus's",
        "n5": "ns.gang's pods hold 3 GPUs, chronus placed 2",
    }
