"""The ``slurm`` backend: chronus decides, a real Slurm cluster runs, through slurmrestd.

Users submit as they are used to, with ``sbatch --hold`` and the chronus marker in ``--comment``
(``marker.py``); jobs submitted through chronus's API become such held jobs too. Chronus never
touches a job without the marker. The mapping of decisions to Slurm:

- start: release the held job onto the planned node(s) (``nodelist``, ``hold: false``; after a
  preemption also ``begin_time: now``); the next observation first waits until Slurm shows it
  RUNNING (or holds it again after ``start_timeout``). Slurm chooses the
  GPU indices inside a node (untyped GRES cannot be pinned on a pending job); the backend reports
  the indices Slurm chose, as it reports everything it observes.
- preempt: signal the job (``--slurm-signal``, default USR1) so it can checkpoint; once
  ``--slurm-grace`` seconds have passed, record the work done in the comment, then ``scontrol
  requeuehold`` (slurmrestd v0.0.38 has no requeue), and wait until the job has left its GPUs.
  The wait happens before the next start or observation, so every job one round preempts shares
  one grace: preempting four jobs for a wide one takes 30 s with the default grace, not 2 min
  (during which the service, holding its round, would answer no request).
- cancel: ``DELETE /job/{id}``. A job cancelled in Slurm (``scancel``) is a cancelled chronus job.
- nodes: the partition's nodes with their GPU count; a down, drained, draining, failing or
  unresponsive node is unhealthy, and so is one where a job chronus does not run holds GPUs.

All the state lives in Slurm: which jobs chronus has taken (``accepted`` in the comment) and the
submit time they had then (``submit=``: with the Slurm id, it names the job in chronus, since a
controller that lost its state gives its ids out again), where they run, their run count
(``restart_cnt``) and the work of their past runs (``done=`` in the comment). So a restarted
daemon rebuilds from Slurm alone, and a start is idempotent: a job that runs is never released
again. A job chronus took that Slurm no longer lists (its controller lost its state) has
failed. A marked job that Slurm would start on its own (released by hand, or requeued after a
node failure) is held again, since only chronus places it.

Every REST failure is retried with backoff (``rest.py``) and then raised as
:class:`BackendUnavailable`, so the service decides nothing until Slurm answers again.
"""

from __future__ import annotations

import argparse
import getpass
import json
import logging
import math
import os
import re
import signal
import subprocess
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from chronus_py.backends import base
from chronus_py.backends.base import BackendUnavailable, NodeInfo, ObservedJob, RunState
from chronus_py.backends.slurm import marker
from chronus_py.backends.slurm.model import (
    JobChange,
    NewJob,
    SlurmJob,
    SlurmNode,
    SlurmReservation,
)
from chronus_py.backends.slurm.rest import SlurmError, SlurmRest, SlurmUnreachable, parse_endpoint
from chronus_py.errors import InputError
from chronus_py.jobs.model import Job
from chronus_py.service.clock import CompressedTime
from chronus_py.service.jobspec import in_terms, shown

CANNOT_RESIZE = "it starts each job at one size and has no command to resize a running one"

_RUNNING = {"RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING", "RESIZING"}
_ENDED = {"COMPLETED": RunState.FINISHED, "CANCELLED": RunState.CANCELLED}
_UNHEALTHY_STATES = {"down", "drained", "draining", "fail", "failing", "future", "unknown"}
_UNHEALTHY_FLAGS = {
    "DRAIN",
    "DRAINED",
    "DRAINING",
    "FAIL",
    "NOT_RESPONDING",
    "MAINTENANCE",
    "REBOOT_REQUESTED",
    "POWERED_DOWN",
    "POWER_DOWN",
}

log = logging.getLogger("chronus.slurm")

_MARKER_KEYS = {
    "estimate_seconds": "estimate",
    "deadlines": "deadline",
    "gpus": "--gres",
    "tenant": "account",  # the job's Slurm account (else its user) is its tenant
}
"""The marker's key (or sbatch's option) behind a field of ``POST /v1/jobs``, to name it in a
refusal the user reads in their job's comment."""

_GROUPS = {
    "array": "--array: chronus places one job per submission (a released array started all its "
    "tasks on GPUs chronus counted once); submit each task as its own job",
    "heterogeneous": "a heterogeneous job (sbatch ... : ...): chronus places one group of nodes "
    "per job; submit each component as its own job",
}
"""Why a job that is one of several under one submission is refused (``SlurmJob.group``)."""

_STARTING = {"None", "", "Priority", "Resources"}
"""Slurm's reasons for a released job still pending that it is about to start (its scheduling
pass has not run yet, or the GPUs of a job just stopped are not free yet): the start waits for
it, up to ``start_timeout``. Any other reason (Dependency, BadConstraints, ReqNodeNotAvail,
Reservation, PartitionTimeLimit, a QOS or association limit, ...) says Slurm will not start it
now: it is held again at once, where waiting out the timeout held up every round (30 s) that
started it."""

_NEVER = {"PartitionTimeLimit": "--time", "DependencyNeverSatisfied": "--dependency"}
"""Reasons Slurm gives for never running a released job, whatever its nodes, with the sbatch
option behind each: the job is refused (the reason in its comment), not held and started again
in every round. (PartitionNodeLimit is not one: chronus's own split of a job over nodes can
cause it.)"""

LATENCY_SAMPLES = 20
"""Starts the start latency is the longest of: recent enough to follow the cluster's load."""

DEFAULT_SCRIPT = """#!/bin/sh
# chronus API job: a stand-in workload of CHRONUS_DURATION_SECONDS seconds of work, done in
# 1-second steps, each checkpointed in the working directory. It does what a job script under
# chronus must do: trap the checkpoint signal (USR1) rather than die of it, keep its progress
# where a requeued run finds it, resume from there ($SLURM_RESTART_COUNT > 0), and never exit 0
# before its work is done. Slurm signals every process of the job and a child does not keep
# the trap, so the checkpoint is read with the read builtin, not $(cat ...) (killed, it reads
# as no progress), and a step whose sleep the signal cut short is done again.
ckpt="$PWD/chronus-ckpt-$SLURM_JOB_ID"
total="${CHRONUS_DURATION_SECONDS:-60}"
done=0
trap 'echo "checkpoint signal: $done s done"' USR1
if [ -f "$ckpt" ]; then read -r done < "$ckpt" || exit 1; fi
for n in "$done" "$total"; do
    case "$n" in ''|*[!0-9]*) echo "not a whole number of seconds: '$n'" >&2; exit 1;; esac
done
echo "run ${SLURM_RESTART_COUNT:-0} of $CHRONUS_JOB_ID from $done s"
while [ "$done" -lt "$total" ]; do
    if sleep 1; then
        done=$((done + 1))
        echo "$done" > "$ckpt.new" && mv "$ckpt.new" "$ckpt"
    fi
done
rm -f "$ckpt"
"""


def trouble(n: SlurmNode) -> str:
    """Why placement must not use a node (empty: it may): down, drained, draining, failing,
    unresponsive, ..., with Slurm's reason."""
    bad = sorted({n.state} & _UNHEALTHY_STATES | set(n.flags) & _UNHEALTHY_FLAGS)
    return "" if not bad else "/".join(bad) + (f": {n.reason}" if n.reason else "")


