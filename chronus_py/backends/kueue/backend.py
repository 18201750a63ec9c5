"""The ``kueue`` backend: chronus as a Kueue AdmissionCheck controller.

A ClusterQueue that lists an AdmissionCheck whose ``spec.controllerName`` is chronus's
(``chronus.io/deadline`` by default) hands the start decisions of its Workloads to chronus; Kueue
keeps its quotas, cohorts and fair sharing. The mapping (see the README's design note for why):

- arrival: a Workload of such a ClusterQueue once Kueue has reserved quota for it
  (``QuotaReserved``), with chronus annotations on its Job or itself (``annotations.py``). Only
  such Workloads are ever started, so chronus never runs more than Kueue reserved. A bad
  annotation sets the check ``Rejected`` with a message naming it (Kueue deactivates the
  Workload); the controller goes on.
- start: the scheduler places the Workload as its pods, each whole on one node (the job's
  ``pod_gpus``, from its pod sets: 3 pods of 2 GPUs on 4-GPU nodes are 4 + 2); the check turns
  ``Ready`` with ``podSetUpdates`` whose nodeSelector pins every pod to the node the allocator
  chose (several nodes: a label chronus puts on exactly those nodes); Kueue admits the
  Workload and unsuspends the Job: the run counts from when all its GPU pods' containers run
  (``pods.began``), not from chronus's start record.
- preempt: the check turns ``Retry`` on the admitted Workload: Kueue evicts it (the Job is
  suspended, its pods get their termination grace to checkpoint), releases its quota and
  requeues it at once; once Kueue reserves again, chronus resumes it when its plan says.
- cancel: the check turns ``Rejected`` (Kueue deactivates the Workload); a Job deleted by its
  owner (or with its namespace), or a Workload deactivated by hand, is a cancelled chronus job.
  A Job whose parallelism its owner changes is the same job at its new size (Kueue recreates
  its Workload: ``_recreated``).
- what users see: the check's ``message`` says the decision ("guaranteed to finish by T",
  "planned start T", "not guaranteed: why"), rewritten when a round changes it materially
  (``publish``, ``material``: a planned start is shown to within 10 % of the wait).
- nodes: Node objects with allocatable GPUs; one not Ready, cordoned or tainted NoSchedule /
  NoExecute is unhealthy, and so is one where pods chronus did not start hold GPUs, until
  they are gone (``pods.py``), and one where kube-scheduler did not bind the pods of a start
  chronus pinned there, for a hold-off (``binding.py``: that start is withdrawn and re-planned,
  and a Workload whose pods bind nowhere is refused). Nodes that join, leave or change their
  GPUs or labels are followed while serving (``nodes_can_change``: the service rebuilds its
  cluster). With a HiveD config (``--cluster``, its nodes named as Kubernetes names them) the
  cluster is the config's cell tree instead: the cell allocator places every job, and a config
  node missing from the cluster, or with fewer GPUs than the config gives it, is unhealthy.

All state lives in the cluster (``workloads.py`` lists chronus's records), so a restarted or
newly elected controller rebuilds from the API server alone. Every write is a server-side apply
by chronus's field manager of chronus's own fields only, except a merge patch that takes off a
record of chronus's that another manager's update made it co-own (``_record``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import queue
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, Mapping, Sequence

from lightkube import ApiError
from lightkube.resources.core_v1 import Node

from chronus_py.backends import base
from chronus_py.backends.base import (
    BackendUnavailable,
    JobReport,
    NodeInfo,
    ObservedJob,
    RunState,
)
from chronus_py.backends.kueue import annotations as notes
from chronus_py.backends.kueue import binding
from chronus_py.backends.kueue import pods as gpu_pods
from chronus_py.backends.kueue import workloads as wls
from chronus_py.backends.kueue.kube import Conflict, Kube, config
from chronus_py.backends.kueue.leader import LeaderElector
from chronus_py.backends.kueue.names import CONTROLLER, GPU
from chronus_py.backends.kueue.watch import Kind, Watches, name_key, namespaced_key
from chronus_py.backends.kueue.writes import WORKERS, Message, Writes
from chronus_py.errors import ChronusError, InputError
from chronus_py.jobs.model import Job
from chronus_py.service.clock import CompressedTime
from chronus_py.service.jobspec import FieldError, Origin, in_terms, read_job, shown

log = logging.getLogger("chronus.kueue")
FIELD_MANAGER = "chronus"
ACTIVE_EVERY = 30.0
RESERVE_WAIT = 3.0
RECREATE_WAIT = 30.0  # wall seconds a vanished Workload's Job may wait for Kueue's new one
SYNC_WAIT = 300.0  # wall seconds the first list of every Workload may take at start
MIN_SHIFT = 60.0  # backend seconds a planned start may move before its message is rewritten
SHIFT_SHARE = 0.1  # ... or this share of the time until it, if more (``material``)
_BAD_TAINTS = {"NoSchedule", "NoExecute"}
LATENCY_SAMPLES = 20  # starts the start latency is the longest of (as the Slurm backend's)


class KueueBackend(CompressedTime):
    """Drive the Workloads of chronus's admission checks through the API server ``kube``."""

    name = "kueue"
    even_gangs = False  # a gang is its pods (``Job.pod_gpus``), not equal shares per node
    whole_pods = True  # ... fixed by the Job: a one-pod 4-GPU Job is never 2 + 2
    records_promises = True
    resizes_waiting_jobs = True  # Kueue may reserve a preempted Workload again at another count

    def __init__(
        self,
        kube: Kube,
        *,
        controller: str = CONTROLLER,
        resource: str = GPU,
        node_selector: Mapping[str, str] | None = None,
        poll: float = 1.0,
        time_scale: float = 1.0,
        time_origin: float = 0.0,
        elector: LeaderElector | None = None,
        topology: Mapping[str, int] | None = None,
        writers: int = WORKERS,
        start_timeout: float = binding.START_TIMEOUT,
    ):
        self.kube = kube
        self.start_timeout = start_timeout
        self.topology = None if topology is None else dict(topology)
        self.nodes_can_change = topology is None
        self.controller = controller
        self.resource = resource
        self.node_selector = dict(node_selector or {})
        self.poll = poll
        self.scale = time_scale
        self.origin = time_origin
        self.elector = elector
        self.checks: frozenset[str] = frozenset()
        self._checks_at = -float("inf")
        self._listed: dict[str, dict] = {}  # chronus id -> Workload, as last seen or written
        self._listed_at = -float("inf")
        self._tracked: set[str] = set()  # accepted ids seen in the cluster
        self._gone: dict[str, float] = {}  # accepted ids whose Workload vanished -> when seen
        self._arrived: set[str] = set()
        self._hostnames: dict[str, str] = {}
        self._held: dict[str, str] = {}  # node -> why pods hold GPUs there (``_held_gpus``)
        self._held_at = -float("inf")
        self._shown: dict[str, tuple[str, JobReport]] = {}  # id -> message written, its report
        self._looked = time.monotonic()  # when ``jobs`` last looked (a round's first call)
        self._latencies: deque[float] = deque(maxlen=LATENCY_SAMPLES)  # wall seconds
        self._starting: dict[str, tuple[float, float]] = {}  # id -> its run's since, decided at
        self._holds = binding.Holds(start_timeout)  # nodes where a start's pods were not bound
        self._bound: dict[str, str] = {}  # id -> the placement record of a run seen bound
        # id -> (its placement record, when its start's nodes last held pods it displaced,
        # still terminating: ``_binding``), until its run's start latency is counted
        self._displacing: dict[str, tuple[str, float]] = {}
        self._graces: dict[str, float] = {}  # id -> its pods' termination grace (``jobs``)
        self._grace = 0.0  # wall seconds: the longest of them
        self._began: dict[str, tuple[str, float]] = {}  # id -> placement record, its run's start
        self._follow_checks(force=True)
        self.watches = Watches(
            kube.cfg,
            {
                "workloads": Kind(kube.kueue.workload, namespaced_key, namespaced=True),
                "nodes": Kind(Node, name_key, namespaced=False),
                "pods": Kind(
                    gpu_pods.POD,
                    namespaced_key,
                    namespaced=True,
                    fields=gpu_pods.BOUND,
                    keep=lambda pod: gpu_pods.gpu_pod(pod, resource),
                ),
            },
        ).start()
        if not self.watches.wait_synced(SYNC_WAIT):
            self.watches.stop()
            raise BackendUnavailable(
                f"kueue: the first list of Workloads, Nodes and Pods took over {SYNC_WAIT:g} s"
            )
        self._failed: set[str] = set()  # ids whose queued message write failed
        self._failed_lock = threading.Lock()
        # Under leader election a queued write is sent only while the Lease is held, i.e. at
        # most ``renew_deadline`` after its last renewal, and a new leader acts no sooner than
        # ``duration`` after it: the writes' client gives up within that margin.
        margin = 10.0 if elector is None else min(10.0, elector.duration - elector.renew_deadline)
        self.writes = Writes(
            lambda: kube.like(timeout=margin),
            on_written=self.watches.stores["workloads"].put,
            on_failed=self._message_failed,
            may_write=lambda: self.elector is None or self.elector.held,
            workers=writers,
        )
        self._notes: dict[str, dict[str, str]] = {}  # id -> its Job's annotations (``look``)
        self._readable: dict[str, str] = {}  # id -> its job record's text, read as a job once
        self._failures: dict[str, RunState] = {}  # failed Workload id -> how it ended
        self._last: dict[str, dict] = {}  # accepted id -> its Workload, as last looked or written
        self._labelled: dict[str, tuple[str, ...]] = {}  # id -> nodes this process labelled
        self._vanished: dict[str, float] = {}  # id -> when its Workload vanished (``_coming_back``)
        self._deleted_ns: dict[str, bool | None] = {}  # namespace -> being deleted, this look
        self._said_ns = False  # the log said chronus may not read namespaces
        self._passed: dict[str, float] = {}  # arrival id -> its last deadline, passed
        self._events: queue.SimpleQueue = queue.SimpleQueue()  # (ns, job, uid, reason, text)
        self._eventer = threading.Thread(
            target=self._send_events,
            args=(lambda: kube.like(timeout=margin),),
            name="kueue-events",
            daemon=True,
        )
        self._eventer.start()
        self._size: tuple[int, int] | None = None  # chronus's nodes and GPUs, once a round
        self._node_sizes: list[int] = []  # each node's GPUs (``_pods``)

    def close(self) -> None:
        self._events.put(None)
        self._eventer.join(timeout=5)
        self.writes.close()
        log.info(json.dumps({"event": "kueue_writes", **(self.kube.writes + self.writes.writes)}))
        reads = {"workload or job": self.kube.reads, "pods of a job": self.kube.pod_lists}
        log.info(json.dumps({"event": "kueue_reads", **reads}))
        self.watches.stop()
        if self.elector is not None:
            self.elector.release()
        self.kube.close()

    # -- admission checks: which are chronus's, and telling Kueue they are served ---------------
    def _follow_checks(self, *, force: bool = False) -> None:
        if not force and time.monotonic() < self._checks_at + ACTIVE_EVERY:
            return
        self._checks_at = time.monotonic()
        ours = [
            c
            for c in self.kube.admission_checks()
            if (c.get("spec") or {}).get("controllerName") == self.controller
        ]
        checks = frozenset(c["metadata"]["name"] for c in ours)
        if not checks and (self.checks or force):  # at start, and when the last one goes
            log.warning(
                json.dumps(
                    {
                        "event": "kueue_no_admission_check",
                        "message": f"no AdmissionCheck has controllerName {self.controller}: no "
                        "Workload waits for chronus (deploy/kueue/admissioncheck.yaml)",
                    }
                )
            )
        self.checks = checks
        if self.elector is not None and not self.elector.held:
            return
        for c in ours:
            active = next(
                (
                    x
                    for x in (c.get("status") or {}).get("conditions") or []
                    if x.get("type") == "Active"
                ),
                None,
            )
            if active is not None and active.get("status") == "True":
                continue
            self.kube.apply_check_active(
                c["metadata"]["name"],
                {
                    "type": "Active",
                    "status": "True",
                    "reason": "Active",
                    "message": "the chronus controller serves this check",
                    "lastTransitionTime": wls.rfc3339(time.time()),
                    "observedGeneration": c["metadata"].get("generation", 0),
                },
            )

    # -- reading the cluster -----------------------------------------------------------------------
    def _ours(self) -> dict[str, dict]:
        """chronus id -> Workload, for every Workload with one of chronus's checks, from the
        watch-fed copy (``watch.py``); picked anew at most every tenth of a second (one round
        asks several times)."""
        if time.monotonic() - self._listed_at > 0.1:
            self._follow_checks()
            listed = {}
            for wl in self.watches.stores["workloads"].snapshot().values():
                if wls.check_entry(wl, self.checks) is not None:
                    listed[wls.job_id(*wls.key(wl))] = wl
            for job_id, mine in self.writes.wanted().items():  # queued: as decided
                if job_id in listed:
                    listed[job_id] = wls.with_records(listed[job_id], mine)
            self._listed, self._listed_at = listed, time.monotonic()
        return self._listed

    def _seen(self, job_id: str, wl: dict) -> dict:
        """A Workload as a write or a read just returned it: newer than the watch may be (with
        the records chronus has queued for it, as ``_ours`` gives it)."""
        self.watches.stores["workloads"].put(wl)
        mine = self.writes.wanted_of(job_id)
        if mine is not None:
            wl = wls.with_records(wl, mine)
        return self._known(job_id, wl)

    def _known(self, job_id: str, wl: dict) -> dict:
        """``wl`` as chronus now knows its Workload, also as the last look's copy of it (the
        same Workload, by uid): a Workload Kueue recreates is told from that copy
        (``_recreated``), and one from the look before a start lacked the run's record, so a
        ``kubectl scale`` between the start and the next look lost the run's work (CI saw it).
        A job accepted since the look is in it from its acceptance: one started in the round it
        arrived and scaled before the next look was reported cancelled."""
        self._listed[job_id] = wl
        old = self._last.get(job_id)
        uid = wls.meta(wl).get("uid")
        if (old is None and job_id in self._tracked) or (
            old is not None and wls.meta(old).get("uid") == uid
        ):
            self._last[job_id] = wl
        return wl

    def _fresh(self, job_id: str) -> dict | None:
        """The Workload as the API server has it now (commands act on nothing older)."""
        wl = self._ours().get(job_id)
        if wl is None:
            return None
        got = self.kube.workload(*wls.key(wl))
        if got is None:
            self._listed.pop(job_id, None)
            return None
        return self._seen(job_id, got)

    def nodes(self) -> Sequence[NodeInfo]:
        seen = self.cluster_nodes()
        return seen if self.topology is None else _in_cells(self.topology, seen)

    def cluster_nodes(self) -> list[NodeInfo]:
        """The Nodes with allocatable GPUs that match the node selector, as Kubernetes has
        them (without a HiveD config, the cluster chronus schedules); unhealthy while pods
        chronus did not start hold GPUs on them, or a running Workload's pods hold more than
        chronus placed there (``pods.py``), or while a start's pods not bound there hold them
        off (``binding.py``)."""
        held = self._held_gpus()
        holds = self._holds.reasons(time.monotonic())
        out = []
        for n in self.watches.stores["nodes"].snapshot().values():
            labels = n.metadata.labels or {}
            if any(labels.get(k) != v for k, v in self.node_selector.items()):
                continue
            gpus = (n.status.allocatable or {}).get(self.resource) if n.status else None
            if gpus is None or wls._quantity(gpus) < 1:
                continue
            self._hostnames[n.metadata.name] = labels.get(wls.HOSTNAME, n.metadata.name)
            name = n.metadata.name
            why = ", ".join(w for w in (_unhealthy(n), held.get(name), holds.get(name)) if w)
            out.append(
                NodeInfo(
                    n.metadata.name, tuple(range(wls._quantity(gpus))), healthy=not why, reason=why
                )
            )
        return out

    def _held_gpus(self) -> dict[str, str]:
        """Node -> why pods hold GPUs there that chronus does not count (``pods.held``), picked
        anew at most every tenth of a second, as ``_ours``: a round asks for the nodes twice
        (their changes, their health), and at 5,000 Workloads and 2,500 GPU pods one pick took
        16 ms here."""
        if time.monotonic() - self._held_at > 0.1:
            ours: dict[str, tuple[str, dict[str, int] | None]] = {}
            for job_id, wl in self._ours().items():
                uid = wls.owner_job_uid(wl)
                if uid is not None:
                    running = (wls.check_entry(wl, self.checks) or {}).get("state") == "Ready"
                    nodes = wls.placement(wl)[0] if running else None
                    placed = None if nodes is None else {n: len(g) for n, g in nodes.items()}
                    ours[uid] = (job_id, placed)
            pods = self.watches.stores["pods"].snapshot().values()
            self._held, self._held_at = gpu_pods.held(pods, ours), time.monotonic()
        return self._held

    def start_latency(self) -> float:
        """Chronus seconds from the round that starts a job to its run's beginning, from which
        its work counts (every GPU pod running, ``_run_start``): the longest of the last
        :data:`LATENCY_SAMPLES` starts this process made and saw begin, wall seconds times the
        time scale, each counted from the round's look, plus the longest termination grace of
        the pods of the jobs chronus has (a start may preempt any that runs; 30 s unless their
        template says otherwise).
        A sample covers the round, the commands issued before this one (a preemption for it:
        the Workload's check and records), waiting for Kueue's reservation, the start's own
        writes, and then Kueue's admission, the Job's pods, their binding and their image
        pull; not the wait for the pods it displaced to end their grace, which the grace term
        charges (so not twice). Before the first sample, one poll.

        Why: the plan charges it on every start, so a guarantee includes it. Without it a
        guarantee was planned as if a start took no time; on a loaded control plane a start
        took seconds of wall time, minutes of a test's compressed time, the service moved the
        run's beginning to when it really began (``late_start``), and the next re-plan found
        the just-started job could no longer make its deadline: demoted, it was hopeless and
        lost its GPUs to the job it had been preempting (a test's wide gang was preempted
        again before its pods were bound, issue 24). The grace likewise: kube-scheduler counts
        a preempted pod's GPUs until it is gone, so a start that preempts begins that much
        later, and the samples hold it only once such a start was made among the last ones (a
        guarantee started as late as its deadline allowed waited 222 chronus seconds for a
        5-second grace, was demoted, and lost its GPUs)."""
        return (max(self._latencies, default=self.poll) + self._grace) * self.scale

    def jobs(self) -> Sequence[ObservedJob]:
        self._looked = time.monotonic()
        self._deleted_ns = {}  # each namespace read at most once a look (``_failure``)
        self.writes.retry()  # records whose write failed: again, once a round
        now = self.now()
        out = []
        seen = set()
        last: dict[str, dict] = {}
        # the pod watch's copy, taken and summed up once if a look needs it (a start unchecked)
        look = gpu_pods.Look(self.watches.stores["pods"])
        for job_id, wl in self._ours().items():
            fields = wls.accepted(wl)
            if fields is None:
                wl, fields = self._recreated(job_id, wl, now)
            if fields is not None and "pod_gpus" not in fields:
                wl, fields = self._with_pods(job_id, wl, fields)
            if fields is None or self._damaged(job_id, wl, fields, now):
                continue
            seen.add(job_id)
            wl, fields = self._follow_count(job_id, wl, fields)
            checked = self._binding(job_id, wl, now, look)
            if checked is None:  # refused: it ended now
                self._gone.setdefault(job_id, now)
                continue
            wl = checked
            last[job_id] = wl
            obs = self._observe(job_id, wl, fields, now, look)
            if obs.state not in (RunState.RUNNING, RunState.PENDING):
                self._unpin_gang(job_id, wl, obs)
                self._graces.pop(job_id, None)
            elif job_id not in self._graces:  # a pod template does not change
                self._graces[job_id] = wls.grace(wl)
            out.append(obs)
        for job_id in self._tracked - seen:
            old = self._last.get(job_id)
            if old is not None and job_id not in self._gone and self._coming_back(job_id, old):
                last[job_id] = old
                continue
            self._gone.setdefault(job_id, now)
            if old is not None or job_id in self._labelled:
                try:  # a gang deleted while it ran: its label would stay on its nodes
                    self._unlabel(job_id, {} if old is None else wls.placement(old)[0])
                except BackendUnavailable as exc:  # housekeeping
                    log.warning(
                        json.dumps({"event": "kueue_unlabel", "job": job_id, "error": str(exc)})
                    )
        self._vanished = {i: t for i, t in self._vanished.items() if i in last and i not in seen}
        self._tracked, self._last = set(last), last
        self._readable = {i: t for i, t in self._readable.items() if i in seen}
        self._failures = {i: t for i, t in self._failures.items() if i in seen}
        self._bound = {i: t for i, t in self._bound.items() if i in seen}
        self._displacing = {i: t for i, t in self._displacing.items() if i in seen}
        self._began = {i: b for i, b in self._began.items() if i in seen}
        self._starting = {i: b for i, b in self._starting.items() if i in seen}
        out += [
            ObservedJob(job_id, RunState.CANCELLED, ended_at=at)
            for job_id, at in self._gone.items()
        ]
        self._gone.clear()  # reported once: the service ends them now
        self._graces = {i: g for i, g in self._graces.items() if i in seen}
        self._grace = max(self._graces.values(), default=0.0)
        return out

    def _binding(self, job_id: str, wl: dict, now: float, look: gpu_pods.Look) -> dict | None:
        """``wl``, or ``wl`` withdrawn if it runs but kube-scheduler did not bind its pods
        within ``start_timeout`` of its start, or of when the pods it displaced on its nodes
        were last seen terminating (``binding.py``), or None if it was refused for it.
        ``look``: the pod watch's copy (its bound GPU pods per Job uid, the nodes where pods
        still end their grace)."""
        record = (wls.meta(wl).get("annotations") or {}).get(wls.PLACEMENT)
        if record is None or self._bound.get(job_id) == record:
            return wl  # (a look asks this of every Workload: nothing is parsed for it)
        uid = wls.owner_job_uid(wl)
        if uid is None or wls.is_true(wl, "Finished"):
            self._bound[job_id] = record  # no Job's pods, or over: not asked again
            return wl
        nodes, since = wls.placement(wl)
        if (
            since is None
            or not nodes
            or (wls.check_entry(wl, self.checks) or {}).get("state") != "Ready"
            or not wls.reserved(wl)
            or wls.REFUSED in wls.annotations(wl)
            or (self.elector is not None and not self.elector.held)
        ):
            return wl
        expected = sum(p.count for p in wls.pod_sets(wl, self.resource) if p.gpus_per_pod)
        if look.jobs.get(uid, (0, None))[0] < expected:
            if not look.ending.isdisjoint(nodes):
                if self._displacing.get(job_id, ("",))[0] != record:  # said once: why it is slow
                    log.info(
                        json.dumps(
                            {"event": "kueue_start_waits", "job": job_id, "nodes": sorted(nodes)}
                        )
                    )
                self._displacing[job_id] = (record, now)  # the timeout runs once they are gone
                return wl
            waited = self._displacing.get(job_id)
            begun = max(since, waited[1]) if waited is not None and waited[0] == record else since
            if (now - begun) / self.scale < self.start_timeout:
                return wl
            placed = {n: len(g) for n, g in nodes.items()}
            listed = self.kube.job_pods(wls.key(wl)[0], uid)
            missing = binding.unbound(listed, placed, expected, self.resource)
            if missing is not None:
                return self._withdraw(job_id, wl, missing)
        self._bound[job_id] = record
        self._holds.bound(nodes)
        if self._failed_starts(job_id, wl):
            wl = self._record(wl, failed_starts=None, now=False)
        return wl

    def _failed_starts(self, job_id: str, wl: dict) -> int:
        """The Workload's failed starts in a row, as chronus last recorded them on it (written,
        or queued to be). On the Workload, not in memory: a restarted controller, or a new
        leader, counted afresh from none, so a Job no node can bind was started 3 more times
        after each restart."""
        wanted = self.writes.wanted_of(job_id)
        return wls.failed_starts(wls.records(wl) if wanted is None else wanted)

    def _withdraw(self, job_id: str, wl: dict, missing: binding.Unbound) -> dict | None:
        """Take back a start whose pods were not bound, as a preemption (check ``Retry``: Kueue
        evicts and requeues it), crediting the run no work, and say so on its Job (a Warning
        Event: the check's message is Kueue's to reset once it requeues); hold off the nodes it
        blames; after ``binding.MAX_FAILED`` such starts in a row, refuse it (None)."""
        self._require_leader()
        failed = self._failed_starts(job_id, wl) + 1  # (recorded once the withdrawal is written)
        nodes = wls.placement(wl)[0]
        waited = f"{self.start_timeout:g} s"
        log.warning(
            json.dumps(
                {
                    "event": "kueue_start_unbound",
                    "job": job_id,
                    "placement": sorted(nodes),
                    "blamed": list(missing.nodes),
                    "waiting": missing.waiting,
                    "pods": missing.pods,
                    "message": missing.message,
                    "failed_starts": failed,
                }
            )
        )
        for node in missing.nodes:
            self._holds.failed(
                node,
                f"kube-scheduler did not bind {job_id}'s pods in {waited}: {missing.message}",
                time.monotonic(),
            )
        if failed >= binding.MAX_FAILED:  # its gang label goes as it ends (``jobs``)
            self._refuse(
                job_id,
                wl,
                f"resources: kube-scheduler bound its pods in none of {failed} starts on "
                f"chronus's nodes within {waited}; last: {missing.why()}",
            )
            return None
        text = (
            f"chronus withdrew its start at {wls.rfc3339(self.now())}: {missing.why()} within "
            f"{waited}; Kueue requeues it and chronus plans it again"
        )
        with self.writes.urgent():
            wl = self._check(wl, "Retry", text)
        # the run did no work: none credited
        wl = self._record(wl, placement=None, failed_starts=str(failed), now=False)
        self._event(wl, "ChronusStartWithdrawn", text)
        self._unlabel(job_id, nodes)
        return wl

    def _damaged(self, job_id: str, wl: dict, fields: dict, now: float) -> bool:
        """Whether ``wl``'s ``chronus.io/job`` record is not a job the service can read (edited
        by hand, or made by whoever may write Workloads): such a Workload is refused, once,
        saying so, and left out. Reported, it failed the service's rebuild, at start and after
        every backend error, so no Workload of any queue started again. Each record text is
        read once (a round looks at every Workload)."""
        text = wls.annotations(wl).get(wls.JOB, "")
        if self._readable.get(job_id) == text:
            return False
        spec = {k: v for k, v in fields.items() if k != "submit"}
        try:
            if spec.get("id") != job_id:
                raise FieldError("id", f"names {shown(str(spec.get('id')))}, not {job_id}")
            read_job(spec, Origin.record(str(spec.get("tenant")), now), now=now)
        except (FieldError, TypeError, ValueError, OverflowError) as exc:
            if wls.REFUSED not in wls.annotations(wl) and (
                self.elector is None or self.elector.held
            ):
                why = f"{wls.JOB}: chronus's record of the job is damaged ({exc}); resubmit the Job"
                try:
                    self._refuse(job_id, wl, why[:300])
                except BackendUnavailable as error:  # tried again at the next look
                    log.warning(json.dumps({"event": "kueue_refuse", "error": str(error)}))
            return True
        self._readable[job_id] = text
        return False

    def _with_pods(self, job_id: str, wl: dict, fields: dict) -> tuple[dict, dict]:
        """A job record from a chronus before ``Job.pod_gpus`` (session 23) with it, from the
        Workload's pod sets, and the record rewritten so (queued, once). Read without it, such
        a job was a gang of no fixed pods: 2 pods of 3 GPUs on 4-GPU nodes were planned 4 + 2,
        which its pods cannot fill, and every start of it failed the round (a ``backend_error``
        a round, until it was deleted). Pod sets that ask different GPUs per pod (which
        chronus now refuses at arrival) are left as they were."""
        sizes = {p.gpus_per_pod for p in wls.pod_sets(wl, self.resource) if p.gpus_per_pod}
        gpus = fields.get("gpus")
        if len(sizes) != 1 or not isinstance(gpus, int) or gpus % min(sizes):
            return wl, fields
        fields = {**fields, "pod_gpus": min(sizes)}
        log.info(json.dumps({"event": "kueue_record_pods", "job": job_id, "pod_gpus": min(sizes)}))
        if self.elector is None or self.elector.held:
            wl = self._record(wl, job=fields, now=False)
        return wl, fields

    def _recreated(self, job_id: str, wl: dict, now: float) -> tuple[dict, dict | None]:
        """``wl`` and its job fields if Kueue recreated the Workload of a job chronus had
        accepted, else ``wl`` and None. Kueue deletes the Workload of a Job whose pod sets no
        longer match it (``kubectl scale`` or a patch of a running or reserved Job's
        parallelism) and creates another of the same name, so the same chronus id, without
        chronus's records. It was a cancelled job, then an arrival the service refused every
        round (its id was taken), with Kueue's quota reserved for it for ever. It is the same
        job: its run ended (Kueue stopped the Job), its records are carried over to the new
        Workload at the new count (``workloads.resize``, as a partial admission), and the
        service re-plans it; a count chronus's nodes cannot hold is refused, as at arrival,
        and the job cancelled (it waited for ever, Kueue's quota held)."""
        old = self._last.get(job_id)
        owner = wls.owner_job_uid(wl)
        if (
            old is None
            or owner is None
            or owner != wls.owner_job_uid(old)
            or wls.meta(wl).get("uid") == wls.meta(old).get("uid")
            or wls.REFUSED in wls.annotations(wl)
            or (self.elector is not None and not self.elector.held)
        ):
            return wl, None
        fields = wls.accepted(old) or {}
        done, runs = wls.work_done(old)
        nodes, since = wls.placement(old)
        if since is not None:  # the run Kueue stopped
            done += max(now - since, 0.0)
            runs += 1
        was, count = int(fields.get("gpus", 0)), wls.gpus(wl, self.resource)
        record: dict[str, Any] = {"seconds": round(done, 3), "runs": runs}
        if count >= 1 and count != was:
            fields, done = wls.resize(fields, done, was, count)
            record = {"seconds": round(done, 3), "runs": runs, "resized": [was, count]}
        log.info(json.dumps({"event": "kueue_recreated", "job": job_id, "from": was, "to": count}))
        kept = wls.records(old)
        try:
            self._unlabel(job_id, nodes)
            self._pods(wl, count)
            wl = self._record(
                wl,
                job=fields,
                work_done=record,
                guarantee=kept.get(wls.GUARANTEE),
                deadline_passed=kept.get(wls.PASSED),
                placement=None,
                refused=None,
            )
        except notes.AnnotationError as exc:  # scaled to 0, or past what chronus's nodes hold
            self._refuse(job_id, wl, str(exc))
            self._gone.setdefault(job_id, now)  # ended now, not once its Job goes
            return wl, None
        except BackendUnavailable as exc:  # seen again at the next look
            log.warning(json.dumps({"event": "kueue_recreated", "job": job_id, "error": str(exc)}))
            return wl, None
        return wl, fields

    def _coming_back(self, job_id: str, old: dict) -> bool:
        """Whether an accepted Workload that vanished while neither finished nor deleted may be
        one Kueue is recreating (``_recreated``): its Job is still there, for at most
        ``RECREATE_WAIT`` wall seconds. Reported cancelled meanwhile, the job was ended in
        the service before its new Workload came."""
        if wls.is_true(old, "Finished") or wls.meta(old).get("deletionTimestamp"):
            return False
        first = self._vanished.setdefault(job_id, time.monotonic())
        job = wls.owner_job(old)
        if job is None or time.monotonic() - first > RECREATE_WAIT:
            return False
        return self.kube.job_alive(wls.key(old)[0], job, wls.owner_job_uid(old))

    def _unlabel(self, job_id: str, nodes: Mapping[str, Any]) -> None:
        """Take a multi-node run's gang label off its nodes: those its record names, else
        those this process labelled for it (a gang deleted before its record of the run
        landed kept its label for good: CI saw it)."""
        nodes = tuple(nodes) or self._labelled.get(job_id, ())
        if len(nodes) < 2 or (self.elector is not None and not self.elector.held):
            return
        for node in nodes:
            self.kube.label_node(node, self._gang_label(job_id), on=False)
        self._labelled.pop(job_id, None)

    def _unpin_gang(self, job_id: str, wl: dict, obs: ObservedJob) -> None:
        """Take a multi-node run's label off its nodes once the run is over, and close the run
        in the records (so this happens once)."""
        nodes = tuple(wls.placement(wl)[0]) or self._labelled.get(job_id, ())
        if len(nodes) < 2 or (self.elector is not None and not self.elector.held):
            return
        try:
            self._unlabel(job_id, nodes)
            done = wls.done_record(wl, obs.work_done or 0.0, obs.starts)
            self._record(wl, work_done=done, placement=None, now=False)
        except BackendUnavailable as exc:  # housekeeping: tried again at the next look
            log.warning(json.dumps({"event": "kueue_unlabel", "job": job_id, "error": str(exc)}))

    def _follow_count(self, job_id: str, wl: dict, fields: dict) -> tuple[dict, dict]:
        """A waiting Workload that Kueue reserved again at another pod count than chronus
        accepted or last ran it at (partial admission, ``kueue.x-k8s.io/job-min-parallelism``:
        after chronus preempted it, Kueue re-reserves what its quota then allows) is now a job
        of that size. Its records are rewritten at the new size, its estimate and work done
        scaled (``workloads.resize``), so the service re-plans it at the count Kueue reserved
        (its promise kept only if the new plan holds it) and a new leader reads the same. The
        count Kueue reserved is the only one chronus can start (``start`` checks it)."""
        entry = wls.check_entry(wl, self.checks) or {}
        if entry.get("state") != "Pending" or not wls.reserved(wl) or wls.placement(wl)[0]:
            return wl, fields
        now, was = wls.gpus(wl, self.resource), int(fields.get("gpus", 0))
        if now == was or now < 1 or (self.elector is not None and not self.elector.held):
            return wl, fields
        done, runs = wls.work_done(wl)
        new, scaled = wls.resize(fields, done, was, now)
        log.info(json.dumps({"event": "kueue_resized", "job": job_id, "from": was, "to": now}))
        record = {"seconds": round(scaled, 3), "runs": runs, "resized": [was, now]}
        try:
            wl = self._record(wl, job=new, work_done=record)
        except BackendUnavailable as exc:  # seen again at the next look; nothing starts meanwhile
            log.warning(json.dumps({"event": "kueue_resize", "job": job_id, "error": str(exc)}))
            return wl, fields
        return wl, new

    def _observe(
        self,
        job_id: str,
        wl: dict,
        fields: dict,
        now: float,
        look: gpu_pods.Look,
    ) -> ObservedJob:
        done, runs = wls.work_done(wl)
        spec = {k: v for k, v in fields.items() if k != "submit"}
        promise = wls.guarantee(wl, fields)
        common = dict(spec=spec, guaranteed=promise)
        finished = wls.condition(wl, "Finished")
        if finished is not None and finished.get("status") == "True":
            at = wls.unix(finished.get("lastTransitionTime"))
            _, since = wls.placement(wl)
            if since is not None:
                done += max(self._v(at or time.time()) - since, 0.0)
                runs += 1
            state = (
                RunState.FINISHED
                if finished.get("reason") == "Succeeded"
                else self._failure(job_id, wls.key(wl)[0])
            )
            return ObservedJob(
                job_id,
                state,
                ended_at=now if at is None else self._v(at),
                work_done=done,
                starts=runs,
                **common,
            )
        if wls.meta(wl).get("deletionTimestamp") or not wls.active(wl):
            return ObservedJob(
                job_id, RunState.CANCELLED, ended_at=now, work_done=done, starts=runs, **common
            )
        entry = wls.check_entry(wl, self.checks) or {}
        nodes, since = wls.placement(wl)
        if entry.get("state") == "Ready" and wls.reserved(wl) and nodes and since is not None:
            began = self._run_start(job_id, wl, since, look)
            return ObservedJob(
                job_id,
                RunState.RUNNING,
                placement=nodes,
                run_since=began,
                work_done=done + (0.0 if began is None else max(now - began, 0.0)),
                starts=runs + 1,
                **common,
            )
        return ObservedJob(job_id, RunState.PENDING, work_done=done, starts=runs, **common)

    def _run_start(
        self,
        job_id: str,
        wl: dict,
        since: float,
        look: gpu_pods.Look,
    ) -> float | None:
        """When the current run of a started Workload began: once every one of its GPU pods
        runs, the latest time their containers started (``pods.began``, from the pod watch:
        cluster state, so a restarted or newly elected controller counts the same), never
        before its start record ``since``; None until then (no work credited: the service
        counts the run from when it begins, ``Service._observe``). A Workload of no Job (whose
        pods chronus does not know) began at its record. ``look``: the pod watch's copy; a run
        found begun is not looked at again."""
        record = (wls.meta(wl).get("annotations") or {}).get(wls.PLACEMENT, "")
        known = self._began.get(job_id)
        if known is not None and known[0] == record:
            return known[1]
        uid = wls.owner_job_uid(wl)
        expected = sum(p.count for p in wls.pod_sets(wl, self.resource) if p.gpus_per_pod)
        if uid is None or expected < 1:
            return since
        count, latest = look.jobs.get(uid, (0, None))
        if count < expected or latest is None:
            return None
        began = max(since, self._v(latest))
        self._began[job_id] = (record, began)
        decided = self._starting.pop(job_id, None)
        if decided is not None and decided[0] == since:
            waited = self._displacing.pop(job_id, None)  # charged as the grace: not twice
            grace = max(waited[1] - since, 0.0) if waited and waited[0] == record else 0.0
            self._latencies.append(max(began - decided[1] - grace, 0.0) / self.scale)
        return began

    def _failure(self, job_id: str, namespace: str) -> RunState:
        """How a Workload Kueue finished as failed ended: ``CANCELLED`` if its namespace is
        gone or being deleted (its owner deleted it, as a deleted Job is cancelled: the
        namespace's deletion kills the pods first, so the Job fails before its Workload goes,
        and it was reported failed), else ``FAILED``. Asked once per Workload and per
        namespace a round (a finished Workload is listed until its Job goes); without ``get
        namespaces`` it is ``FAILED``, said once in the log."""
        if job_id not in self._failures:
            if namespace not in self._deleted_ns:
                self._deleted_ns[namespace] = self.kube.namespace_deleted(namespace)
            deleted = self._deleted_ns[namespace]
            if deleted is None and not self._said_ns:
                self._said_ns = True
                log.warning(
                    json.dumps(
                        {
                            "event": "kueue_namespaces",
                            "message": "may not get namespaces: a Job whose namespace is deleted "
                            "is reported failed (deploy/kueue/controller.yaml grants it)",
                        }
                    )
                )
            self._failures[job_id] = RunState.CANCELLED if deleted else RunState.FAILED
        return self._failures[job_id]

    def look(self) -> None:
        """Before a round, off the request lock: read the Jobs of the Workloads that arrive now
        (chronus's annotations are on the user's Job, which Kueue does not copy to the
        Workload), for ``arrivals``. Under the request lock these reads held a 120x round for
        12 s of every 90 (issue 24, session 13). One at a time: lightkube's msgspec decoding
        of a model type met for the first time in several threads at once crashed the
        process (segfaults in ``msgspec/_core``, tests/kube)."""
        jobs = {}
        for job_id, wl in self._ours().items():
            job = wls.owner_job(wl)
            if job is not None and _arriving(wl, self.checks):
                jobs[job_id] = (wls.key(wl)[0], job)
        self._notes = {i: n for i, n in self._notes.items() if i in jobs}
        missing = {i: j for i, j in jobs.items() if i not in self._notes}
        for job_id, (namespace, job) in missing.items():
            self._notes[job_id] = self.kube.job_annotations(namespace, job)

    def arrivals(self) -> Sequence[Mapping[str, Any]]:
        out = []
        self._passed = {}  # the last round's were recorded by its submits (or refused)
        self._size = None  # chronus's nodes and GPUs: read again (``_pods``)
        for job_id, wl in self._ours().items():
            entry = wls.check_entry(wl, self.checks)
            why = wls.annotations(wl).get(wls.REFUSED)
            if why is None and wls.accepted(wl) is not None:
                continue
            if why is not None:  # (accepted too: a damaged record, ``_damaged``)
                if entry is not None and entry.get("state") == "Pending" and not wls.active(wl):
                    # Kueue resets every check to Pending when it evicts the Workload it
                    # deactivated: say again why, where the user looks (it stays inactive)
                    self._require_leader()
                    self._check(wl, "Rejected", f"chronus refused it: {why}", now=False)
                continue
            if not _arriving(wl, self.checks) or job_id in self._last:  # last: ``_recreated``
                continue
            ns, name = wls.key(wl)
            given = wls.annotations(wl)
            job = wls.owner_job(wl)
            if job is not None:
                read = self._notes.get(job_id)
                given = {**(self.kube.job_annotations(ns, job) if read is None else read), **given}
            try:
                fields = self._fields(job_id, wl, given)
            except notes.AnnotationError as exc:
                self._refuse(job_id, wl, str(exc))
                continue
            except (BackendUnavailable, ChronusError):
                raise
            except Exception as exc:  # noqa: BLE001 - one Workload's, not every round's
                # A value no check foresaw (a bug here): this Workload is refused saying so,
                # and the round goes on. Raised, it failed every round, so no Workload of any
                # queue started until the Job was deleted (``iterations: "²"`` did).
                log.exception("reading the annotations of %s", job_id)
                why = f"chronus could not read its annotations ({type(exc).__name__}: {exc})"
                self._refuse(job_id, wl, why[:200])
                continue
            deadlines = fields.get("deadlines")
            if deadlines and deadlines[-1]["at"] <= self.now() + self.start_latency():
                # Kueue queued it past its last deadline (chronus sees a Workload only once
                # Kueue has reserved quota for it), or so close to it that it passes before
                # chronus can take the job in and start it (the service refuses a job whose
                # deadline is behind it: two of the 120x trace's): it runs best-effort rather
                # than not at all
                log.info(
                    json.dumps(
                        {"event": "kueue_deadline_passed", "job": job_id, "at": deadlines[-1]["at"]}
                    )
                )
                del fields["deadlines"]
                self._passed[job_id] = deadlines[-1]["at"]
            self._arrived.add(job_id)
            out.append(fields)
        return out

    def _fields(self, job_id: str, wl: dict, given: Mapping[str, str]) -> dict[str, Any]:
        """The job fields of an arriving Workload, or :class:`AnnotationError` naming what the
        user must fix: an annotation, or the Job's size when chronus's nodes cannot hold it
        (the service refused it too, but its reason never reached the Workload: the user read
        "it cannot run on chronus's nodes (more GPUs than they have, or its last deadline has
        passed)" and had to guess which)."""
        ns, _ = wls.key(wl)
        created = wls.unix(wls.meta(wl).get("creationTimestamp")) or time.time()
        gpus = wls.gpus(wl, self.resource)
        fields = notes.job_fields(
            given,
            job_id=job_id,
            gpus=gpus,
            submit=self._v(created),
            tenant=ns,
            pods=sum(p.count for p in wls.pod_sets(wl, self.resource)),
            resource=self.resource,
        )
        fields["pod_gpus"] = self._pods(wl, gpus)
        return fields

    def _pods(self, wl: dict, gpus: int) -> int:
        """The GPUs of each of ``wl``'s pods (``Job.pod_gpus``: the scheduler places the Job as
        those pods, each whole on one node), or :class:`AnnotationError` if chronus cannot: more
        GPUs than chronus's nodes have, pod sets whose pods ask different GPUs (one pod size
        per job), or pods that chronus's nodes cannot hold all at once even when idle (it
        would wait for ever on Kueue's quota). Before, a Job wider than a node was split
        equally over the fewest nodes whatever its pods, and refused here when they could not
        fill that split: 3 pods of 2 GPUs on 4-GPU nodes (planned 3 + 3), 5 pods of 1 on two
        such nodes (5 nodes of 1)."""
        if gpus < 1:  # scaled to 0 (at arrival, ``job_fields`` says so first)
            raise notes.AnnotationError(notes.NO_PODS)
        if self._size is None:  # once a round: a burst of arrivals reads the Nodes once
            nodes = self.nodes()
            self._size = (len(nodes), sum(len(n.gpus) for n in nodes))
            self._node_sizes = [len(n.gpus) for n in nodes]
        count, total = self._size
        if gpus > total:
            sets = ", ".join(
                f"{p.count} pod{'s' if p.count != 1 else ''} of {p.gpus_per_pod}"
                for p in wls.pod_sets(wl, self.resource)
                if p.gpus_per_pod
            )
            raise notes.AnnotationError(
                f"resources: the Job asks {gpus} GPUs ({sets}), chronus's {count} "
                f"node{'s' if count != 1 else ''} have {total} ({self.resource})"
            )
        sets = [p for p in wls.pod_sets(wl, self.resource) if p.gpus_per_pod]
        if len({p.gpus_per_pod for p in sets}) > 1:
            raise notes.AnnotationError(
                "resources: chronus runs a Workload whose pods ask the same GPUs; its pod sets "
                f"ask {', '.join(f'{p.name}: {p.gpus_per_pod}' for p in sets)}"
            )
        size = sets[0].gpus_per_pod
        fit = sum(n // size for n in self._node_sizes)
        if fit < gpus // size:
            raise notes.AnnotationError(
                f"resources: the Job's pods ask {size} GPUs each ({gpus // size} of them); "
                f"chronus's nodes hold {fit} such pods (a pod runs on one node)"
            )
        return size

    # -- commands ----------------------------------------------------------------------------------
    def _require_leader(self) -> None:
        if self.elector is not None:
            self.elector.require()

    def _record(self, wl: dict, *, now: bool = True, **changes: Any) -> dict:
        """Chronus's annotations on ``wl`` with ``changes`` (None removes one), built on what
        chronus last wanted there. ``now``: written before returning, ahead of the queue (a
        decision's record); else queued (``writes.py``) and ``wl`` returned as it will be.
        Content the API server already has is not written again."""
        ns, name = wls.key(wl)
        job_id = wls.job_id(ns, name)
        if not now:
            base = self.writes.wanted_of(job_id)
            base = wls.records(wl) if base is None else base
            mine = _changed(base, changes)
            if mine == base:
                return wl
            self.writes.want_records(job_id, ns, name, mine)
            return self._known(job_id, wls.with_records(wl, mine))
        with self.writes.claim(job_id) as wanted:
            base = wls.records(wl) if wanted is None else wanted
            mine = _changed(base, changes)
            if wanted is None and mine == base:
                return wl
            got = self.kube.apply_records(ns, name, mine)
            if got is None:
                raise BackendUnavailable(f"kueue: workload of job {job_id} is gone")
            self.writes.written(job_id)
            return self._seen(job_id, got)

    def _check(
        self,
        wl: dict,
        state: str,
        message: str,
        updates: list[dict] | None = None,
        *,
        now: bool = True,
        version: str | None = None,
    ) -> dict:
        """Chronus's check entry on ``wl``: written at once (``now``; at resourceVersion
        ``version`` if given), or queued (a message; a ``Ready`` one only lands while the
        Workload is still running)."""
        entry = wls.check_entry(wl, self.checks)
        check = entry["name"] if entry else sorted(self.checks)[0]
        status = wls.check_status(
            wl, check, state, message, now_wall=time.time(), pod_set_updates=updates
        )
        ns, name = wls.key(wl)
        job_id = wls.job_id(ns, name)
        if not now:
            ready = frozenset({check}) if state == "Ready" else frozenset()
            version = wls.meta(wl).get("resourceVersion") if ready else None
            self.writes.want_message(job_id, ns, name, Message(status, message, version, ready))
            return wl
        with self.writes.claim(job_id):
            got = self.kube.apply_workload_status(ns, name, status, resource_version=version)
            return self._seen(job_id, got)

    def _message_failed(self, job_id: str) -> None:
        with self._failed_lock:
            self._failed.add(job_id)

    def _event(self, wl: dict, reason: str, text: str) -> None:
        """An Event on the Workload's Job, sent by its own thread (never the round's)."""
        job = wls.owner_job(wl)
        if job is not None:
            self._events.put((wls.key(wl)[0], job, wls.owner_job_uid(wl), reason, text))

    def _send_events(self, client) -> None:
        """Send the queued Events until ``close``; best-effort: a failure is a log line, and
        without ``create events`` (an older ClusterRole) one line, then none are sent."""
        kube, allowed = client(), True
        try:
            while (item := self._events.get()) is not None:
                if not allowed:
                    continue
                try:
                    kube.job_event(*item)
                except ApiError as exc:
                    allowed = exc.status.code != 403
                    log.warning(json.dumps({"event": "kueue_event", "error": str(exc)}))
                except Exception as exc:  # noqa: BLE001 - an Event is informational
                    log.warning(json.dumps({"event": "kueue_event", "error": str(exc)}))
        finally:
            kube.close()

    def _refuse(self, job_id: str, wl: dict, why: str) -> None:
        """A Workload chronus will not run: ``Rejected`` with the reason; Kueue deactivates it.
        Queued (``writes.py``; the round reads the refusal at once): a round refuses under the
        request lock, and written there, 500 Jobs of one team's template with the same typo
        held every request and decision for 1,000 writes."""
        self._require_leader()
        log.warning(json.dumps({"event": "kueue_refuse", "job": job_id, "reason": why}))
        wl = self._record(wl, refused=why, now=False)
        self._check(wl, "Rejected", f"chronus refused it: {why}", now=False)
        self._event(wl, "ChronusRefused", f"chronus refused it: {why}")

    def refuse_arrival(self, job_id: str, field: str | None, why: str) -> None:
        """An arrival the service refused: ``Rejected``, naming the annotation (or the Job's
        resources, or its namespace for its tenant) behind ``field``."""
        self._arrived.discard(job_id)
        wl = self._fresh(job_id)
        if wl is None or not wls.active(wl) or wls.accepted(wl) is not None:
            return
        self._refuse(job_id, wl, in_terms(field, why, notes.FIELD_KEYS))

    def refuse(self, job: Job, spec: Mapping[str, Any]) -> tuple[str, str] | None:
        """Only Workloads are run: a job submitted to chronus's API has no pods to start."""
        if job.id in self._arrived:
            return None
        return (
            "id",
            "the kueue backend runs Kubernetes Jobs submitted to a ClusterQueue that lists "
            "chronus's admission check; submit the Job with kubectl",
        )

    def submit(self, job: Job, spec: Mapping[str, Any] | None = None) -> None:
        """Record the accepted job on its Workload (queued: the round reads it at once, and a
        new leader finds it once written; a Workload deleted meanwhile is a cancelled job)."""
        self._arrived.discard(job.id)
        wl = self._ours().get(job.id)
        if wl is None:
            if job.id not in self._gone:
                self._gone[job.id] = self.now()
            return
        if wls.accepted(wl) is None:
            self._require_leader()
            fields = dict(spec or {"id": job.id, "gpus": job.gpus, "tenant": job.tenant})
            fields["submit"] = job.submit
            passed = self._passed.pop(job.id, None)
            self._tracked.add(job.id)
            # chronus's records start here: any other put on the Workload before (a promise,
            # work done, a run) is not chronus's and goes
            self._record(
                wl,
                job=fields,
                deadline_passed=passed,
                guarantee=None,
                work_done=None,
                placement=None,
                now=False,
            )

    def start(self, job_id: str, placement: Mapping[str, tuple[int, ...]]) -> None:
        with self.writes.urgent():  # the queued writes wait: the API server serves this first
            self._start(job_id, placement)

    def _start(self, job_id: str, placement: Mapping[str, tuple[int, ...]]) -> None:
        """Two writes, nothing read first: the run's record (its answer is the Workload as the
        API server has it now), then the check ``Ready`` at that answer's resourceVersion. So
        the start lands only on a Workload that is still reserved, at Kueue's count and not
        started, and nothing changed it in between (else one fresh read decides again); and a
        former leader's start still in flight cannot land after this one's record."""
        decided = self._looked  # the round that decided it looked first (``Service._observe``)
        self._require_leader()
        wl = self._ours().get(job_id)
        if wl is None:
            raise BackendUnavailable(f"kueue: workload of job {job_id} is gone")
        entry = wls.check_entry(wl, self.checks) or {}
        if entry.get("state") == "Ready":
            return  # started already: never twice
        if not self._requeued(wl):
            wl = self._await_reservation(job_id, wl) or wl
        self._startable(job_id, wl, placement)
        sets = wls.pod_sets(wl, self.resource)
        per_pod = {p.gpus_per_pod for p in sets if p.gpus_per_pod}
        bad = [n for n, g in placement.items() if any(len(g) % k for k in per_pod)]
        if bad:
            raise BackendUnavailable(
                f"kueue: job {job_id}: the plan puts {dict(placement)} GPUs on nodes, which "
                f"whole pods of {sorted(per_pod)} GPUs cannot fill exactly"
            )
        if len(placement) == 1:
            (node,) = placement
            selector = {wls.HOSTNAME: self._hostnames.get(node, node)}
        else:
            selector = {self._gang_label(job_id): "true"}
            for node in placement:
                self.kube.label_node(node, self._gang_label(job_id), on=True)
            self._labelled[job_id] = tuple(placement)
        since = self.now()
        self._starting[job_id] = (since, self._v(time.time() - (time.monotonic() - decided)))
        nodes = {n: list(g) for n, g in sorted(placement.items())}
        wl = self._record(wl, placement={"nodes": nodes, "since": since})
        where = ", ".join(f"{n} ({len(g)} GPUs)" for n, g in nodes.items())
        text = f"chronus started it on {where} at {wls.rfc3339(since)}"
        for attempt in range(2):
            if (wls.check_entry(wl, self.checks) or {}).get("state") == "Ready":
                return
            try:
                self._startable(job_id, wl, placement)
            except BackendUnavailable:
                self._record(wl, placement=None, now=False)  # not started: no run recorded
                raise
            version = wls.meta(wl).get("resourceVersion")
            try:
                self._check(wl, "Ready", text, wls.pin(sets, selector), version=version)
                return
            except Conflict:
                if attempt:
                    raise
                wl = self._fresh(job_id)
                if wl is None:
                    raise BackendUnavailable(f"kueue: workload of job {job_id} is gone") from None

    def _startable(self, job_id: str, wl: dict, placement: Mapping[str, tuple[int, ...]]) -> None:
        """Raise unless ``wl`` may start on ``placement``: Kueue holds its quota now, for as
        many GPUs as the placement has (chronus never starts more than Kueue reserved)."""
        if not wls.reserved(wl):
            raise BackendUnavailable(
                f"kueue: job {job_id}: Kueue holds no quota for it now (requeued after an "
                "eviction?); chronus starts only Workloads with QuotaReserved"
            )
        reserved, asked = wls.gpus(wl, self.resource), sum(len(g) for g in placement.values())
        if asked != reserved:
            raise BackendUnavailable(
                f"kueue: job {job_id}: the plan starts it on {asked} GPUs, Kueue reserved "
                f"{reserved}; it is planned again at Kueue's count"
            )

    def _requeued(self, wl: dict) -> bool:
        """Whether Kueue holds quota for ``wl`` and is done with any ``Retry`` chronus set on
        it (a start withdrawn in the round's own look is re-planned at once, and its copy
        still said reserved before Kueue evicted it: the start failed the round)."""
        entry = wls.check_entry(wl, self.checks) or {}
        return wls.reserved(wl) and entry.get("state") != "Retry"

    def _await_reservation(self, job_id: str, wl: dict) -> dict | None:
        """Wait up to ``RESERVE_WAIT`` wall seconds for Kueue to reserve quota again: a
        Workload chronus preempted is requeued at once, but its new reservation takes Kueue a
        moment, often until the GPUs the round just freed are released in its books too.
        Watched, not read: the start writes ``Ready`` only at the resourceVersion of a
        Workload the API server answered reserved (``_start``), so a copy is enough here."""
        end = time.monotonic() + RESERVE_WAIT
        ns, name = wls.key(wl)
        while time.monotonic() < end:
            time.sleep(0.1)
            wl = self.watches.stores["workloads"].get(f"{ns}/{name}")
            if wl is None or self._requeued(wl):
                return wl if wl is None else self._seen(job_id, wl)
        return None

    def _gang_label(self, job_id: str) -> str:
        return notes.PREFIX + "gang-" + hashlib.sha256(job_id.encode()).hexdigest()[:16]

    def preempt(self, job_id: str) -> None:
        with self.writes.urgent():
            self._preempt(job_id)

    def _preempt(self, job_id: str) -> None:
        self._require_leader()
        wl = self._fresh(job_id)
        if wl is None:
            return
        entry = wls.check_entry(wl, self.checks) or {}
        nodes, since = wls.placement(wl)
        if entry.get("state") != "Ready":
            return
        done, runs = wls.work_done(wl)
        if since is not None:
            began = self._run_start(job_id, wl, since, [])
            done += 0.0 if began is None else max(self.now() - began, 0.0)
            runs += 1
        # The check first: a crash between the two leaves a stopped run uncounted (less work
        # credited, never more), while a Ready check without its placement would look pending.
        wl = self._check(
            wl,
            "Retry",
            f"chronus preempted it at {wls.rfc3339(self.now())} (lease boundary): Kueue suspends "
            f"the Job and requeues it; it resumes when chronus's plan says",
        )
        self._record(wl, work_done=wls.done_record(wl, done, runs), placement=None, now=False)
        self._unlabel(job_id, nodes)

    def cancel(self, job_id: str) -> None:
        wl = self._fresh(job_id)
        if wl is None or not wls.active(wl) or wls.is_true(wl, "Finished"):
            return
        self._require_leader()
        self._check(wl, "Rejected", "chronus: cancelled through chronus's API")

    # -- what users see ----------------------------------------------------------------------------
    def publish(self, reports: Mapping[str, JobReport]) -> None:
        """Record each promise on its Workload, then say the decision in the check's message
        (the record first: a promise a user can read is always one a new leader can rebuild).
        Both are queued (``writes.py``): they never delay the next round's starts."""
        with self._failed_lock:
            failed, self._failed = self._failed, set()
        for job_id in failed:  # its message did not land: said again below
            self._shown.pop(job_id, None)
        now = self.now()
        self._listed_at = -float("inf")  # picked anew: with the writes landed since the look
        listed = self._ours()
        for job_id, report in reports.items():
            wl = listed.get(job_id)
            fields = None if wl is None else wls.accepted(wl)
            if fields is None:
                continue
            promise = report.guaranteed
            recorded = wls.guarantee(wl, fields)
            if promise != recorded or (promise is None and wls.GUARANTEE in wls.records(wl)):
                # (a record that is no promise of chronus's, damaged or not its own, goes too)
                self._require_leader()
                value = None if promise is None else {"at": promise.at, "value": promise.value}
                was = None if recorded is None else {"at": recorded.at, "value": recorded.value}
                log.info(
                    json.dumps(
                        {"event": "kueue_guarantee", "job": job_id, "from": was, "to": value}
                    )
                )
                wl = self._record(wl, guarantee=value, now=False)
            entry = wls.check_entry(wl, self.checks)
            if entry is None or entry.get("state") not in ("Pending", "Ready"):
                continue
            text = resize_note(wl) + message(report, wls.deadline_passed(wl))
            if entry.get("state") == "Ready":
                text = entry.get("message", "").split("; ", 1)[0] + "; " + text
            queued = self.writes.message(job_id)
            says = entry.get("message") if queued is None else queued
            if says == text:
                continue
            written, shown = self._shown.get(job_id, (None, None))
            if (
                written == says
                and resize_note(wl) in (written or "")
                and not material(shown, report, now)
            ):
                continue  # the message is this process's own and still says the decision
            self._require_leader()
            self._check(wl, entry["state"], text, entry.get("podSetUpdates"), now=False)
            self._shown[job_id] = (text, report)
        self._shown = {i: v for i, v in self._shown.items() if i in reports}


def _arriving(wl: dict, checks: frozenset[str]) -> bool:
    """Whether chronus takes ``wl`` in now: not accepted or refused yet, its check
    ``Pending``, Kueue's quota reserved, active, not deleted or finished."""
    if wls.accepted(wl) is not None or wls.REFUSED in wls.annotations(wl):
        return False
    entry = wls.check_entry(wl, checks)
    if entry is None or entry.get("state") != "Pending" or not wls.reserved(wl):
        return False
    if not wls.active(wl) or wls.meta(wl).get("deletionTimestamp"):
        return False
    return not wls.is_true(wl, "Finished")


def _changed(records: Mapping[str, str], changes: Mapping[str, Any]) -> dict[str, str]:
    """Chronus's records with ``changes`` (keyword names: ``work_done`` is
    ``chronus.io/work-done``; None removes one)."""
    mine = dict(records)
    for name, value in changes.items():
        full = notes.PREFIX + name.replace("_", "-")
        if value is None:
            mine.pop(full, None)
        else:
            mine[full] = value if isinstance(value, str) else wls.encode(value)
    return mine


def material(shown: JobReport | None, report: JobReport, now: float) -> bool:
    """Whether ``report`` decides otherwise than ``shown``, the decision a check's message
    already says, enough to rewrite it: another guarantee, run state or refusal reason, or a
    planned start moved by more than ``MIN_SHIFT`` or ``SHIFT_SHARE`` of the time until it
    (backend time), whichever is more.

    Why a tolerance: the lease plan is recomputed every round and its starts drift as jobs run
    shorter or longer than estimated, so an exact message was rewritten nearly every round for
    every waiting Workload; each rewrite is an API write plus a Kueue reconcile, about 1 s each
    on a loaded control plane, and the 120x trace lost its deadlines to them (RESULTS.md, issue
    24). Why it scales: a start hours away is an estimate whose error is itself a share of the
    wait, so 10 % of it says nothing the user can act on; a start minutes away is shown to the
    minute. The guarantee, which is the promise, is always shown exactly (and recorded at once,
    whatever the message). Messages this process did not write (after a restart, or one Kueue
    reset) are rewritten when their text differs, so a restart costs at most one write each."""
    if shown is None:
        return True
    if (shown.guaranteed, shown.running, shown.reason) != (
        report.guaranteed,
        report.running,
        report.reason,
    ):
        return True
    old, new = shown.planned_start, report.planned_start
    if old is None or new is None:
        return old != new
    return abs(new - old) > max(MIN_SHIFT, SHIFT_SHARE * (min(old, new) - now))


def resize_note(wl: dict) -> str:
    """What the check's message says first once Kueue reserved the Workload again at another
    count (no semicolon: a started Workload's message is split at the first one)."""
    note = wls.resized(wl)
    if note is None:
        return ""
    return f"Kueue reserved it again at {note[1]} GPUs (was {note[0]}), planned at that size: "


def message(report: JobReport, passed: float | None = None) -> str:
    """The decision in words, for ``kubectl describe workload``; ``passed``: the last deadline
    the Job gave, which passed before Kueue reserved quota for it (it then said "best-effort
    job: no deadline to guarantee", as if the user had given none)."""
    if report.guaranteed is not None:
        text = f"guaranteed to finish by {wls.rfc3339(report.guaranteed.at)}"
        if report.guaranteed.value != 1:
            text += f" (deadline option of value {report.guaranteed.value:g})"
        if report.planned_start is not None:
            text += f"; planned start {wls.rfc3339(report.planned_start)}"
        return text
    reason = report.reason
    if passed is not None:
        reason = (
            f"its deadline {wls.rfc3339(passed)} passed before Kueue reserved quota for it, so "
            "it runs best-effort"
        )
    text = f"not guaranteed: {reason}"
    return text if report.running else text + "; waits for free GPUs"


def _unhealthy(node) -> str:
    """Why placement must avoid a node ('' if it may use it)."""
    why = []
    if node.spec is not None and node.spec.unschedulable:
        why.append("cordoned")
    ready = (
        next((c for c in (node.status.conditions or []) if c.type == "Ready"), None)
        if node.status
        else None
    )
    if ready is None or ready.status != "True":
        why.append("not Ready")
    for taint in (node.spec.taints or []) if node.spec else []:
        if taint.effect in _BAD_TAINTS and taint.key != "node.kubernetes.io/unschedulable":
            why.append(f"taint {taint.key}:{taint.effect}")
    return ", ".join(why)


def _in_cells(cells: Mapping[str, int], seen: Sequence[NodeInfo]) -> list[NodeInfo]:
    """The HiveD config's nodes as the cluster has them now: every cell node with the config's
    GPUs, unhealthy if it is missing or has fewer GPUs (the cell tree cannot change while
    serving; nodes outside it are not chronus's)."""
    found = {n.name: n for n in seen}
    out = []
    for name, gpus in cells.items():
        n = found.get(name)
        why = (
            "not in the cluster (no Node with allocatable GPUs matching the node selector)"
            if n is None
            else f"has {len(n.gpus)} GPUs, the config gives it {gpus}"
            if len(n.gpus) < gpus
            else n.reason
        )
        out.append(NodeInfo(name, tuple(range(gpus)), healthy=not why, reason=why))
    return out


def topology_mismatch(cells: Mapping[str, int], kube: Mapping[str, int]) -> str | None:
    """Why a HiveD config's nodes (name -> GPUs) are not chronus's Kubernetes nodes, or None."""
    return base.topology_mismatch(
        cells,
        kube,
        "Kubernetes",
        not_there="are not Kubernetes nodes with allocatable GPUs matching "
        f"--kueue-node-selector (there are: {', '.join(sorted(kube)) or 'none'})",
        leave_out=", or leave them out with --kueue-node-selector",
    )


# -- chronus serve --backend kueue ---------------------------------------------------------------
def _selector(text: str | None) -> dict[str, str]:
    out = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        k, eq, v = item.partition("=")
        if not eq or not k.strip():
            raise InputError("--kueue-node-selector", f"expected key=value, got {item!r}")
        out[k.strip()] = v.strip()
    return out


def _lease(text: str | None) -> tuple[str, str] | None:
    if not text:
        return None
    namespace, sep, name = str(text).partition("/")
    if not sep or not namespace or not name:
        raise InputError("--kueue-lease", f"expected NAMESPACE/NAME, got {text!r}")
    return namespace, name


def _flags(
    args: argparse.Namespace,
) -> tuple[float, float, dict[str, str], tuple[str, str] | None, float, float]:
    """The poll interval, time scale, node selector, lease, lease duration and start timeout
    the serve options give, or one line naming the flag at fault (before any cluster is
    asked)."""
    poll = 1.0 if args.kueue_poll is None else float(args.kueue_poll)
    scale = 1.0 if args.kueue_time_scale is None else float(args.kueue_time_scale)
    timeout = args.kueue_start_timeout
    timeout = binding.START_TIMEOUT if timeout is None else float(timeout)
    for flag, value in (
        ("--kueue-poll", poll),
        ("--kueue-time-scale", scale),
        ("--kueue-start-timeout", timeout),
    ):
        if not value > 0:
            raise InputError(flag, f"must be > 0, got {value}")
    if scale != 1.0 and args.kueue_time_origin is None:
        raise InputError("--kueue-time-origin", "required with --kueue-time-scale other than 1")
    lease = _lease(args.kueue_lease)
    duration = 15.0 if args.kueue_lease_duration is None else float(args.kueue_lease_duration)
    if lease is not None and not duration >= 0.5:
        raise InputError("--kueue-lease-duration", f"must be >= 0.5, got {duration}")
    return poll, scale, _selector(args.kueue_node_selector), lease, duration, timeout


def _permitted(kube: Kube, lease: tuple[str, str] | None) -> None:
    """One line naming what the kubeconfig's account may not do of what chronus does (before
    anything is read or written: ``serve`` and ``serve --check`` alike)."""
    missing = kube.missing_permissions(None if lease is None else lease[0])
    if missing:
        who = kube.account() or "the account it acts as"
        raise InputError(
            "--kubeconfig",
            f"{who} may not {', '.join(missing)} (deploy/kueue/controller.yaml's ClusterRole "
            "and Role grant what chronus needs)",
        )


def check(
    args: argparse.Namespace, *, nodes: Sequence[tuple[str, int]] | None = None
) -> dict[str, Any]:
    """What ``chronus serve --check`` reports for Kueue: the flags checked as ``serve`` checks
    them, the API server the kubeconfig names reached, and the AdmissionChecks that name
    chronus's controller (none: no Workload will ever wait for chronus). Without it a bad
    ``--kueue-poll`` or an API server out of reach printed 'config OK'. Nothing is written
    and no lease is taken."""
    lease = _flags(args)[3]
    cfg = config(args.kubeconfig)
    controller = args.kueue_controller_name or CONTROLLER
    kube = Kube(cfg, manager=FIELD_MANAGER)
    try:
        _permitted(kube, lease)
        kueue = kube.require_kueue()
        checks = kube.admission_checks()
    except BackendUnavailable as exc:
        raise InputError("--kubeconfig", f"cannot reach the API server or Kueue: {exc}") from None
    finally:
        kube.close()
    ours = sorted(
        c["metadata"]["name"]
        for c in checks
        if (c.get("spec") or {}).get("controllerName") == controller
    )
    if not ours:  # 'config OK' for a controller name no check uses: Workloads wait forever
        names = sorted({str((c.get("spec") or {}).get("controllerName")) for c in checks})
        raise InputError(
            "--kueue-controller-name",
            f"no AdmissionCheck has controllerName {controller}, so no Workload would wait for "
            "chronus: apply deploy/kueue/admissioncheck.yaml"
            + (f" (the cluster's checks name: {', '.join(names)})" if names else ""),
        )
    return {
        "api_server": cfg.cluster.server,
        "kueue_api": kueue.api_version,
        "controller": controller,
        "admission_checks": ours,
    }


def from_args(
    args: argparse.Namespace, *, db_path: Path, nodes: Sequence[tuple[str, int]] | None = None
) -> KueueBackend:
    """A Kueue backend from the serve options; with ``--kueue-lease`` this blocks until this
    replica leads. ``nodes`` (a HiveD config's, ``--cluster``) must be chronus's Kubernetes
    nodes with their allocatable GPUs when it starts: the cell tree then places jobs on them
    by name."""
    poll, scale, selector, lease, duration, timeout = _flags(args)
    cfg = config(args.kubeconfig)  # the flags first: a bad one is refused without a cluster
    for name in ("httpx", "httpx2", "httpcore", "httpcore2"):  # a line per request otherwise
        logging.getLogger(name).setLevel(logging.WARNING)
    elector = None
    if lease is not None:
        elector = LeaderElector(
            Kube(cfg, manager=FIELD_MANAGER),
            namespace=lease[0],
            name=lease[1],
            duration=duration,
            renew_deadline=duration * 2 / 3,
            retry=duration * 2 / 15,
        )
    kube = Kube(cfg, manager=FIELD_MANAGER)
    try:
        _permitted(kube, lease)
        kube.require_kueue()
        kube.admission_checks()
    except BackendUnavailable as exc:
        raise InputError("--kubeconfig", f"cannot reach the API server or Kueue: {exc}") from None
    if elector is not None:
        elector.acquire()
    try:
        backend = KueueBackend(
            kube,
            controller=args.kueue_controller_name or CONTROLLER,
            resource=args.kueue_gpu_resource or GPU,
            node_selector=selector,
            poll=poll,
            time_scale=scale,
            time_origin=float(args.kueue_time_origin or 0.0),
            elector=elector,
            topology=None if nodes is None else dict(nodes),
            start_timeout=timeout,
        )
    except BackendUnavailable as exc:
        error = ChronusError(f"--backend kueue: cannot read the cluster: {exc}")
        error.exit_code = 1
        raise error from None
    if nodes is not None:
        why = topology_mismatch(dict(nodes), {n.name: len(n.gpus) for n in backend.cluster_nodes()})
        if why is not None:
            backend.close()
            raise InputError("--cluster", why)
    return backend
