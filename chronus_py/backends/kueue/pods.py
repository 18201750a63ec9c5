"""Pods on chronus's nodes that hold GPUs chronus did not give them.

Chronus counts a node's allocatable GPUs free unless one of its own runs holds them, while
kube-scheduler counts every pod bound to the node. A pod asking the GPU resource that is not a
pod of a Workload chronus runs (a bare pod, a Job in another queue or outside Kueue, a
DaemonSet's) held GPUs chronus believed free: chronus then pinned a Workload's pods there and
kube-scheduler left them Pending (``Insufficient nvidia.com/gpu``) while chronus counted the
Workload running. The backend makes such a node unhealthy (no new work) while those pods are
there (``KueueBackend.cluster_nodes``).

Which pods are read: only those bound to a node and not terminal (the field selector
:data:`BOUND`: a Succeeded or Failed pod holds nothing), and of those
only the ones asking the resource are kept, as :func:`gpu_pod`'s few fields, so the copy holds
GPU pods only. A field selector cannot select by resources or by a set of nodes, so every bound
pod's events are still read (decoded as plain JSON, not lightkube's models).

Whose pod: a pod whose controller is the ``batch/v1`` Job of a Workload with chronus's check is
chronus's (its Job stays suspended until chronus starts it, so no other pod of it runs);
every other pod asking GPUs is not. Terminating pods count as kube-scheduler counts them:
until they are gone.

Chronus's own pods can hold more on a node than chronus placed there too: a multi-node
Workload is pinned by a label on all its nodes, and kube-scheduler binds its pods among them
as it likes (planned 3 + 2 on nodes with 3 and 4 GPUs free, a Job preferring the second
node was bound 1 + 4 on the lab; chronus then counted 2 GPUs free there that were not). Such
a node takes no new work either while the run lasts. Only a Workload chronus runs now
(check ``Ready``) is compared with its placement: the pods of one it preempted are leaving,
and a start on their node waits for them instead (:func:`ending_nodes`).

The same copy tells whether a start's pods were bound and when they began to run
(:func:`began`, one pass for both), and where pods still end their grace
(:func:`ending_nodes`; a look takes the copy once for both, :class:`Look`). So a start that
binds costs no request (``binding.py``), and a run counts from when its last pod's containers
started, not from chronus's start record, which precedes Kueue's admission, the Job's pods,
their binding and their image pull (minutes for a 10-20 GB training image), work chronus
would otherwise credit a job that had not begun. The pods are cluster state, so a restarted or
newly elected controller counts the same.
"""

from __future__ import annotations

import math
from collections import defaultdict
from functools import cached_property
from typing import Any, Iterable, Mapping

from lightkube import operators
from lightkube.generic_resource import create_namespaced_resource

from chronus_py.backends.kueue.workloads import pod_gpus, unix

POD = create_namespaced_resource("", "v1", "Pod", "pods")
BOUND = {
    "spec.nodeName": operators.not_equal(""),
    "status.phase": operators.not_in(["Succeeded", "Failed"]),
}
"""Field selector of the pods kube-scheduler counts on their nodes: bound and not terminal."""
SHOWN = 3  # pods a node's reason names; the rest are counted


def gpu_pod(obj: Mapping[str, Any], resource: str) -> dict | None:
    """The fields chronus keeps of a pod that asks ``resource`` (None: it asks none): its name,
    version (for the copy's order), node, GPUs, whether it is terminating, the uid of the
    Job that controls it, and when its containers run since (:func:`running_since`)."""
    gpus = pod_gpus(obj, resource)
    if gpus < 1:
        return None
    m = obj.get("metadata") or {}
    owner = next(
        (
            r.get("uid")
            for r in m.get("ownerReferences") or []
            if r.get("controller")
            and r.get("kind") == "Job"
            and str(r.get("apiVersion", "")).startswith("batch/")
        ),
        None,
    )
    return {
        "metadata": {
            "namespace": m.get("namespace", ""),
            "name": m.get("name", ""),
            "resourceVersion": m.get("resourceVersion"),
        },
        "node": (obj.get("spec") or {}).get("nodeName", ""),
        "gpus": gpus,
        "ending": bool(m.get("deletionTimestamp")),
        "job": owner,
        "running": running_since(obj),
    }