def holding(j: SlurmJob) -> tuple[str, ...]:
    """The nodes where a listed job holds GPUs now: running (or finishing) with GPUs, or
    ``--exclusive`` (every GPU of its nodes); a COMPLETING job still holds them although Slurm
    no longer lists their indices."""
    if j.state not in _RUNNING:
        return ()
    if j.exclusive or j.gpus_per_node or j.gpus_per_job:
        return j.nodes
    return tuple(n for n, gpus in j.placement.items() if gpus)


def held_by(slurm_ids: Sequence[int]) -> str:
    """A node's reason while jobs chronus does not run hold GPUs there, naming them (sorted,
    so it reads the same while they run)."""
    jobs = "job" if len(slurm_ids) == 1 else "jobs"
    return f"GPUs held by Slurm {jobs} {', '.join(map(str, sorted(slurm_ids)))}, not chronus's"


def _until(r: SlurmReservation) -> str:
    """`` until`` a reservation's end, in UTC; empty for one without an end."""
    if not math.isfinite(r.end_time):
        return ""
    return time.strftime(" until %Y-%m-%dT%H:%M:%SZ", time.gmtime(r.end_time))


def _fail(what: str, exc: Exception) -> BackendUnavailable:
    return BackendUnavailable(f"slurm: {what}: {exc}")


def chronus_id(j: SlurmJob) -> str:
    """A marked Slurm job's id in chronus, read from Slurm alone (``marker.job_id``; a
    MarkerError if its marker does not read): what the tests, the demo and the benchmarks
    match Slurm's jobs to chronus's by."""
    return marker.job_id(marker.parse(j.comment), j.id, j.submit_time)


@dataclass(frozen=True, slots=True)
class _Taken:
    """A job this backend has seen accepted: its marker, and the submit time and run count
    Slurm showed then, which tell it apart from a new job given its id (a controller that lost
    its state numbers jobs from ``FirstJobId`` again)."""

    marker: marker.Marker
    submitted: float
    restarts: int

    def same(self, j: SlurmJob) -> bool:
        """Whether ``j`` is this job: Slurm stamps a job's submit time anew only when it
        requeues it, which counts one more restart."""
        return j.submit_time == self.submitted or j.restart_cnt > self.restarts


