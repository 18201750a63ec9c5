"""The elastic scheduler: the stage that runs a policy naming every job's size, behind the same
small interface the replay loop uses for the rigid :class:`~chronus_py.scheduler.Scheduler`.

``submit`` a job when it arrives, ``finish`` it when its work is done, ``next_wakeup`` for the
instant the policy asked to be asked again (e.g. the slot where its plan gives a job more GPUs),
and the two steps of a decision (``chronus_py.round.advance`` runs them): ``select`` lets the
policy admit the newcomers (``ElasticPolicy.admit``) and name every active job's size
(``assign``), ``place`` applies the sizes through the allocator (``chronus_py.engine.resize``:
shrinks and stops first, then grows and starts) and drops the jobs the policy gave up on. What
moved comes back as :class:`~chronus_py.scheduler.Moves`; the loop stamps each started or
resized run's completion on the one clock (early by the policy's ``done_tolerance``, see
``chronus_py.engine.clock.Tolerance``).
"""

from __future__ import annotations

import math

from chronus_py.engine.resize import Move, Resizer
from chronus_py.jobs.model import Cluster, Job
from chronus_py.jobs.overhead import Overhead
from chronus_py.jobs.state import JobState, Status
from chronus_py.policies.base import ElasticPolicy, ElasticView
from chronus_py.scheduler import Moves
from placement import Allocator, ConsolidatedAllocator


class ElasticScheduler:
    """Every job's record (``jobs``, in submission order), the active ones (``active``) and those
    holding GPUs (``running``). ``placement_failures`` counts the sizes the allocator could not
    place."""

    elastic = True

    def __init__(
        self,
        cluster: Cluster,
        policy: ElasticPolicy,
        *,
        overhead: Overhead,
        allocator: Allocator | None = None,
    ):
        self.policy = policy
        self.arrival_window = policy.arrival_window
        self.view = ElasticView(cluster.gpus, overhead)
        self.resizer = Resizer(
            allocator or ConsolidatedAllocator((n.name, n.gpus) for n in cluster.nodes),
            max(n.gpus for n in cluster.nodes),
            cluster.gpus,
            overhead,
        )
        self.jobs: dict[str, JobState] = {}
        self.active: dict[str, JobState] = {}
        self.running: dict[str, JobState] = {}
        self._arrived: list[JobState] = []
        self._sizes: dict[str, int] = {}
        self._wake = math.inf

    @property
    def placement_failures(self) -> int:
        return self.resizer.placement_failures

    def submit(self, job: Job) -> JobState:
        state = JobState(job=job, seq=len(self.jobs), estimate=job.work, overhead=0.0)
        self.jobs[job.id] = state
        self._arrived.append(state)
        return state

    def finish(self, job_id: str, now: float) -> JobState:
        r = self.running.pop(job_id)
        self.resizer.stop(r, now)
        r.status, r.finish = Status.FINISHED, now
        self.policy.finished(r)
        del self.active[job_id]
        return r

    def next_wakeup(self, now: float) -> float | None:
        """The instant the policy asked to be asked again (None: only at an arrival or a
        completion, or no job is active)."""
        if not self.active or self._wake == math.inf:
            return None
        return self._wake

    def select(self, now: float) -> None:
        """The policy's step: admit the jobs that arrived, then size every active job."""
        active = list(self.active.values())
        if self._arrived:
            arrived, self._arrived = self._arrived, []
            self.policy.admit(now, arrived, active, self.view)
            active.extend(arrived)
            self.active.update((r.id, r) for r in arrived)
        self._sizes, self._wake = self.policy.assign(now, active, self.view)
        if self._wake <= now:
            raise RuntimeError(
                f"policy {self.policy.name} asked to wake at {self._wake} <= now {now}"
            )

    def place(self, now: float) -> Moves:
        """Apply the sizes ``select`` named: shrinks and stops first, then grows and starts in
        deadline order; then let go of the jobs the policy dropped."""
        sizes = self._sizes
        active = list(self.active.values())
        shrink = [r for r in active if sizes.get(r.id, 0) < r.size]
        grow = sorted((r for r in active if sizes.get(r.id, 0) > r.size), key=lambda r: r.deadline)
        moved: dict[Move, list[JobState]] = {m: [] for m in Move}
        for r in shrink + grow:
            move = self.resizer.resize(r, sizes.get(r.id, 0), now)
            if move is None:
                continue
            moved[move].append(r)
            if move is Move.STOPPED:
                del self.running[r.id]
            else:
                self.running[r.id] = r
        for r in [r for r in active if r.dropped]:
            self.resizer.stop(r, now)
            self.running.pop(r.id, None)
            self.policy.finished(r)
            del self.active[r.id]
        running = self.running
        return Moves(
            now,
            tuple(r for r in moved[Move.STARTED] if r.id in running),
            tuple(moved[Move.STOPPED]),
            tuple(r for r in moved[Move.RESIZED] if r.id in running),
        )
