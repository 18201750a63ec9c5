"""A Kueue run counts from when its pods run, not from chronus's start record
(``pods.began``, ``KueueBackend._run_start``).

Between the record and the pods' containers running come Kueue's admission, the Job's pods,
their binding and, on a real cluster, the image pull (minutes for a 10-20 GB training image):
counted from the record, chronus credited a job with work it had not done. On the session's
control plane kwok starts a Job's pods 10 wall seconds (10 chronus minutes) after they are
bound, and the service moves the run's start to then. The pure rules are checked first."""

from __future__ import annotations

import pytest

pytest.importorskip("lightkube")

from kueue_helpers import wait  # noqa: E402

from chronus_py.backends.kueue import pods  # noqa: E402
from chronus_py.backends.kueue import workloads as wls  # noqa: E402
from chronus_py.backends.kueue.lab import GPU, job  # noqa: E402


def pod(*states: dict, sidecar: dict | None = None, uid: str = "j") -> dict:
    """A Job's GPU pod as the API server has it, one main container per ``states`` entry."""
    names = [f"c{i}" for i in range(len(states))]
    return {
        "metadata": {
            "name": "p",
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "uid": uid, "controller": True}
            ],
        },
        "spec": {
            "nodeName": "a",
            "containers": [{"name": n, "resources": {"limits": {GPU: "1"}}} for n in names],
            "initContainers": [] if sidecar is None else [{"name": "s", "restartPolicy": "Always"}],
        },
        "status": {
            "containerStatuses": [{"name": n, "state": s} for n, s in zip(names, states)],
            "initContainerStatuses": [] if sidecar is None else [{"name": "s", "state": sidecar}],
        },
    }


def at(text: str) -> dict:
    return {"running": {"startedAt": text}}


WAITING = {"waiting": {"reason": "ContainerCreating"}}


def test_a_pod_runs_since_its_last_main_container_started():
    t0, t1 = "2026-11-28T05:00:00Z", "2026-11-28T05:00:07Z"
    assert pods.running_since(pod(at(t0), at(t1))) == wls.unix(t1)
    assert pods.running_since(pod(at(t0), WAITING)) is None  # pulling its image
    assert pods.running_since({**pod(at(t0)), "status": {}}) is None  # no status yet
    # a sidecar started first does not delay the pod's work, nor one still starting hold it
    assert pods.running_since(pod(at(t1), sidecar=at(t0))) == wls.unix(t1)
    assert pods.running_since(pod(at(t1), sidecar=WAITING)) == wls.unix(t1)
    kept = pods.gpu_pod(pod(at(t0)), GPU)
    assert kept is not None and kept["running"] == wls.unix(t0) and kept["job"] == "j"


def test_a_jobs_pods_began_when_the_last_of_them_ran():
    t0, t1 = "2026-11-28T05:00:00Z", "2026-11-28T05:00:07Z"
    kept = [pods.gpu_pod(pod(at(t)), GPU) for t in (t1, t0)]
    assert pods.began(kept) == {"j": (2, wls.unix(t1))}
    waiting = pods.gpu_pod(pod(WAITING), GPU)
    assert pods.began([*kept, waiting]) == {"j": (3, None)}
    ending = {**waiting, "ending": True}  # a terminating pod of the last run is not this run's
    assert pods.began([*kept, ending]) == {"j": (2, wls.unix(t1))}


@pytest.mark.parametrize(
    "given, grace", [(None, 30.0), (0, 0.0), (120, 120.0), ("x", 30.0), (-1, 30.0)]
)
def test_a_workload_s_grace_is_its_pods_longest(given, grace):
    template = {"spec": {} if given is None else {"terminationGracePeriodSeconds": given}}
    wl = {"spec": {"podSets": [{"name": "main", "count": 1, "template": template}]}}
    assert wls.grace(wl) == grace
    second = {"name": "w", "template": {"spec": {"terminationGracePeriodSeconds": 45}}}
    wl["spec"]["podSets"].append(second)
    assert wls.grace(wl) == max(grace, 45.0)
    assert wls.grace({"spec": {}}) == 0.0


def test_a_start_waits_for_gpu_pods_ending_on_its_nodes():
    ending = {**pods.gpu_pod(pod(WAITING, uid="other"), GPU), "ending": True}
    assert pods.ending_nodes([ending, {**ending, "node": "b", "ending": False}]) == {"a"}


def test_a_run_counts_from_when_its_pods_ran_not_from_the_start_record(setup, tmp_path):
    """kwok runs the pods 10 wall seconds after they are bound: the service's run begins then
    (one ``late_start`` moving it at least that far past the start record), not at the
    record, where chronus counted it before."""
    s = setup
    s.add_nodes("a")
    with s.serve(tmp_path) as serve:
        s.cp.apply(
            job(
                "slow",
                s.queue,
                namespace=s.ns,
                gpus=4,
                run_seconds=3.0,
                start_seconds=10.0,
                annotations={"chronus.io/estimate": "30m"},
            )
        )
        job_id = s.chronus_id("slow")
        started = wait(
            lambda: (p := s.pods("slow")) and p[0]["status"].get("phase") == "Running" and p[0],
            90,
            "the pod Running",
        )
        ran = wls.unix(started["status"]["containerStatuses"][0]["state"]["running"]["startedAt"])
        _, since = wls.placement(s.workload("slow"))
        assert since is not None
        record_wall = serve.origin + (since - serve.origin) / serve.scale
        assert ran - record_wall >= 8.0, (ran, record_wall)  # kwok held it back, as asked
        late = wait(
            lambda: [e for e in serve.events("late_start") if e.get("job") == job_id],
            30,
            "the service to move the run's start",
        )
        assert len(late) == 1, late
        # the round's start precedes the record: the run moved at least to the pods' start
        ran_chronus = serve.origin + (ran - serve.origin) * serve.scale
        assert late[0]["seconds"] >= ran_chronus - since - 0.01, (late, ran_chronus, since)
