"""Whether kube-scheduler bound the pods of a Workload chronus started, and what a start whose
pods it did not bind costs the nodes it was planned on.

Why: chronus plans GPUs only, and its start is a nodeSelector Kueue merges into the Job's pods
(``backend.py``); kube-scheduler still has the last word. A pod pinned to a node whose CPU,
memory or ephemeral storage non-GPU pods hold (``Insufficient cpu``), a node tainted since, a
GPU pod of another's bound in the second before chronus's pod watch saw it, or the user's own
nodeSelector or affinity contradicting chronus's node, left the pods Pending for ever while
chronus counted the Workload running: its GPUs used, its work credited, its promise silently
broken. The Slurm backend's analogue is ``SlurmBackend._settle`` and its ``start_timeout``.

The rules (``KueueBackend._binding`` applies them):

- **A start binds within** ``start_timeout`` wall seconds of its record (``chronus.io/placement``
  ``since``; so a restarted or newly elected controller checks the same runs), or of the last
  look that saw GPU pods still terminating on its nodes (``pods.ending_nodes``: the runs it
  displaced, which kube-scheduler counts for their termination grace; a training job's is often
  minutes, so with the 30 s timeout every start that preempted one was withdrawn, its nodes
  held off, and after three such starts the Workload refused), or it is
  withdrawn as a preemption is (check ``Retry``: Kueue evicts and requeues it) with no work
  credited for the run, a Warning Event ``ChronusStartWithdrawn`` on its Job saying why, and
  the service, which then sees it pending, re-plans it.
- **Which pods**: the started Workload's GPU pods as the pod watch holds them (bound, not
  terminal: ``pods.BOUND``); only when fewer are there than its pod sets count, after the
  timeout, are the Job's pods listed once (one request; a Job whose pods already finished is
  then seen to have been bound, and not listed again). So a start that binds costs no request,
  and a look parses no record of a run already checked.
- **The nodes it blames** (:func:`unbound`): the placed nodes holding fewer of the Workload's
  GPUs than chronus placed there, when a pod is ``Unschedulable``; they are unhealthy with
  kube-scheduler's own message (the pod's ``PodScheduled`` condition) for a hold-off of
  :data:`HOLD_FACTOR` start timeouts, doubled for each further start that fails there in a row
  (at most :data:`HOLD_MAX`), and healthy again when it ends: chronus cannot see what blocks a
  node (a CPU-holding pod asks no GPU, so its watch ignores it), and a start that then binds
  there forgets the node's failures. Pods missing, or not yet tried by kube-scheduler, blame no
  node.
- **A Workload that binds nowhere** is refused once :data:`MAX_FAILED` of its starts in a row
  failed (counted by this process: a restart counts afresh), in one line on the Workload and
  as a Warning Event on its Job, never started again.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from chronus_py.backends.kueue.workloads import pod_gpus

START_TIMEOUT = 30.0  # wall seconds (``--kueue-start-timeout``), as the Slurm backend's
HOLD_FACTOR = 10  # a blamed node's first hold-off, in start timeouts (5 min by default)
HOLD_MAX = 3600.0  # wall seconds: the longest hold-off, however often starts fail there
MAX_FAILED = 3  # failed starts in a row after which a Workload is refused
MESSAGE_CHARS = 300  # of kube-scheduler's message, in a node's reason or a refusal


@dataclass(frozen=True, slots=True)
class Unbound:
    """A started Workload whose pods kube-scheduler did not bind: ``waiting`` of ``pods`` pods
    not bound (or not created), kube-scheduler's ``message`` for one that it could not
    schedule ('' if none says so), and the ``nodes`` that blames."""

    waiting: int
    pods: int
    message: str
    nodes: tuple[str, ...]

    def why(self) -> str:
        """The start's failure in words (a check message, a log line)."""
        said = f"kube-scheduler: {self.message}" if self.message else "none is Unschedulable yet"
        return f"{self.waiting} of its {self.pods} pods not bound ({said})"


def scheduler_message(pod: Mapping[str, Any]) -> str:
    """kube-scheduler's reason for not binding ``pod`` (its ``PodScheduled`` condition, False,
    ``Unschedulable``): its first sentence, the nodes' reasons (what follows, on Kubernetes
    1.35 ``no new claims to deallocate, preemption: 0/4 nodes are available: ...``, is about
    what preemption could do); '' if it says none."""
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            if c.get("reason") != "Unschedulable":
                return ""
            text = str(c.get("message") or "").split(". ", 1)[0].strip()
            return text.rstrip(".")[:MESSAGE_CHARS]
    return ""


def unbound(
    pods: Iterable[Mapping[str, Any]], placed: Mapping[str, int], expected: int, resource: str
) -> Unbound | None:
    """None if the pods of a Job (all of them, as listed) were bound: as many as its Workload's
    GPU pod sets count (``expected``), none waiting for a node. Else what is missing, and the
    nodes to blame: those of ``placed`` (node -> GPUs chronus placed there) that hold fewer of
    the Job's GPUs than placed, if kube-scheduler said a pod could not be scheduled."""
    live = [p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")]
    live = [p for p in live if pod_gpus(p, resource) >= 1]
    held: dict[str, int] = defaultdict(int)
    waiting, message = 0, ""
    for p in live:
        node = (p.get("spec") or {}).get("nodeName")
        if node:
            held[node] += pod_gpus(p, resource)
        elif (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            waiting += 1
            message = message or scheduler_message(p)
    waiting += max(expected - len(live), 0)
    if not waiting:
        return None
    nodes = tuple(n for n, gpus in sorted(placed.items()) if held[n] < gpus) if message else ()
    return Unbound(waiting, max(expected, len(live)), message, nodes)


@dataclass(slots=True)
class _Hold:
    reason: str
    until: float  # time.monotonic()
    strikes: int  # failed starts there in a row


class Holds:
    """The nodes that take no new work because a start's pods were not bound there, with why
    and until when (monotonic seconds); each a hold-off of ``HOLD_FACTOR`` start timeouts,
    doubled per further failure in a row, at most ``HOLD_MAX``."""

    def __init__(self, start_timeout: float):
        self.start_timeout = start_timeout
        self._holds: dict[str, _Hold] = {}

    def failed(self, node: str, reason: str, now: float) -> float:
        """A start's pods were not bound on ``node``: hold it off; the hold-off's seconds."""
        old = self._holds.get(node)
        strikes = 1 if old is None else old.strikes + 1
        hold = min(self.start_timeout * HOLD_FACTOR * 2 ** (strikes - 1), HOLD_MAX)
        self._holds[node] = _Hold(reason, now + hold, strikes)
        return hold

    def bound(self, nodes: Iterable[str]) -> None:
        """A start's pods were bound on ``nodes``: their failures are forgotten."""
        for node in nodes:
            self._holds.pop(node, None)

    def reasons(self, now: float) -> dict[str, str]:
        """Node -> why it takes no new work, for the nodes held off at ``now``."""
        return {n: h.reason for n, h in self._holds.items() if h.until > now}