class SlurmBackend(CompressedTime):
    """Drive the Slurm cluster behind ``rest``; ``partition`` limits nodes and jobs to one
    partition (None: every node, every partition)."""

    name = "slurm"
    even_gangs = True  # a job asks the same --gres=gpu:N of every node it spans
    whole_pods = False  # ... so Slurm runs a 4-GPU job as 2 + 2 on two nodes
    forgets_ended_jobs = True  # MinJobAge after a job ends; a controller that lost its state

    def __init__(
        self,
        rest: SlurmRest,
        *,
        partition: str | None = None,
        grace: float = 30.0,
        signal: str = "USR1",
        poll: float = 2.0,
        start_timeout: float = 30.0,
        scontrol: str = "scontrol",
        script: str = DEFAULT_SCRIPT,
        workdir: str = "/tmp",
        env: Mapping[str, str] | None = None,
        time_scale: float = 1.0,
        time_origin: float = 0.0,
    ):
        self.rest = rest
        self.partition = partition
        self.grace = grace
        self.signal = signal
        self.poll = poll
        self.scale = time_scale
        self.origin = time_origin
        self.start_timeout = start_timeout
        self.scontrol = scontrol
        self.script = script
        self.workdir = workdir
        self._env = dict(os.environ if env is None else env)
        # Slurm id -> (monotonic deadline to be running, wall time its start was decided, wall
        # seconds its round's starts had waited then for the grace of the jobs they displaced)
        self._released: dict[int, tuple[float, float, float]] = {}
        self._graced = 0.0  # that wait so far in this round (``_stop``; reset by ``jobs``)
        # Slurm id -> (monotonic end of its grace, its marker when signalled, wall time signalled)
        self._stopping: dict[int, tuple[float, marker.Marker, float]] = {}
        self._latencies: deque[float] = deque(maxlen=LATENCY_SAMPLES)
        self._observed: deque[float] = deque(maxlen=2)  # wall times of the last two ``jobs`` looks
        self._requeued: dict[int, float] = {}  # Slurm id -> wall time its requeue was done
        self._placements: dict[int, dict[str, tuple[int, ...]]] = {}  # last seen while running
        # Slurm id -> (the placement its start asked for, wall time of its release). Slurm
        # honours a start's nodes and GPU count per node but picks the GPU indices itself (a
        # request cannot name them); a job running as released is reported where chronus
        # placed it, so indices alone never look like a move, which made the service rebuild
        # its scheduler and re-plan mid-lease. Its run began after its release, although
        # Slurm stamps the start in whole seconds (up to a second earlier: two minutes at
        # 120x), so the service always sees when it began (``Service._observe``).
        self._asked: dict[int, tuple[dict[str, tuple[int, ...]], float]] = {}
        # chronus id -> how it ended, for jobs Slurm no longer lists as chronus's (forgotten,
        # see submit; gone, see jobs; refused at their start, see _settle)
        self._vanished: dict[str, RunState] = {}
        self._nodes_seen: dict[str, tuple[int, ...]] = {}  # every node ``nodes`` has listed
        self._taken: dict[int, _Taken] = {}  # Slurm id -> the job when last seen accepted
        self._active: set[str] = set()  # chronus ids ``jobs`` last saw pending or running
        self._states: dict[int, str] = {}  # Slurm id -> state, of every job the last listing had
        self._listed = False  # whether ``_marked`` has listed the jobs once
        # node -> Slurm ids of the jobs chronus does not run that hold GPUs there, from the
        # last listing of every job (``_marked``; ``nodes`` reads it, see there)
        self._foreign: dict[str, list[int]] = {}
        self._ids: dict[str, int] = {}  # chronus id -> Slurm id, from the last listings
        # The listing ``look`` (or else ``arrivals``) took and its wall time, for the same
        # round's ``arrivals`` and ``jobs``: a round lists every job twice otherwise (arrivals,
        # then observation), and a v0.0.42 listing of 200 jobs takes a third of a second
        # (benchmarks/slurm_listing.py). Dropped by every command that changes a job chronus
        # lists (see ``_changing``) and used by one ``jobs``, so ``jobs`` sees what the round
        # itself did; a job that ends meanwhile is seen at the next round's look.
        self._shared: (
            tuple[list[tuple[SlurmJob, marker.Marker | None, marker.MarkerError | None]], float]
            | None
        )
        self._shared = None
        self._unread = False  # the shared listing is a ``look`` no ``arrivals`` read yet

    def close(self) -> None:
        """Nothing to release: every request opens its own connection."""

    def start_latency(self) -> float:
        """Chronus seconds from the moment the plan had a job start to it running: the longest
        of the last :data:`LATENCY_SAMPLES` starts (noticing the freed GPUs or the arrival, up
        to one observation period, the round's solve, the release, Slurm's scheduling pass and
        launch; one poll before the first), plus the grace of the jobs a start displaces,
        which it waits out (wall seconds times the time scale). A sample leaves that wait out,
        so it is not charged twice. Before, the grace was charged only while a start that
        displaced jobs was among the last samples: after as many starts that displaced none, a
        guarantee planned as late as its deadline allowed began one grace late."""
        return (max(self._latencies, default=self.poll) + self.grace) * self.scale

    # -- reading Slurm -----------------------------------------------------------------------------
    def _slurm(self, what: str, call, *args):
        try:
            return call(*args)
        except (SlurmUnreachable, SlurmError) as exc:
            raise _fail(what, exc) from None

    def nodes(self) -> Sequence[NodeInfo]:
        """The partition's nodes; one it listed before and no longer does (taken out of the
        partition, or out of Slurm) stays, unhealthy: the service keeps a node it is not told
        about as it was, and a start there never ran (Slurm: BadConstraints), waited out the start
        timeout (30 s of the round) and was held again, in every round that planned one. A node
        in a reservation that holds it now is unhealthy too: Slurm starts there no job submitted
        outside it (ReqNodeNotAvail), and chronus refuses jobs submitted into one. So is a node
        where a job chronus does not run holds GPUs (no marker, a foreign comment, another
        partition, released by hand before chronus took it), until it ends: chronus would
        count those GPUs free, and a start planned on them pended (Resources), waited out the
        start timeout and was held again, round after round. The holders come from the last
        listing of the jobs (at most one round old), not from a request of their own.

        A reservation yet to start takes its nodes from the moment a job started now may run
        into it: Slurm starts no job there whose time limit reaches its start
        (ReqNodeNotAvail), and every round that planned one there held it again and resynced
        (with an INFINITE MaxTime, from the moment the reservation is made). The reason names
        the reservation's start and end, so it reads the same in every round; the
        partitions' MaxTime is asked only while such a reservation exists."""
        now = time.time()
        reservations = self._slurm("list reservations", self.rest.reservations)
        reserved = {
            node: r for r in reservations if r.start_time <= now < r.end_time for node in r.nodes
        }
        upcoming: dict[str, SlurmReservation] = {}
        for r in sorted(reservations, key=lambda r: r.start_time, reverse=True):
            if now < r.start_time:
                upcoming.update((node, r) for node in r.nodes)  # the first to start wins
        longest: dict[str, float] | None = None  # partition -> MaxTime, read once if needed
        out = []
        for n in self._slurm("list nodes", self.rest.nodes):
            if self.partition is not None and self.partition not in n.partitions:
                continue
            why = trouble(n)
            if not why and n.name in reserved:
                r = reserved[n.name]
                why = f"in reservation {r.name}{_until(r)}"
            if not why and n.name in upcoming:
                if longest is None:
                    partitions = self._slurm("list partitions", self.rest.partitions)
                    longest = {p.name: p.max_time for p in partitions}
                mine = [self.partition] if self.partition is not None else n.partitions
                r = upcoming[n.name]
                if r.start_time <= now + max((longest.get(p, math.inf) for p in mine), default=0):
                    start = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(r.start_time))
                    why = (
                        f"reservation {r.name} from {start}{_until(r)}: a job started now may "
                        f"run into it"
                    )
            if not why and n.name in self._foreign:
                why = held_by(self._foreign[n.name])
            out.append(NodeInfo(n.name, tuple(range(n.gpus)), healthy=not why, reason=why))
        listed = {n.name for n in out}
        where = f"partition {self.partition}" if self.partition is not None else "Slurm"
        for name, gpus in self._nodes_seen.items():
            if name not in listed:
                out.append(NodeInfo(name, gpus, healthy=False, reason=f"no longer in {where}"))
        self._nodes_seen.update((n.name, n.gpus) for n in out)
        return out

    def _marked(self) -> list[tuple[SlurmJob, marker.Marker | None, marker.MarkerError | None]]:
        """Every job with the marker in our partition: (job, parsed marker or None, error).
        The same listing says which jobs chronus does not run hold GPUs where (``nodes``):
        any job not accepted here, whatever its partition (a node may be in several)."""
        out = []
        states = {}
        holders: dict[str, list[int]] = {}
        for j in self._slurm("list jobs", self.rest.jobs):
            states[j.id] = j.state
            for node in holding(j):
                holders.setdefault(node, []).append(j.id)
            if not marker.is_marked(j.comment):
                continue
            if self.partition is not None and j.partition != self.partition:
                continue
            m, exc = self._read(j)
            if exc is not None:
                out.append((j, None, exc))
                if exc.accepted:  # chronus's job, whose owner edited the marker since
                    job_id = self._error_id(j, exc)
                    self._ids[job_id] = max(self._ids.get(job_id, 0), j.id)
                continue
            out.append((j, m, None))
            job_id = self._chronus_id(j, m)
            self._ids[job_id] = max(self._ids.get(job_id, 0), j.id)
        self._listed = True  # jobs accepted before this listing were accepted before a restart
        self._states = states
        mine = {
            j.id
            for j, m, exc in out
            if (m is not None and m.accepted) or (exc is not None and exc.accepted)
        }
        self._foreign = {
            node: others for node, ids in holders.items() if (others := sorted(set(ids) - mine))
        }
        return out

    @staticmethod
    def _copied(j: SlurmJob, m: marker.Marker) -> bool:
        """Whether an accepted marker this backend has not seen before, on a held job that has
        never run, was written by its owner (``sbatch --comment`` copied from an old job's
        ``scontrol show job``): chronus accepts a job it was already listing, and writes
        ``id=`` on every job it submits itself."""
        return j.held and j.restart_cnt == 0 and "id" not in m.user

    def _read(self, j: SlurmJob) -> tuple[marker.Marker | None, marker.MarkerError | None]:
        """A marked job's marker, or why it cannot be read. A job this backend has seen
        accepted is chronus's even when its owner has since rewritten the comment without
        chronus's fields (``| accepted done=...``): they are written back, or, if the owner's
        fields no longer read, the error says it was accepted (``jobs`` then refuses it).
        Taken for a new arrival, it was refused as a taken id in every round while held, and
        once released, never seen running or ending by the service."""
        taken = self._taken.get(j.id)
        if taken is not None and (
            j.state not in _RUNNING and j.state != "PENDING" or not taken.same(j)
        ):
            del self._taken[j.id]  # over, or another job with its id: nothing to write back
            taken = None
        try:
            m = marker.parse(j.comment)
            if taken is not None and not m.accepted:
                marker.room(m.user)
        except marker.MarkerError as exc:
            if taken is not None:
                exc.accepted = True
                exc.job_id = exc.job_id or marker.job_id(taken.marker, j.id, j.submit_time)
            return None, exc
        if m.accepted and taken is None and self._listed and self._copied(j, m):
            m = marker.Marker(m.user)  # a new job, read as one
            log.warning(json.dumps({"event": "slurm_marker_copied", "slurm_job": j.id}))
            try:
                self.rest.update(j.id, JobChange(comment=marker.render(m.user, accepted=False)))
            except SlurmError:
                pass  # it ended meanwhile
            except SlurmUnreachable as exc:
                raise _fail(f"rewrite the marker of job {j.id}", exc) from None
            return m, None
        if m.accepted:
            if j.state in _RUNNING or j.state == "PENDING":
                self._taken[j.id] = _Taken(m, j.submit_time, j.restart_cnt)
            return m, None
        if taken is None:
            return m, None
        was = taken.marker
        m = marker.Marker(m.user, True, was.done, was.done_run, was.submit)
        comment = marker.render(
            m.user, accepted=True, done=m.done, done_run=m.done_run, submit=m.submit
        )
        log.warning(json.dumps({"event": "slurm_marker_restored", "slurm_job": j.id}))
        try:
            self.rest.update(j.id, JobChange(comment=comment))
        except SlurmError:
            pass  # it ended meanwhile, or the next listing writes it again
        except SlurmUnreachable as exc:
            raise _fail(f"restore the marker of job {j.id}", exc) from None
        self._taken[j.id] = _Taken(m, j.submit_time, j.restart_cnt)
        return m, None

    @staticmethod
    def _chronus_id(j: SlurmJob, m: marker.Marker) -> str:
        return marker.job_id(m, j.id, j.submit_time)

    @staticmethod
    def _error_id(j: SlurmJob, exc: marker.MarkerError) -> str:
        """The chronus id of an accepted job whose marker no longer reads."""
        return exc.job_id or marker.job_id(
            marker.Marker({}, True, submit=exc.submit), j.id, j.submit_time
        )

    def _find(self, job_id: str) -> tuple[SlurmJob, marker.Marker] | None:
        """The Slurm job behind a chronus id (the newest, if a user reused an id): read alone
        when an earlier listing named it (a round's starts would each list every job, which
        takes a second with a few hundred v0.0.42 jobs), else found in a listing."""
        known = self._ids.get(job_id)
        if known is not None:
            j = self._slurm(f"job {known}", self.rest.job, known)
            if j is not None and marker.is_marked(j.comment):
                m = self._read(j)[0]
                if m is not None and self._chronus_id(j, m) == job_id:
                    return j, m
        found = [
            (j, m)
            for j, m, _ in self._marked()
            if m is not None and self._chronus_id(j, m) == job_id
        ]
        return max(found, key=lambda jm: jm[0].id) if found else None

    def _changing(self) -> None:
        """A command is about to change Slurm's jobs: the shared listing no longer holds."""
        self._shared = None

    def look(self) -> None:
        """Settle the last round's stops and starts and list every job, for the next round's
        ``arrivals`` and ``jobs``: the service calls it before the round takes its request
        lock (``Service.look``), so neither Slurm's listing nor its start of the last round's
        jobs is waited for under that lock, where the loop's throttle, pacing rounds by how
        long they hold it, doubled it as a pause between rounds (at load 28 on 24.11 a 0.4-1.2 s
        listing, then 1-2 s of pause; issue 26, session 12)."""
        self._stop()
        self._settle()
        self._shared = (self._marked(), time.time())
        self._unread = True

    def jobs(self) -> Sequence[ObservedJob]:
        if self._stopping or self._released:
            self._changing()  # stops and starts settle now: a listing from before would miss them
        self._stop()
        self._settle()
        self._graced = 0.0  # a round begins
        now = self.now()
        out = []
        if self._shared is None:
            listing, looked = self._marked(), time.time()
        else:
            (listing, looked), self._shared = self._shared, None
        for j, m, error in listing:
            if error is not None and error.accepted:
                out.append(self._edited(j, error, now))
                continue
            if j.state == "PENDING" and not j.held:
                # only chronus places a marked job; one submitted without --hold arrives once
                # held (left alone, Slurm started it on GPUs chronus had planned for another
                # job, whose start then waited out the timeout)
                self._hold(j)
            if m is None or not m.accepted:
                continue
            out.append(self._observe(j, m, now))
        seen = {o.id for o in out}  # a job refused above may have vanished from a start too
        for job_id in sorted(self._active - seen):
            # Slurm no longer lists it: its controller lost its state (the StateSaveLocation
            # wiped, or a new controller), or it was moved out of the partition or its marker
            # removed; left unreported, the service held it pending or running for ever
            if job_id not in self._vanished:  # refused at its start, it is cancelled
                log.warning(json.dumps({"event": "slurm_job_gone", "job": job_id}))
                self._vanished[job_id] = RunState.FAILED
        self._active = {o.id for o in out if o.state in (RunState.PENDING, RunState.RUNNING)}
        out += [
            ObservedJob(job_id, state, ended_at=now)
            for job_id, state in self._vanished.items()
            if job_id not in seen
        ]
        self._observed.append(looked)
        return out

    def _edited(self, j: SlurmJob, error: marker.MarkerError, now: float) -> ObservedJob:
        """A job chronus accepted whose marker its owner has since made unreadable (``scontrol
        update comment=...``): chronus can no longer place it or record its work, so it is
        refused as a new one would be (the reason in its comment, cancelled), and the service
        sees it cancelled. Left alone, every round that started or preempted it failed."""
        job_id = self._error_id(j, error)
        if j.state in _RUNNING or j.state == "PENDING":
            self._refuse(j, f"{error} (the marker was changed after chronus accepted the job)")
        return ObservedJob(
            job_id, RunState.CANCELLED, ended_at=self._v(j.end_time) if j.end_time else now
        )

    def _observe(self, j: SlurmJob, m: marker.Marker, now: float) -> ObservedJob:
        job_id = self._chronus_id(j, m)
        try:
            spec = marker.job_fields(
                m,
                job_id=job_id,
                gpus=j.gpus_per_node * j.node_count,
                submit=self._v(m.submit or j.submit_time),
                tenant=self._tenant(j),
            )
            spec.pop("submit")
        except marker.MarkerError:
            spec = None
        if j.state in _RUNNING:
            began = j.start_time
            placement, released = self._asked.get(j.id, (None, 0.0))
            if placement is not None and {n: len(g) for n, g in placement.items()} == {
                n: j.gpus_per_node for n in j.nodes
            }:
                began = max(began, released)
            else:
                if any(j.placement.values()):
                    self._placements[j.id] = dict(j.placement)
                # a COMPLETING job still holds its GPUs but Slurm no longer lists their indices
                placement = self._placements.get(j.id) or {
                    n: tuple(range(j.gpus_per_node)) for n in j.nodes
                }
            current = 0.0 if j.start_time == m.done_run else now - self._v(began)
            return ObservedJob(
                job_id,
                RunState.RUNNING,
                placement=placement,
                spec=spec,
                run_since=self._v(began),
                work_done=m.done + max(current, 0.0),
                starts=j.restart_cnt + 1,
            )
        self._placements.pop(j.id, None)
        self._asked.pop(j.id, None)
        if j.state == "PENDING":
            return ObservedJob(
                job_id, RunState.PENDING, work_done=m.done, starts=j.restart_cnt, spec=spec
            )
        ran = j.start_time > 0 and j.start_time != m.done_run and j.end_time >= j.start_time
        work = m.done + ((j.end_time - j.start_time) * self.scale if ran else 0.0)
        return ObservedJob(
            job_id,
            _ENDED.get(j.state, RunState.FAILED),
            ended_at=self._v(j.end_time) if j.end_time else now,
            work_done=work,
            spec=spec,
            starts=j.restart_cnt + (1 if ran else 0),
        )

    @staticmethod
    def _tenant(j: SlurmJob) -> str:
        return j.account or j.user or "default"

    def arrivals(self) -> Sequence[Mapping[str, Any]]:
        if self._shared is None or not self._unread:  # no ``look`` for this round, or stale
            self.look()
        self._unread = False
        out = []
        listing, _ = self._shared
        gpus: int | None = None  # the partition's, read once there is an arrival to check
        for j, m, exc in listing:
            if not j.held or (m is not None and m.accepted) or (exc is not None and exc.accepted):
                continue  # an accepted job's edited marker is ``jobs``'s to report
            if self._waits(j):
                continue
            error = None if exc is None else str(exc)
            if j.group:
                error = _GROUPS[j.group]
            elif j.exclusive:
                error = (
                    "--exclusive: chronus hands out a node's GPUs one by one and would count "
                    "those the job does not ask for free (a job started beside it never ran); "
                    "ask for them with --gres=gpu:N"
                )
            elif not j.requeue:
                error = (
                    "--no-requeue: chronus preempts a job by requeueing it, which Slurm refuses "
                    "for this one (each preemption failed its round); submit it with --requeue"
                )
            elif (asked := self._unplaceable(j)) is not None:
                error = asked
            elif m is not None and "id" in m.user:
                error = "id: set by chronus for the jobs it submits itself; leave it out"
            if error is None:
                try:
                    marker.room(m.user)
                    fields = marker.job_fields(
                        m,
                        job_id=self._chronus_id(j, m),
                        gpus=j.gpus_per_node * j.node_count,
                        submit=self._v(j.submit_time),
                        tenant=self._tenant(j),
                        now=self.now(),
                    )
                    if gpus is None:
                        gpus = sum(len(n.gpus) for n in self.nodes())
                    error = self._too_wide(fields["gpus"], gpus)
                    if error is None:
                        out.append(fields)
                        continue
                except marker.MarkerError as exc:
                    error = str(exc)
            self._refuse(j, error)  # refused jobs are not accepted: ``jobs`` skips them anyway
        return out

    def _too_wide(self, asked: int, gpus: int) -> str | None:
        """Why an arrival asking ``asked`` GPUs cannot run here, in sbatch's terms, or None: the
        service refuses it too, but names its own field and the whole cluster's GPUs."""
        if asked <= gpus:
            return None
        return f"--gres: the job asks for {asked} GPUs, {self._where()} has {gpus}"

    def _unplaceable(self, j: SlurmJob) -> str | None:
        """Why chronus cannot honour what a job asks of the nodes it runs on, in one line
        naming the sbatch option, or None. Chronus may place a job on any node of the partition
        and its start names the nodes: a --nodelist was replaced by them, and a job whose
        --exclude, --constraint, --reservation or --mem ruled out the planned node never started
        (Slurm: BadConstraints, Reservation), each round that started it waiting out the start
        timeout. What every node of the partition satisfies (a node excluded from outside it,
        a feature all of them have) is no objection. A --gpus (per job, not per node) is
        refused too: read as no GPU at all, it was refused as "the job requests no GPU"."""
        if j.gpus_per_job and not j.gpus_per_node:
            return (
                f"--gpus: chronus reads a job's GPUs per node; ask for {j.gpus_per_job} with "
                f"--gres=gpu:{j.gpus_per_job} (or --gpus-per-node)"
            )
        if j.required_nodes:
            return (
                f"--nodelist: chronus chooses the nodes of the jobs it starts (it would replace "
                f"{','.join(j.required_nodes)}); leave it out"
            )
        if j.reservation:
            return (
                f"--reservation: chronus starts jobs on the nodes of {self._where()}, not in "
                f"reservation {j.reservation}; leave it out"
            )
        if not (j.excluded_nodes or j.constraint or j.memory_per_node):
            return None
        nodes = [
            n
            for n in self._slurm("list nodes", self.rest.nodes)
            if self.partition is None or self.partition in n.partitions
        ]
        excluded = [n.name for n in nodes if n.name in j.excluded_nodes]
        if excluded:
            return (
                f"--exclude: chronus may start the job on any node of {self._where()}, "
                f"{','.join(excluded)} among them; leave it out"
            )
        wanted = set(re.findall(r"[^&|,\[\]()!*\s]+", re.sub(r"\*[0-9]+", "", j.constraint)))
        lacking = [n.name for n in nodes if not wanted <= set(n.features)]
        if "!" in j.constraint or lacking:
            return (
                f"--constraint: {shown(j.constraint)}: chronus may start the job on any node of "
                f"{self._where()}, and {','.join(lacking) or 'some'} would not do; leave it out"
            )
        small = [n for n in nodes if n.memory < j.memory_per_node]
        if small:
            return (
                f"--mem: {j.memory_per_node} MB per node, more than {small[0].name} of "
                f"{self._where()} has ({small[0].memory} MB), where chronus may start it"
            )
        return None

    def _waits(self, j: SlurmJob) -> bool:
        """Whether a held job's --dependency names a job that has not ended (or, for
        ``after:``, begun): it is not chronus's yet. Slurm evaluates no held job's dependency
        (it stays ``afterok:5(unfulfilled)``), only a released one's: released before the
        job it waits for was over, it pended (Dependency) and each round that started it
        waited out the start timeout. Once those jobs are over it is taken in, and its
        release lets Slurm judge the dependency: met, it runs; never to be met (``afterok`` on
        a failed job), Slurm says DependencyNeverSatisfied and the job is refused."""
        if "unfulfilled" not in j.dependency:
            return False
        for kind, ids in re.findall(r"([a-z]+):([0-9_:+]+)", j.dependency):
            for other in {int(n) for n in re.findall(r"(?:^|:)([0-9]+)", ids)}:
                state = self._states.get(other, "")  # not listed: long over
                if state == "PENDING" or state in _RUNNING and kind != "after":
                    return True
        return False

    def _where(self) -> str:
        return f"partition {self.partition}" if self.partition is not None else "the cluster"

    def _accepted(self, slurm_id: int, comment: str) -> None:
        """Show an arrival accepted in the shared listing, as its new comment has it in Slurm."""
        if self._shared is not None:
            listing, looked = self._shared
            accepted = marker.parse(comment)
            self._shared = (
                [(j, accepted if j.id == slurm_id else m, e) for j, m, e in listing],
                looked,
            )

    # -- commands ----------------------------------------------------------------------------------
    def _hold(self, j: SlurmJob) -> None:
        self._changing()
        self._released.pop(j.id, None)
        try:
            self.rest.update(j.id, JobChange(hold=True))
        except SlurmError:
            pass  # it started meanwhile: the next observation shows it running
        except SlurmUnreachable as exc:
            raise _fail(f"hold job {j.id}", exc) from None

    def _refuse(self, j: SlurmJob, why: str) -> None:
        """A marked job chronus will not run: say why in its comment, and cancel it. The
        comment quotes the user's after the reason, cut to what Slurm keeps (1024 bytes: a
        longer one was refused, and with it every round's arrivals, for as long as the job
        waited); one Slurm refuses all the same (the job ended meanwhile) is cancelled anyway."""
        comment = marker.fitted(f"{marker.REFUSED} {why} [{j.comment.strip()}]")
        log.warning(json.dumps({"event": "slurm_refuse", "slurm_job": j.id, "reason": why}))
        try:
            self.rest.update(j.id, JobChange(comment=comment))
        except SlurmError as exc:  # v0.0.38 updates no array job: scontrol does
            if self._scontrol("update", f"jobid={j.id}", f"comment={comment}") is not None:
                log.warning(
                    json.dumps(
                        {"event": "slurm_refuse_comment", "slurm_job": j.id, "error": str(exc)}
                    )
                )
        except SlurmUnreachable as exc:
            raise _fail(f"refuse job {j.id}", exc) from None
        self._slurm(f"cancel job {j.id}", self._cancel_slurm, j.id)

    def _cancel_slurm(self, slurm_id: int) -> None:
        try:
            self.rest.cancel(slurm_id)
        except SlurmError:
            job = self.rest.job(slurm_id)
            if job is not None and job.state in _RUNNING | {"PENDING"}:
                raise

    def refuse(self, job: Job, spec: Mapping[str, Any]) -> tuple[str, str] | None:
        """Slurm runs any checked job: the work is the job's own."""
        return None

    def submit(self, job: Job, spec: Mapping[str, Any] | None = None) -> None:
        found = self._find(job.id)
        if found is not None:
            j, m = found
            if not m.accepted and j.state == "PENDING":
                comment = marker.render(m.user, accepted=True, submit=j.submit_time)
                self._slurm(
                    f"accept job {j.id}", self.rest.update, j.id, JobChange(comment=comment)
                )
                self._accepted(j.id, comment)
                self._taken[j.id] = _Taken(marker.parse(comment), j.submit_time, j.restart_cnt)
            return
        self._changing()
        if job.id.startswith("slurm-"):
            # a user's sbatch job that Slurm has forgotten (ended while chronus was away longer
            # than Slurm's MinJobAge): its script is theirs, so it is over, never re-created
            self._vanished[job.id] = RunState.FAILED
            return
        fields = dict(
            spec
            or {
                "id": job.id,
                "estimate_seconds": job.duration or 60,
                "deadlines": [{"at": d.at, "value": d.value} for d in job.deadlines],
            }
        )
        fields["id"] = job.id
        comment = marker.render(marker.for_api_job(fields), accepted=True)
        duration = float(fields.get("duration_seconds") or fields.get("estimate_seconds") or 60)
        duration /= self.scale
        new = NewJob(
            name=job.id,
            comment=comment,
            script=self.script,
            gpus_per_node=job.gpus,
            workdir=self.workdir,
            output=f"{self.workdir}/chronus-{job.id}-%j.out",
            environment={
                "PATH": "/usr/bin:/bin",
                "CHRONUS_JOB_ID": job.id,
                "CHRONUS_DURATION_SECONDS": str(max(math.ceil(duration), 1)),
            },
            partition=self.partition,
        )
        slurm_id = self._slurm(f"submit job {job.id}", self.rest.submit, new)
        self._taken[slurm_id] = _Taken(marker.parse(comment), 0.0, -1)  # the job made just now

    def _require(self, job_id: str) -> tuple[SlurmJob, marker.Marker] | None:
        """The job to start or preempt; None, and reported failed by the next ``jobs``, if
        Slurm no longer lists it as chronus's (purged, moved to another partition, its marker
        removed by its owner): raising here failed every round that planned it, everyone's."""
        found = self._find(job_id)
        if found is None:
            log.warning(json.dumps({"event": "slurm_job_gone", "job": job_id}))
            self._vanished[job_id] = RunState.FAILED
        return found

    def start(self, job_id: str, placement: Mapping[str, tuple[int, ...]]) -> None:
        # the plan had it start when its GPUs came free or it arrived, which the round saw one
        # observation later at most: count from the observation before the round's own (or from
        # the signal to the first job it displaces, if earlier)
        planned = self._observed[0] if self._observed else time.time()
        decided = min([t for _, _, t in self._stopping.values()] + [planned])
        self._changing()
        self._stop()  # the GPUs of the jobs preempted for this one must be free first
        found = self._require(job_id)
        if found is None:
            return
        j, m = found
        if j.state in _RUNNING or j.state in _ENDED or j.state not in ("PENDING",):
            return  # running (never released twice) or over: the next observation says so
        counts = {len(g) for g in placement.values()}
        if len(counts) != 1:
            raise BackendUnavailable(
                f"slurm: job {job_id}: Slurm gives every node of a job the "
                f"same GPU count; the plan split it as {dict(placement)}"
            )
        per_node = counts.pop()
        change = JobChange(
            hold=False,
            nodes=tuple(placement),
            # left alone when equal: a typed request stays typed
            gpus_per_node=per_node if per_node != j.gpus_per_node else None,
            node_count=len(placement) if len(placement) != j.node_count else None,
            # a requeued job would wait ~2 min, one submitted with --begin until then: the
            # start would time out and hold up the round (30 s), round after round
            begin_now=True,
            # its owner may have made it non-requeueable since chronus took it (scontrol update
            # requeue=0): its preemption's requeuehold was refused and failed the round
            requeue=True,
        )
        if j.restart_cnt > 0:
            self._after_requeue_second(j.id)
        self._slurm(f"release job {j.id}", self.rest.update, j.id, change)
        self._released[j.id] = (time.monotonic() + self.start_timeout, decided, self._graced)
        self._asked[j.id] = (dict(placement), time.time())

    def _settle(self) -> None:
        """Wait (up to ``start_timeout`` after its release) until every job ``start`` released
        runs, so observations never show a started job as pending; one that Slurm did not start
        in time, or says it will not start now (:data:`_STARTING`), is held again and shows as
        pending, which the service then re-plans; one Slurm will never run in its partition
        (:data:`_NEVER`) is refused. Starts of
        one round are released together and settle together, in about one Slurm scheduling
        pass rather than one per job. Each start seen running is one sample of the start
        latency (up to one poll late, so it errs long)."""
        delay = 0.05
        while self._released:
            now = time.monotonic()
            for slurm_id, (until, decided, graced) in list(self._released.items()):
                j = self._slurm(f"job {slurm_id}", self.rest.job, slurm_id)
                if j is None or j.state != "PENDING":
                    del self._released[slurm_id]
                    if j is not None and j.state in _RUNNING:
                        self._latencies.append(max(time.time() - decided - graced, 0.0))
                elif now >= until or j.reason not in _STARTING:
                    del self._released[slurm_id]
                    event = "slurm_start_timeout" if j.reason in _STARTING else "slurm_not_started"
                    log.warning(json.dumps({"event": event, "slurm_job": j.id, "reason": j.reason}))
                    try:
                        job_id = chronus_id(j) if j.reason in _NEVER else None
                    except marker.MarkerError:
                        job_id = None  # its owner broke the marker meanwhile: jobs() says so
                    if job_id is None:
                        self._hold(j)
                        continue
                    self._refuse(
                        j,
                        f"{_NEVER[j.reason]}: Slurm will not run the job in partition "
                        f"{j.partition} ({j.reason})",
                    )
                    self._vanished[job_id] = RunState.CANCELLED  # no longer marked: not listed
            if self._released:
                time.sleep(delay)
                delay = min(delay * 1.5, 0.5)

    def preempt(self, job_id: str) -> None:
        self._changing()
        found = self._require(job_id)
        if found is None:
            return
        j, m = found
        if j.state == "PENDING":
            if not j.held:
                self._hold(j)
            return
        if j.state not in _RUNNING or j.id in self._stopping:
            return
        if self.grace > 0:
            try:
                self.rest.signal(j.id, f"SIG{self.signal}")
            except SlurmError:
                pass  # it ended meanwhile; _stop finds out
            except SlurmUnreachable as exc:
                raise _fail(f"signal job {j.id}", exc) from None
        self._stopping[j.id] = (time.monotonic() + self.grace, m, time.time())

    def _stop(self) -> None:
        """Requeue and hold every job ``preempt`` signalled once its grace is over, then wait
        until all have left their GPUs. A job that ends COMPLETED (or cancelled) within its grace
        is over, as Slurm says: its work was done (a script must never exit 0 on the signal, and
        chronus's own scripts never do), so it is not requeued, and a log line says so. One that
        died of the checkpoint signal (FAILED: a script that does not
        trap it) is requeued at once, like one that ran through its grace: it was stopped, not
        broken, and resumes from its last checkpoint."""
        requeued = []
        delay = 0.05
        began = time.monotonic()
        while self._stopping:
            for slurm_id, (until, m, _) in list(self._stopping.items()):
                j = self._slurm(f"job {slurm_id}", self.rest.job, slurm_id)
                if j is None or j.state not in _RUNNING and j.state != "FAILED":
                    del self._stopping[slurm_id]  # it ended during the grace: none to requeue
                    log.warning(
                        json.dumps(
                            {
                                "event": "slurm_ended_in_grace",
                                "slurm_job": slurm_id,
                                "state": j.state if j is not None else "gone",
                            }
                        )
                    )
                elif j.state == "FAILED" or time.monotonic() >= until:
                    del self._stopping[slurm_id]
                    self._requeue(j, m)
                    requeued.append(slurm_id)
            if self._stopping:
                time.sleep(delay)
                delay = min(delay * 1.5, 0.5)
        self._graced += time.monotonic() - began  # charged as the grace (``start_latency``)
        if requeued:  # a requeue older than a second no longer matters (_after_requeue_second)
            self._requeued = {i: t for i, t in self._requeued.items() if time.time() - t < 2.0}
        for slurm_id in requeued:
            self._wait(
                slurm_id,
                lambda s: (
                    s is None or s.state == "PENDING" and s.reason != "None" and not s.placement
                ),
                self.start_timeout,
            )
            self._requeued[slurm_id] = time.time()

    def _after_requeue_second(self, slurm_id: int) -> None:
        """Wait, if needed, until the wall second after this job's requeue. A requeue revokes
        the job's credential on its nodes, stamped in whole seconds; a run started on one of
        them within the same second carries a credential no newer than the revocation, and
        slurmd kills it ("Job credential revoked"): the job would end FAILED, lost."""
        requeued = self._requeued.pop(slurm_id, None)
        if requeued is not None:
            time.sleep(max(math.floor(requeued) + 1.05 - time.time(), 0.0))

    def _requeue(self, j: SlurmJob, m: marker.Marker) -> None:
        """Record the work of the run being stopped in the comment, then requeue-and-hold (a
        job that has ended takes no update: requeued first, then recorded)."""
        self._released.pop(j.id, None)  # stopped before it was seen running
        running = j.state in _RUNNING
        if not running:
            self._requeuehold(j.id)
        if m.done_run != j.start_time:
            ran = self.now() if running else self._v(j.end_time)
            done = m.done + max(ran - self._v(j.start_time), 0.0)
            comment = marker.render(
                m.user, accepted=True, done=done, done_run=j.start_time, submit=m.submit
            )
            self._slurm(
                f"record work of job {j.id}", self.rest.update, j.id, JobChange(comment=comment)
            )
            self._taken[j.id] = _Taken(marker.parse(comment), j.submit_time, j.restart_cnt)
        if running:
            self._requeuehold(j.id)

    def _requeuehold(self, slurm_id: int) -> None:
        why = self._scontrol("requeuehold", str(slurm_id))
        if why is not None:
            raise BackendUnavailable(f"slurm: scontrol requeuehold {slurm_id}: {why}")

    def _scontrol(self, *args: str) -> str | None:
        """Run ``scontrol args``; None if it succeeded, else why not."""
        env = self._env
        if getattr(self.rest, "token", None):  # the token as last renewed (--slurm-token-file)
            env = {**env, "SLURM_JWT": self.rest.token}
        try:
            out = subprocess.run(
                [self.scontrol, *args],
                env=env,
                capture_output=True,
                text=True,
                timeout=30,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return str(exc)
        return None if out.returncode == 0 else (out.stderr or out.stdout).strip()

    def refuse_arrival(self, job_id: str, field: str | None, why: str) -> None:
        """An arrival the service refused: its comment says why, naming the marker key or
        sbatch option behind ``field`` (the job's account for its tenant), and it is
        cancelled."""
        self._changing()
        found = self._find(job_id)
        if found is None or found[0].state != "PENDING":
            return
        self._refuse(found[0], in_terms(field, why, _MARKER_KEYS))

    def cancel(self, job_id: str) -> None:
        self._changing()
        found = self._find(job_id)
        if found is None:
            return
        j, _ = found
        if j.state not in _RUNNING and j.state != "PENDING":
            return
        self._slurm(f"cancel job {j.id}", self._cancel_slurm, j.id)
        # the GPUs are free once Slurm has cleaned the job up, not when it accepted the cancel
        self._wait(
            j.id, lambda s: s is None or s.state not in _RUNNING | {"PENDING"}, self.start_timeout
        )

    def _wait(self, slurm_id: int, done, timeout: float) -> None:
        end = time.monotonic() + timeout
        delay = 0.05
        while True:
            if done(self._slurm(f"job {slurm_id}", self.rest.job, slurm_id)):
                return
            if time.monotonic() >= end:
                return
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)