def running_since(obj: Mapping[str, Any]) -> float | None:
    """The Unix time the last of a pod's main containers started running (its
    ``containerStatuses[].state.running.startedAt``), or None while one of them does not run.
    Main containers only: init containers ran before them, and sidecars (init containers
    with ``restartPolicy: Always``) start before them, so neither delays the pod's work."""
    names = {c.get("name") for c in (obj.get("spec") or {}).get("containers") or []}
    latest = None
    seen = set()
    for c in (obj.get("status") or {}).get("containerStatuses") or []:
        if c.get("name") not in names:
            continue
        try:
            at = unix(((c.get("state") or {}).get("running") or {}).get("startedAt"))
        except (TypeError, ValueError):
            at = None
        if at is None:
            return None
        seen.add(c.get("name"))
        latest = at if latest is None or at > latest else latest
    return latest if names and seen == names else None


def held(
    pods: Iterable[Mapping[str, Any]], ours: Mapping[str, tuple[str, Mapping[str, int] | None]]
) -> dict[str, str]:
    """Node -> why it takes no new work. ``ours``: the uid of the Job of every Workload with
    chronus's check -> (its chronus id, GPUs per node chronus placed its run on, or None if
    it does not run now). Pods of no such Job that hold GPUs make their node's reason; so do
    a running Workload's live pods that hold more GPUs on a node than chronus placed there."""
    foreign: dict[str, list[str]] = defaultdict(list)
    bound: dict[tuple[str, str], int] = defaultdict(int)
    for pod in pods:
        mine = ours.get(pod["job"]) if pod["job"] is not None else None
        if mine is None:
            m = pod["metadata"]
            foreign[pod["node"]].append(f"{m['namespace']}/{m['name']}")
        elif mine[1] is not None and not pod["ending"]:
            bound[pod["job"], pod["node"]] += pod["gpus"]
    out = {}
    for node, names in foreign.items():
        names.sort()
        shown = ", ".join(names[:SHOWN])
        more = f" and {len(names) - SHOWN} more" if len(names) > SHOWN else ""
        out[node] = f"GPUs held by pod{'s' if len(names) > 1 else ''} {shown}{more}, not chronus's"
    for (uid, node), gpus in sorted(bound.items()):
        job_id, placed = ours[uid]
        if gpus > placed.get(node, 0):
            why = f"{job_id}'s pods hold {gpus} GPUs, chronus placed {placed.get(node, 0)}"
            out[node] = why if node not in out else f"{out[node]}; {why}"
    return out


def began(pods: Iterable[Mapping[str, Any]]) -> dict[str, tuple[int, float | None]]:
    """Job uid -> (its live GPU pods, as the watch holds them; the latest Unix time their
    containers started running, None while one's do not run): a started Workload with all
    its pods here was bound (``binding.py``), without a request, and with all of them running
    began then (``KueueBackend._run_start``)."""
    out: dict[str, tuple[int, float | None]] = {}
    for pod in pods:
        uid = pod["job"]
        if uid is None or pod["ending"]:
            continue
        count, latest = out.get(uid, (0, -math.inf))
        at = pod["running"]
        out[uid] = (count + 1, None if latest is None or at is None else max(latest, at))
    return out


def ending_nodes(pods: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """The nodes where GPU pods are still terminating: the runs a start there displaced (or its
    own last run's), whose GPUs kube-scheduler counts until they are gone, for their
    termination grace (30 s by default; minutes for a training job that checkpoints on
    SIGTERM). Meanwhile a start's pods there are Unschedulable (``Insufficient
    nvidia.com/gpu``) through no fault of the nodes (``binding.py``)."""
    return frozenset(p["node"] for p in pods if p["ending"])


class Look:
    """The pod watch's copy as one look reads it: copied from the watch at most once, and each
    summary made at most once, when the look first needs it (a look with no start to check
    makes none). Before, the binding check copied the store again for every start it waited
    on."""

    def __init__(self, store: Any) -> None:
        self._store = store

    @cached_property
    def _pods(self) -> Iterable[Mapping[str, Any]]:
        return self._store.snapshot().values()

    @cached_property
    def jobs(self) -> dict[str, tuple[int, float | None]]:
        """:func:`began` of the copy."""
        return began(self._pods)

    @cached_property
    def ending(self) -> frozenset[str]:
        """:func:`ending_nodes` of the copy."""
        return ending_nodes(self._pods)
