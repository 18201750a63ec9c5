"""The elastic replay: jobs progress at their size's throughput; every size change goes through
the allocator and pauses the job for the overhead model's seconds.

Events are arrivals (grouped by the policy's ``arrival_window``), completions, and the wake-ups a
policy asks for (e.g. the slot where its plan gives a job more GPUs). At each event the policy
admits the newcomers, then names every active job's size; the engine applies shrinks and stops
first, then grows and starts, so the GPUs a grow needs are free.

It is the elastic event loop behind the one entry point, ``chronus_py.engine.replay``, which runs
it for a policy whose ``elastic`` is True. With the rigid loop it shares the job
(``model.Job``), its record and progress model (``state.JobState``), the overhead models
(``chronus_py.jobs.overhead``), the policy registry, the result and its metrics. The seam that is
left: its own event order (arrival groups and a scan for the next completion, not
``engine.clock.Clock``), its own policy protocol (``ElasticPolicy``: sizes for every job, where
a rigid policy orders a queue for the scheduler's placement walk), and no estimate stages (the
policies see the true work).
"""

from __future__ import annotations

from typing import Callable, Sequence

from chronus_py.jobs.model import Cluster, Job
from chronus_py.jobs.overhead import Overhead
from chronus_py.jobs.state import JobState, Status
from chronus_py.policies.base import ElasticPolicy, ElasticView
from placement import Allocator, PodSpec, Request

DONE = 1e-6