# -- chronus serve --backend slurm ---------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("slurm backend (--backend slurm)")
    g.add_argument(
        "--slurmrestd",
        default=None,
        help="slurmrestd: unix:PATH (local auth) or http://HOST:PORT (JWT)",
    )
    g.add_argument(
        "--partition",
        "--slurm-partition",
        dest="slurm_partition",
        default=None,
        help="schedule only this partition's nodes and jobs (default: all)",
    )
    g.add_argument(
        "--slurm-token-file",
        default=None,
        help="file holding the JWT for http:// (default: $SLURM_JWT)",
    )
    g.add_argument(
        "--slurm-user",
        default=None,
        help="user name sent with the JWT (default: $SLURM_USER_NAME or yours)",
    )
    g.add_argument(
        "--slurm-grace",
        type=float,
        default=None,
        help="seconds between the checkpoint signal and the requeue (default 30)",
    )
    g.add_argument(
        "--slurm-signal",
        default=None,
        help="signal sent to a job before it is preempted (default USR1)",
    )
    g.add_argument(
        "--slurm-poll", type=float, default=None, help="seconds between looks at Slurm (default 2)"
    )
    g.add_argument(
        "--slurm-script",
        default=None,
        help="batch script for jobs submitted through the API (default: a checkpointed "
        "stand-in that works for the job's duration_seconds)",
    )
    g.add_argument(
        "--slurm-time-scale",
        type=float,
        default=None,
        help="compressed-time runs (tests, demos, benchmarks): one wall second is this "
        "many seconds of chronus time (default 1: real time)",
    )
    g.add_argument(
        "--slurm-time-origin",
        type=float,
        default=None,
        help="the Unix time from which --slurm-time-scale counts; keep it across "
        "restarts (required with a scale other than 1)",
    )
    g.add_argument(
        "--slurm-workdir",
        default=None,
        help="working directory and output place of API-submitted jobs (default /tmp)",
    )


def from_args(
    args: argparse.Namespace,
    *,
    db_path: Path | None,
    nodes: Sequence[tuple[str, int]] | None = None,
) -> SlurmBackend:
    """A Slurm backend from the serve options, once slurmrestd has answered and its API version
    is chosen. ``nodes`` (a HiveD config's, ``--cluster``) must be the partition's Slurm nodes
    with their GPU counts: the cell tree then places jobs on Slurm's nodes by name."""
    if not args.slurmrestd:
        raise InputError(
            "--slurmrestd", "required with --backend slurm (unix:PATH or http://HOST:PORT)"
        )
    try:
        socket_path = parse_endpoint(args.slurmrestd)[0]
    except ValueError as exc:
        raise InputError("--slurmrestd", str(exc)) from None
    unix = socket_path is not None
    if unix and not os.path.exists(socket_path):  # not worth the retries: say so at once
        raise InputError("--slurmrestd", f"no socket at {socket_path}: is slurmrestd running?")
    grace = _seconds("--slurm-grace", args.slurm_grace, 30.0)
    poll = _seconds("--slurm-poll", args.slurm_poll, 2.0)
    try:
        sig = signal_name(args.slurm_signal or "USR1")
    except ValueError as exc:
        raise InputError("--slurm-signal", str(exc)) from None
    if args.slurm_partition is not None and not args.slurm_partition.strip():
        raise InputError("--partition", "empty: name a Slurm partition, or leave it out for all")
    workdir = args.slurm_workdir or "/tmp"
    if not workdir.startswith("/"):
        raise InputError("--slurm-workdir", f"must be an absolute path, got {workdir!r}")
    script = DEFAULT_SCRIPT
    if args.slurm_script is not None:
        try:
            script = Path(args.slurm_script).read_text()
        except OSError as exc:
            raise InputError(str(args.slurm_script), exc.strerror or "unreadable") from None
    scale = 1.0 if args.slurm_time_scale is None else float(args.slurm_time_scale)
    if not 0 < scale < math.inf:
        raise InputError("--slurm-time-scale", f"must be a number > 0, got {scale}")
    if scale != 1.0 and args.slurm_time_origin is None:
        raise InputError(
            "--slurm-time-origin",
            "required with --slurm-time-scale other than 1 (e.g. the Unix time the run began)",
        )
    origin = float(args.slurm_time_origin or 0.0)
    if not math.isfinite(origin):
        raise InputError("--slurm-time-origin", f"must be a Unix time, got {origin}")
    token = None
    env = dict(os.environ)
    if unix:
        pass
    elif args.slurm_token_file is not None:
        try:
            token = Path(args.slurm_token_file).read_text().strip()
        except OSError as exc:
            raise InputError(
                str(args.slurm_token_file), f"cannot read the token: {exc.strerror}"
            ) from None
        if not token:
            raise InputError(str(args.slurm_token_file), "empty: it must hold the JWT")
    else:
        token = os.environ.get("SLURM_JWT")
        if not token:
            raise InputError(
                "--slurmrestd", "http:// needs a JWT: --slurm-token-file or $SLURM_JWT"
            )
    if token:
        env["SLURM_JWT"] = token
    user = args.slurm_user or os.environ.get("SLURM_USER_NAME") or getpass.getuser()
    rest = SlurmRest(args.slurmrestd, token=token, user=user, token_file=args.slurm_token_file)
    try:
        rest.version  # noqa: B018 - reach slurmrestd once, so a wrong address is a clear error
    except SlurmUnreachable as exc:
        raise InputError("--slurmrestd", str(exc)) from None
    backend = SlurmBackend(
        rest,
        partition=args.slurm_partition,
        grace=grace,
        signal=sig,
        poll=max(poll, 0.1),
        script=script,
        workdir=workdir,
        env=env,
        time_scale=scale,
        time_origin=origin,
    )
    if args.slurm_partition is not None:
        why = partition_missing(args.slurm_partition, backend)
        if why is not None:
            raise InputError("--partition", why)
    if nodes is not None:
        try:
            slurm = {n.name: len(n.gpus) for n in backend.nodes()}
        except BackendUnavailable as exc:
            raise InputError("--slurmrestd", str(exc)) from None
        why = topology_mismatch(dict(nodes), slurm)
        if why is not None:
            raise InputError("--cluster", why)
    return backend