def pods_for(gpus: int, per_node: int) -> tuple[PodSpec, ...]:
    """Whole nodes first, then the remainder: how the rigid scheduler asks for a gang."""
    if gpus <= per_node:
        return (PodSpec(gpus),)
    whole, rest = PodSpec(per_node, gpus // per_node), PodSpec(gpus % per_node, 1)
    return tuple(p for p in (whole, rest) if p.gpus)


class ElasticEngine:
    """The elastic event loop. ``run`` returns every job's record; ``events`` and
    ``placement_failures`` count what it did."""

    def __init__(
        self,
        jobs: Sequence[Job],
        allocator: Allocator,
        cluster: Cluster,
        policy: ElasticPolicy,
        overhead: Overhead,
    ):
        self.jobs = sorted(jobs, key=lambda j: (j.submit, j.id))
        self.allocator = allocator
        self.cluster = ElasticView(cluster.gpus, overhead)
        self.per_node = max(n.gpus for n in cluster.nodes)
        self.policy = policy
        self.placement_failures = 0
        self.events = 0

    def run(self, on_progress: Callable[[int, int], None] | None = None) -> list[JobState]:
        runs = [
            JobState(job=j, seq=i, estimate=j.work, overhead=0.0) for i, j in enumerate(self.jobs)
        ]
        active: list[JobState] = []
        groups = self._arrival_groups(runs)
        next_group = 0
        wake = float("inf")
        events = 0
        while next_group < len(groups) or active:
            arrival = groups[next_group][0] if next_group < len(groups) else float("inf")
            completion = min((r.completes_at(r.job.work) for r in active), default=float("inf"))
            now = min(arrival, completion, wake)
            if now == float("inf"):
                break
            events += 1
            done = [
                r
                for r in active
                if r.size
                and (
                    r.remaining(now) <= DONE * r.job.work
                    or r.completes_at(r.job.work) <= now + 1e-9
                )
            ]
            for r in done:
                self._stop(r, now)
                r.status, r.finish = Status.FINISHED, now
                self.policy.finished(r)
            if done:
                active = [r for r in active if r.finish is None]
            if arrival == now:
                newcomers = groups[next_group][1]
                next_group += 1
                self.policy.admit(now, newcomers, active, self.cluster)
                active.extend(newcomers)
            sizes, wake = self.policy.assign(now, active, self.cluster)
            if wake <= now:
                raise RuntimeError(
                    f"policy {self.policy.name} asked to wake at {wake} <= now {now}"
                )
            self._apply(now, active, sizes)
            gone = [r for r in active if r.dropped]
            for r in gone:
                self._stop(r, now)
                self.policy.finished(r)
            if gone:
                active = [r for r in active if not r.dropped]
            if on_progress is not None and events % 500 == 0:
                on_progress(next_group, len(groups))
        self.events = events
        return runs

    def _arrival_groups(self, runs: list[JobState]) -> list[tuple[float, list[JobState]]]:
        """Arrivals at the same time, or within one ``arrival_window`` slot, shown together at the
        last of their submission times (a policy cannot see a job before it is submitted)."""
        window = self.policy.arrival_window
        groups: list[tuple[float, list[JobState]]] = []
        key_of = (lambda t: t) if window <= 0 else (lambda t: int(t // window))
        last_key = None
        for r in runs:
            key = key_of(r.job.submit)
            if groups and key == last_key:
                groups[-1] = (r.job.submit, groups[-1][1] + [r])
            else:
                groups.append((r.job.submit, [r]))
            last_key = key
        return groups

    def _apply(self, now: float, active: list[JobState], sizes: dict[str, int]) -> None:
        shrink = [r for r in active if sizes.get(r.id, 0) < r.size]
        grow = [r for r in active if sizes.get(r.id, 0) > r.size]
        for r in shrink:
            self._resize(r, sizes.get(r.id, 0), now)
        for r in sorted(grow, key=lambda r: r.deadline):
            self._resize(r, sizes[r.id], now)

    def _allocate_down(self, r: JobState, new: int, old: int):
        """Place ``new`` GPUs, or else the largest smaller size of the job above ``old``: a
        fragmented allocator (cells) may hold a smaller gang where the chosen one does not fit.
        Each size that does not fit counts as a placement failure."""
        result = None
        for size in [n for n in reversed(r.job.sizes) if old < n <= new]:
            result = self.allocator.allocate(Request(job=r.id, pods=pods_for(size, self.per_node)))
            if result.outcome == "placed":
                return result
            self.placement_failures += 1
        return result

    def _stop(self, r: JobState, now: float) -> None:
        if r.size:
            self.allocator.release(r.id)
            r.gpu_seconds += r.size * (now - r.run_since)
            r.stop(now)
            r.status = Status.PENDING
            r.size = 0
            r.known_gpus = set()

    def _resize(self, r: JobState, new: int, now: float) -> None:
        old = r.size
        if new == 0:
            self._stop(r, now)
            r.preemptions += 1
            return
        before = self.allocator.placement_of(r.id) if old else {}
        if old:
            self.allocator.release(r.id)
        if new < old:
            request = Request(job=r.id, pods=pods_for(new, self.per_node))
            result = self.allocator.reserve(request, subset(before, new))
            if result.outcome != "placed":
                result = self.allocator.allocate(request)
                self.placement_failures += result.outcome != "placed"
        else:
            result = self._allocate_down(r, new, old)
        if result.outcome != "placed":
            if old:
                self.allocator.reserve(Request(job=r.id, pods=pods_for(old, self.per_node)), before)
            return
        new = result_size(result)
        gpus = {(node, g) for node, ids in result.by_node().items() for g in ids}
        from_stopped = old == 0
        known = not from_stopped and gpus <= r.known_gpus
        cost = self.cluster.overhead.seconds(
            new, self.cluster.gpus, from_stopped=from_stopped, known_gpus=known
        )
        if from_stopped:
            r.status = Status.RUNNING
        else:  # bank the run so far at the old size; the run goes on at the new one
            r.gpu_seconds += old * (now - r.run_since)
            r.service = r.service_at(now)
            r.wall += now - r.run_since
        r.run_since = now
        r.known_gpus = gpus if from_stopped else r.known_gpus | gpus
        r.size = new
        r.speed = r.rate_of[new]
        r.paused_until = now + cost
        r.overhead_seconds += cost
        r.overhead_gpu_seconds += cost * new
        if from_stopped:
            r.starts += 1
            if r.first_start is None:
                r.first_start = now
        else:
            r.resizes += 1


def result_size(result) -> int:
    return sum(len(p.gpus) for p in result.pods)


def subset(placement: dict[str, tuple[int, ...]], n: int) -> dict[str, tuple[int, ...]]:
    """``n`` of a job's GPUs, from the nodes where it holds the most (fewest nodes kept)."""
    out: dict[str, tuple[int, ...]] = {}
    for node, ids in sorted(placement.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        if n <= 0:
            break
        take = ids[:n]
        out[node] = take
        n -= len(take)
    return out