def _seconds(flag: str, value: float | None, default: float) -> float:
    """A duration option: ``default`` if not given, else a finite number >= 0."""
    seconds = default if value is None else float(value)
    if not 0 <= seconds < math.inf:
        raise InputError(flag, f"must be a number of seconds >= 0, got {seconds}")
    return seconds


def signal_name(text: str) -> str:
    """The checkpoint signal's name as Slurm takes it after ``SIG`` (``USR1``), from ``USR1``,
    ``SIGUSR1``, ``usr1`` or its number; ValueError naming the text for anything else."""
    name = text.strip().upper().removeprefix("SIG")
    if name.isdigit():
        try:
            return signal.Signals(int(name)).name.removeprefix("SIG")
        except ValueError:
            pass
    elif f"SIG{name}" in signal.Signals.__members__:
        return name
    raise ValueError(f"{text!r} is not a signal (e.g. USR1, USR2, TERM)")


def partition_missing(partition: str, backend: SlurmBackend) -> str | None:
    """Why ``--partition`` names no partition with nodes in Slurm, or None."""
    try:
        nodes = backend.rest.nodes()
    except (SlurmUnreachable, SlurmError) as exc:
        return f"cannot list Slurm's nodes: {exc}"
    known = sorted({p for n in nodes for p in n.partitions})
    if partition in known:
        return None
    return f"Slurm has no partition {partition!r} with nodes (it has {', '.join(known) or 'none'})"


def topology_mismatch(cells: Mapping[str, int], slurm: Mapping[str, int]) -> str | None:
    """Why a HiveD config's nodes (name -> GPUs) are not the Slurm partition's, or None."""
    return base.topology_mismatch(
        cells, slurm, "Slurm", not_there=f"are not in Slurm (it has {', '.join(sorted(slurm))})"
    )


def check(
    args: argparse.Namespace, *, nodes: Sequence[tuple[str, int]] | None = None
) -> dict[str, Any]:
    """What ``chronus serve --check`` reports for Slurm: slurmrestd reached, the Slurm release
    behind it, the API versions it offers and the one chronus will use, and the nodes chronus
    would schedule. Raises :class:`InputError` (one line) where ``serve`` would fail."""
    backend = from_args(args, db_path=None, nodes=nodes)
    try:
        return {
            "slurmrestd": args.slurmrestd,
            "slurm": backend.rest.release(),
            "offered": backend.rest.offered(),
            "api": backend.rest.version,
            "nodes": len(backend.nodes()),
        }
    except (SlurmUnreachable, SlurmError, BackendUnavailable) as exc:
        raise InputError("--slurmrestd", str(exc)) from None
