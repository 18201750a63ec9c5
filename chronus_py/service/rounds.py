"""Every call the service makes into the core scheduler, in one module (the facade): building a
scheduler, admission, rebuilding state after a restart, the lease re-plan, what the service
reads of its jobs, and the round, which is the library's (``chronus_py/round.py``: select and
place at every round; the decisions only when asked).

Keeping them here means the service follows the core when it changes by editing this file
alone; the rest of the service sees :class:`Admission`, :class:`~chronus_py.scheduler.Moves`
and the :class:`~chronus_py.plan.Plan`. What a policy adds (guarantees, refusals, re-plans,
sizes) is asked through the policy interface (``chronus_py/policies/base.py``), never of a
concrete policy.
"""

from __future__ import annotations

import ctypes
import gc
import json
import logging
import os
import pickle
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping

from chronus_py.backends.base import JobReport
from chronus_py.estimates import Fixed
from chronus_py.estimates.in_place import MEASURE_WINDOW, measured
from chronus_py.estimates.report import describe
from chronus_py.jobs.model import Cluster, DeadlineOption, Job, shown_seconds
from chronus_py.jobs.overhead import restart_overhead
from chronus_py.jobs.state import JobState, Status
from chronus_py.plan import Action
from chronus_py.policies import make_policy
from chronus_py.policies.base import LeaseReport
from chronus_py.round import advance as _advance
from chronus_py.round import assemble as assemble
from chronus_py.round import choose_size, new_scheduler, reason, virtual_clusters
from chronus_py.round import restore as restore
from chronus_py.scheduler import Moves, Scheduler
from chronus_py.selector import SelectorStats
from chronus_py.service.jobspec import JobSpec, shown

log = logging.getLogger("chronus.serve")

GUARANTEED, NOT_GUARANTEED, REJECTED = "guaranteed", "not_guaranteed", "rejected"
TENTATIVE = "tentative"
"""A job submitted without a runtime: admission is decided on its first estimate."""
MEASURING = (
    f"runtime unknown: it runs ranked by a {MEASURE_WINDOW:g} s probe and is measured in place "
    f"from its progress reports; the guarantee is decided on its first estimate, after "
    f"{MEASURE_WINDOW:g} s of measured progress"
)


def planned_work(estimate: float | None) -> float:
    """What the scheduler plans a job with: its estimate, or its probe while unknown."""
    return MEASURE_WINDOW if estimate is None else estimate


@dataclass(frozen=True)
class SchedulerSettings:
    """The policy of ``chronus serve`` and its options (for Chronus, the fields of
    :class:`~chronus_py.selector.ChronusSettings`, checked by ``make_policy``)."""

    policy: str = "chronus"
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Admission:
    """The answer to a submission: ``decision`` is guaranteed / not_guaranteed / tentative
    (``rejected`` is only counted: a job that can never run here is refused with a 422);
    ``deadline`` the option guaranteed; ``reason`` why not (or what the guarantee means)."""

    decision: str
    deadline: DeadlineOption | None = None
    reason: str = ""

    def to_dict(self) -> dict:
        out: dict = {"decision": self.decision, "reason": self.reason}
        if self.deadline is not None:
            out["deadline"] = {"at": self.deadline.at, "value": self.deadline.value}
        return out


def scheduler_for(
    settings: SchedulerSettings,
    cluster: Cluster,
    *,
    allocator=None,
    estimates: dict[str, float],
    even_gangs: bool = False,
    whole_pods: bool = False,
    start_latency: Callable[[], float] | None = None,
) -> Scheduler:
    """The service's scheduler (``chronus_py.round.new_scheduler``), whose estimator reads
    ``estimates`` (the service fills it before submitting), so a job's estimate is what its
    owner said, never its true work; ``start_latency`` is the backend's
    (``Backend.start_latency``, optional)."""
    return new_scheduler(
        cluster,
        make_policy(settings.policy, settings.options),
        allocator=allocator,
        estimator=Fixed(estimates),
        even_gangs=even_gangs,
        whole_pods=whole_pods,
        start_latency=start_latency,
    )


def solver_stats(scheduler: Scheduler) -> SelectorStats | None:
    """The policy's solver counters (re-plans, fallbacks, demotions), for policies with one."""
    return scheduler.policy.solver_stats()


HORIZON = 366 * 86400.0
"""How far ahead the service plans: a deadline or a job's work beyond it is refused (the lease
plan's arrays grow with the leases up to a deadline; 10**16 s would take terabytes)."""


def reject_reason(
    scheduler: Scheduler, job: Job, estimate: float | None, now: float, *, sized: bool = True
) -> tuple[str, str] | None:
    """Why a job can never be scheduled here, as (the field at fault, why), or None.
    ``estimate`` None: not known yet (an unknown runtime); ``sized`` False: an elastic job
    before admission sized it (its GPUs are not decided, its estimate is its least work)."""
    if sized and job.gpus > scheduler.total_gpus:
        return "gpus", f"needs {job.gpus} GPUs, the cluster has {scheduler.total_gpus}"
    vcs = virtual_clusters(scheduler)
    if vcs is not None and job.tenant not in vcs:
        have = ", ".join(sorted(vcs))
        return (
            "tenant",
            f"{shown(job.tenant)} is no virtual cluster of the cell allocator (have: {have})",
        )
    if job.deadlines and job.deadlines[-1].at <= now:
        last = f"deadlines[{len(job.deadlines) - 1}].at"
        at = shown_seconds(job.deadlines[-1].at)
        return last, f"the last deadline ({at}) is not after now ({shown_seconds(now)})"
    for i, option in enumerate(job.deadlines):
        if option.at > now + HORIZON:
            return f"deadlines[{i}].at", f"more than {HORIZON:g} s ahead (the planning horizon)"
    if estimate is not None and estimate > HORIZON:
        return "estimate_seconds", f"more than {HORIZON:g} s of work (the planning horizon)"
    return None


def _not_guaranteed(scheduler: Scheduler, state: JobState, now: float) -> Admission:
    return Admission(NOT_GUARANTEED, reason=scheduler.policy.refusal(state, now))


def _refusal(scheduler: Scheduler, state: JobState, now: float) -> str:
    """The reason a backend shows the owner of a job without a guarantee, after every round
    that changed something: without the test that refused it, which would cost the round a
    search of the plan per waiting job (ten times the reports of 3,000 waiting jobs)."""
    return scheduler.policy.refusal(state, now, detail=False)


def admit(
    scheduler: Scheduler, job: Job, now: float, *, known: bool = True
) -> tuple[JobState, Admission]:
    """Submit ``job`` and run the policy's part of a round, so the answer comes at once; a job
    whose runtime is not ``known`` is taken in, to be measured, and answered tentatively."""
    state = scheduler.submit(job)
    state.known = known
    scheduler.select(now)
    if not known:
        return state, Admission(TENTATIVE, reason=MEASURING)
    if state.guaranteed is not None:
        by = shown_seconds(state.guaranteed.at)
        return state, Admission(GUARANTEED, state.guaranteed, f"guaranteed to finish by {by}")
    return state, _not_guaranteed(scheduler, state, now)


def size_elastic(scheduler: Scheduler, spec: JobSpec, now: float) -> JobSpec | str:
    """An elastic submission at the size admission gives it (``chronus_py.jobs.sizing``),
    or why it cannot run on this cluster."""
    job = spec.job.up_to(scheduler.total_gpus)
    if job is None:
        return (
            f"its smallest size, {spec.job.min_size} GPUs, is more than the cluster's "
            f"{scheduler.total_gpus}"
        )
    scheduler.select(now)
    return spec.sized(choose_size(scheduler, job, now))


def probe(scheduler: Scheduler, job: Job, estimate: float | None, now: float) -> Admission:
    """What ``admit`` would answer, without submitting or booking anything."""
    scheduler.select(now)
    if estimate is None:
        return Admission(TENTATIVE, reason=MEASURING)
    state = JobState(job=job, seq=-1, estimate=estimate, overhead=scheduler.overhead(job.gpus))
    option = scheduler.policy.probe(state, now)
    if option is not None:
        by = shown_seconds(option.at)
        return Admission(GUARANTEED, option, f"would be guaranteed to finish by {by}")
    return _not_guaranteed(scheduler, state, now)


def run_began(scheduler: Scheduler, job_id: str, at: float, now: float) -> JobState:
    """A run the backend began at ``at``, later than the round that started it: progress counts
    from then, and the start latency the plan charged for this start (the part of the job's
    overhead beyond the restart overhead, see :func:`scheduler_for`) is paid in full. It is time
    before the run, not work in it: a run that began sooner than charged does not owe the rest
    (kept, it made a running job look hopeless and demoted it, issue 26 session 11), and one
    that began later has lost that time on the clock, not in its work."""
    state = scheduler.active[job_id]
    if is_running(state) and state.run_since is not None and at > state.run_since:
        state.service += max(state.overhead - restart_overhead(state.gpus), 0.0)
    return scheduler.run_began(job_id, at, now)


def finish(scheduler: Scheduler, job_id: str, at: float) -> JobState:
    """A job the backend saw complete (``at`` its true end)."""
    if job_id in scheduler.running:
        return scheduler.finish(job_id, at)
    return scheduler.withdraw(job_id, at)


def withdraw(scheduler: Scheduler, job_id: str, now: float) -> JobState:
    return scheduler.withdraw(job_id, now)


def forget(scheduler: Scheduler, job_id: str) -> None:
    """Drop the record of a job that ended (``Scheduler.forget``), if the scheduler held one:
    the service's database keeps ended jobs."""
    if job_id in scheduler.jobs:
        scheduler.forget(job_id)


def progress(scheduler: Scheduler, job_id: str, fraction: float, now: float) -> float | None:
    """Re-estimate a job from the share of its iterations done: the work it has received over
    that share. Returns the new estimate, or None if it has not received work to judge from.

    A job submitted without a runtime gets its first estimate only once ``MEASURE_WINDOW``
    seconds of progress past warm-up back it; it is offered admission at once, as if it had
    just arrived (its guarantee, if any, is then among ``guarantees``)."""
    state = scheduler.active[job_id]
    done = measured(state, now)
    if done <= 0 or fraction <= 0 or (not state.known and done < MEASURE_WINDOW):
        return None
    estimate = max(done / min(fraction, 1.0), done)
    if state.known:
        scheduler.reestimate(job_id, estimate, now)
    else:
        scheduler.firm_estimate(job_id, estimate, now)
        scheduler.select(now)
    return estimate


def estimate_state(scheduler: Scheduler, job_id: str, now: float) -> dict | None:
    """An active job's estimate state, as its answer shows it (None once it ended)."""
    state = scheduler.active.get(job_id)
    if state is None:
        return None
    return describe(state, now, MEASURE_WINDOW).to_dict(with_id=False)


def reasons(scheduler: Scheduler, moves: Moves) -> dict[str, str]:
    """Why each job started or was preempted in ``moves`` (the plan's reason, for the log line
    of each decision), without assembling the whole plan."""
    free = scheduler.allocator.free_gpus()
    out = {s.id: reason(scheduler, s, Action.START, free) for s in moves.started}
    out.update({s.id: reason(scheduler, s, Action.PREEMPT, free) for s in moves.preempted})
    return out


def reports(scheduler: Scheduler, now: float) -> dict[str, JobReport]:
    """Every active job's guarantee, the start its lease plan reserves, and why it is not
    guaranteed: what a backend that ``publish``es shows the job's owner."""
    lease = scheduler.policy.lease_report()
    booked = {} if lease is None else lease.lease_plan
    out = {}
    for job_id, state in scheduler.active.items():
        running = is_running(state)
        leases = booked.get(job_id, ())
        out[job_id] = JobReport(
            running=running,
            guaranteed=state.guaranteed,
            planned_start=leases[0] if leases and not running else None,
            reason="" if state.guaranteed else _refusal(scheduler, state, now),
        )
    return out


def guarantees(scheduler: Scheduler) -> dict[str, DeadlineOption]:
    """Active jobs' current guarantees (to record promises made or withdrawn by a round)."""
    return {i: s.guaranteed for i, s in scheduler.active.items() if s.guaranteed is not None}


def next_wakeup(scheduler: Scheduler, now: float) -> float | None:
    return scheduler.next_wakeup(now)


# -- what the service reads of its jobs ---------------------------------------------------------
def active_job(scheduler: Scheduler, job_id: str) -> JobState | None:
    """An active (pending or running) job's record; None once it ended, or if never held."""
    return scheduler.active.get(job_id)


def active_jobs(scheduler: Scheduler) -> list[JobState]:
    """Every pending and running job's record, in submission order."""
    return list(scheduler.active.values())


def lease_report(scheduler: Scheduler) -> LeaseReport | None:
    """The lease plan behind the order (None for a policy without one): what ``/v1/plan`` and
    the web view's timeline draw."""
    return scheduler.policy.lease_report()


def busy_gpus(scheduler: Scheduler) -> int:
    """GPUs the running jobs hold."""
    return sum(state.gpus for state in scheduler.running.values())


def allocator_config(scheduler: Scheduler) -> object | None:
    """The allocator's cell config (a HiveD config), or None for an allocator without one."""
    return getattr(scheduler.allocator, "config", None)


class Tenants(Mapping[str, str]):
    """Each held job's tenant (``Service.tenants``), read from the scheduler's records of the
    jobs, which name it: a dict of its own held a second entry per job (issue 27)."""

    __slots__ = ("_scheduler",)

    def __init__(self, scheduler: Scheduler):
        self._scheduler = scheduler

    def __getitem__(self, job_id: str) -> str:
        return self._scheduler.jobs[job_id].job.tenant

    def __iter__(self) -> Iterator[str]:
        return iter(self._scheduler.jobs)

    def __len__(self) -> int:
        return len(self._scheduler.jobs)


def held(scheduler: Scheduler, job_id: str) -> bool:
    """Whether the scheduler holds a record of this id: an active job, or an ended one not
    forgotten yet (the service forgets a job once its end is in the database, which then
    answers for it)."""
    return job_id in scheduler.jobs


def starts(scheduler: Scheduler, job_id: str) -> int:
    """How many runs a job has had (its first start counts one)."""
    return scheduler.jobs[job_id].starts


def placements(scheduler: Scheduler) -> dict[str, Mapping[str, tuple[int, ...]]]:
    """Every running job's placement: node -> its GPU indices there."""
    return {job_id: state.placement for job_id, state in scheduler.running.items()}


def job_counts(scheduler: Scheduler) -> tuple[int, int]:
    """(pending, running) jobs."""
    return len(scheduler.active) - len(scheduler.running), len(scheduler.running)


def is_running(state: JobState) -> bool:
    return state.status is Status.RUNNING


def set_health(scheduler: Scheduler, node: str, *, healthy: bool) -> None:
    """Stop placing new work on ``node``, or allow it again."""
    if healthy:
        scheduler.allocator.set_healthy(node)
    else:
        scheduler.allocator.set_bad(node)


def free_gpus(scheduler: Scheduler) -> int:
    return scheduler.allocator.free_gpus()


# -- the lease re-plan, off the request path -------------------------------------------------------
@dataclass
class Replan:
    """A lease re-plan computing in a child process, on the fork of the scheduler as it was at
    ``now``; ``known`` the jobs active then; ``moved`` the jobs a round started or stopped
    since the result last planned them (:func:`advance`); ``taken`` the later arrivals already
    taken into its result (:func:`catch_up`), ``changed`` the jobs whose key that changed, and
    ``steps`` the steps of its commit so far."""

    pid: int
    fd: int
    now: float
    known: frozenset[str]
    moved: set[str] = field(default_factory=set)
    taken: set[str] = field(default_factory=set)
    changed: set[str] = field(default_factory=set)
    steps: int = 0


def replan_due(scheduler: Scheduler, now: float) -> bool:
    """Whether the next select would re-plan (for Chronus: the lease ended)."""
    return scheduler.policy.replan_due(now)


def start_replan(scheduler: Scheduler, now: float) -> Replan | None:
    """Fork: the child re-plans on its copy of the scheduler (copy-on-write, so the snapshot
    costs a fork, not a copy of every job) and sends back the result. The parent's policy is
    told the re-plan started, so nothing re-plans it meanwhile: admissions go on against the
    committed plan until ``commit_replan``. None where there is no fork.

    Everything the parent needs of the state at the fork is done BEFORE it, because after it
    every object the parent touches (even a read writes its reference count) costs a copy of
    its 4 KB page, shared with the child until then: telling the policy (``replan_started``,
    a look at every booking of the committed plan) cost 22,000 page copies and 86-105 ms of
    CPU in the request's call after the fork, 10-14 ms and none before it, at 6,024
    guarantees (``benchmarks/replan_commit.py``). The child's plan does not change: its
    re-plan sets its lease and its triggers anew (``tests/service/test_replan_start.py``).
    And ``gc.freeze()`` just before, so the collector's next passes in either process do not
    write the header of every older object (a full pass would copy most of the heap). A
    re-plan deferred in this lease (:func:`defer_replan`) was told already: told twice, the
    committed plan would queue each of its triggers twice."""
    if not hasattr(os, "fork"):
        return None
    policy = scheduler.policy
    known = frozenset(scheduler.active)
    if policy.replan_due(now):  # else told already, when this re-plan was deferred
        policy.replan_started(now)
    gc.freeze()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: compute, send, and leave without running any parent's cleanup
        status = 1
        try:
            os.close(read)
            os.nice(CHILD_NICE)
            result = policy.replan(scheduler.active, now)
            with os.fdopen(write, "wb") as out:
                pickle.dump(result, out, protocol=pickle.HIGHEST_PROTOCOL)
            status = 0
        finally:
            os._exit(status)
    os.close(write)
    return Replan(pid, read, now, known)


CHILD_NICE = 10
"""How much lower the re-plan's child runs than the service (``os.nice``): on a machine with
as many busy processes as cores, a request that wakes while the child computes (seconds of
CPU) waited for the CPU behind it; at lower priority the child yields to the service's
threads, which need little CPU, and takes what they leave (issue 27 part 2)."""


def defer_replan(scheduler: Scheduler, now: float) -> None:
    """A re-plan fell due while the last one still computes or catches up: the committed plan
    goes on deciding, as it does while the child computes, instead of re-planning at once."""
    scheduler.policy.replan_started(now)


def replan_result(replan: Replan, scheduler: Scheduler) -> Any | None:
    """The child's result, or None if it failed; blocks until it ends, and reads the result in
    steps (``Policy.replan_load``). Call it from a worker thread, without the lock: it uses
    nothing of the scheduler but its policy's code."""
    with os.fdopen(replan.fd, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(replan.pid, 0)
    if not data or status != 0:
        return None
    result = pickle.loads(data)
    _paced(scheduler.policy.replan_load(result))
    _freeze_bookings()
    return result


def _paced(steps: Iterable[None]) -> None:
    """Run ``steps`` (a read or a release in pieces), handing the GIL over (``time.sleep(0)``
    releases it) once a piece ends ``HAND_OVER`` or more after the last hand-over.

    Why: a piece is under a millisecond, but a thread that runs piece after piece keeps the GIL
    until the interpreter's switch interval (5 ms) makes it drop it, and then takes it back
    first as often as not. The requests' threads (the event loop's and the batches') each wait
    that long for every hand-off a request needs: with a 1 ms busy loop in one thread, a thread
    sleeping 1 ms at a time woke 14 ms late at the median, 31 times in a second; with
    ``time.sleep(0)`` after each millisecond, 0.1 ms, 210 times (issue 27, session 17, a
    scratch script at load 5). Not after every piece: a release of 834 pieces, handing over
    after each, took twice its CPU (35 -> 70 ms, ``benchmarks/replan_commit.py``)."""
    last = time.perf_counter()
    for _ in steps:
        if time.perf_counter() - last >= HAND_OVER:
            time.sleep(0)
            last = time.perf_counter()


HAND_OVER = 0.001
"""Seconds of a paced read or release between two hand-overs of the GIL (:func:`_paced`)."""


def _freeze_bookings() -> None:
    """Move every object the cyclic collector tracks out of its reach (``gc.freeze``).

    Why: a plan books millions of leases as tuples of ints, and a tuple stays tracked until a
    pass has looked through it, so the first young pass after a re-plan's read walked every
    lease of the new plan (115-250 ms CPU in one call, during which no thread runs), and the
    first after its commit every lease of the jobs it caught up (45 ms). Frozen, no pass visits
    them; they are freed by reference counting when a later plan replaces them. The price:
    a reference cycle that is garbage at that instant is never collected (a re-plan is once a
    lease, so that is what a few seconds of requests leave behind, once per lease)."""
    gc.freeze()


def release_replaced(scheduler: Scheduler) -> None:
    """Free the plan the last commit replaced, in steps (``Policy.replan_release``): from a
    worker thread, without the lock, once the commit is done."""
    _paced(scheduler.policy.replan_release())
    _trim_heap()


def _trim_heap() -> None:
    """Give the C heap's free pages back to the system (glibc's ``malloc_trim``), where there
    is one.

    Why: the bookings of a plan are tuples of thousands of leases, each its own block of the C
    heap, and the freed plan's blocks stay in the process as free memory that C's allocator
    keeps for itself: still resident, still copied (their page-table entries) by the next
    re-plan's fork, which follows ``FORK_GAP`` later. At 6,024 guarantees and 30 s leases the
    process held 220 MB after a release and 139 MB after a trim, at 17 ms of CPU in the call,
    which releases the GIL (issue 27, session 17; ``benchmarks/replan_commit.py``)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def small_pages() -> None:
    """Stop numpy from asking the kernel for huge pages (``madvise(MADV_HUGEPAGE)``, which it
    does for every array of 4 MB or more on Linux), in this process and the re-plan children
    it forks.

    Why: a re-plan's child builds and drops large arrays all through its solve, and each new
    one was faulted in as fresh 2 MB pages that the kernel zeroes: 7,228 huge-page faults in
    one 90 s run at 10 s leases (``/proc/vmstat`` ``thp_fault_alloc``), about 14 GB zeroed.
    In bursts of 0.1-0.2 s about 1.3 s after a fork, the whole 2-core machine was short of CPU
    (the service's and the load client's threads waiting together), and requests waited
    180-310 ms; with numpy's huge pages off (``NUMPY_MADVISE_HUGEPAGE=0``), two runs alternated
    with two as before had no request over 46 ms against 306 ms (issue 27, session 17,
    benchmarks/RESULTS.md). numpy names the switch with an underscore but documents it (1.20
    release notes) as the way to turn this off at run time; the environment variable is read
    only when numpy is first imported."""
    try:
        from numpy._core.multiarray import _set_madvise_hugepage
    except ImportError:  # numpy 1.x
        from numpy.core.multiarray import _set_madvise_hugepage
    _set_madvise_hugepage(False)


def _libc() -> ctypes.CDLL | None:
    """The process's own symbols (the C library's among them), where they have
    ``malloc_trim`` (glibc)."""
    try:
        libc = ctypes.CDLL(None)
    except (OSError, TypeError):  # no dlopen of the process itself (Windows)
        return None
    return libc if hasattr(libc, "malloc_trim") else None


_LIBC = _libc()


def _untaken(scheduler: Scheduler, replan: Replan) -> list[JobState]:
    """Active jobs the re-plan's result does not hold yet, in submission order.

    Read from the newest back to the first job the child knew: the active jobs keep their
    submission order and a job enters them once (``Scheduler.submit``), so every job older
    than that one was known too. A scan of every active job cost each step of a commit
    ~4 ms of CPU at 8,500 jobs before it booked anything (``benchmarks/replan_commit.py``)."""
    known, taken = replan.known, replan.taken
    newest = []
    for i in reversed(scheduler.active):
        if i in known:
            break
        if i not in taken:
            newest.append(scheduler.active[i])
    newest.reverse()
    return newest


def _moved(scheduler: Scheduler, replan: Replan) -> list[JobState]:
    """Active jobs the re-plan's result holds and planned before they last started or
    stopped, in submission order (the order the result took them in, which ``recheck`` books
    them in). Those are the jobs the rounds reported moved since (``Replan.moved``): a job
    starts or stops only in a round's placement, whose moves list every net change (a stop
    undone in the same placement is in neither). Before, the starts and stops of every job
    were noted at the fork (2-3 ms of CPU in the fork's call at 6,024 jobs) and compared at
    every step of the commit (3-5 ms a step, issue 27 session 15). An arrival not taken yet
    is left to :func:`_untaken`, which plans it as it is when taken."""
    active, known, taken = scheduler.active, replan.known, replan.taken
    moved = [
        state
        for i in replan.moved
        if (i in known or i in taken) and (state := active.get(i)) is not None
    ]
    moved.sort(key=_seq)
    return moved


def _seq(state: JobState) -> int:
    return state.seq


def catch_up(scheduler: Scheduler, replan: Replan, result: Any, now: float, budget: float) -> bool:
    """Take the jobs that started or stopped since the fork (or since this took them in),
    then those that arrived, into the re-plan's ``result`` one by one, at least one and then
    until ``budget`` seconds have passed (the caller holds the scheduler); True once none is
    left.

    Why the moved jobs: the child planned each job as it was at the fork. A job it saw waiting,
    with the start it still needs charged, may have been started by the committed plan since;
    committed as planned, the re-plan withdrew a promise the running job could keep and the
    next round preempted it as hopeless (Slurm 24.11, issue 26/27). Each is planned again as
    it is now (``Policy.recheck``), keeping its promise where the new plan holds it.

    The result is not the scheduler's plan yet, so nothing a request sees changes: each job
    is booked against the new plan exactly as the commit would book it, and every request in
    between is still answered (and booked) by the committed plan, to be caught up in turn. A
    job cancelled after it was taken in keeps its booking until the next re-plan, as a job
    cancelled while the child computed does."""
    stop = time.perf_counter() + budget
    policy = scheduler.policy
    left = [(True, s) for s in _moved(scheduler, replan)]
    left += [(False, s) for s in _untaken(scheduler, replan)]
    for n, (moved, state) in enumerate(left, 1):
        if moved:
            replan.changed.update(policy.recheck(result, [state], now))
        else:
            replan.changed.update(policy.catch_up(result, [state], now))
            replan.taken.add(state.id)
        replan.moved.discard(state.id)  # planned as it is: again only if a round moves it
        if n < len(left) and time.perf_counter() >= stop:
            return False
    return True


def advance(
    scheduler: Scheduler, now: float, *, committed: bool = False, replan: Replan | None = None
) -> Moves:
    """The library's round (select, then place), logging the numbers behind every guarantee it
    withdraws (:func:`_log_demotions`). Guarantees change only at a re-plan, so other rounds
    skip the bookkeeping; ``committed``: a re-plan was committed since the last round. Its
    withdrawn guarantees reach the job records in this round's select, not at the commit
    (``Scheduler.select`` writes them), so the commit itself logged none: no child re-plan's
    demotion had its numbers in the log (issue 26, session 12). ``replan``: the re-plan in
    flight, if any, told which jobs this round started or stopped (:func:`_moved`)."""
    if not committed and not replan_due(scheduler, now):
        moves = _advance(scheduler, now)
    else:
        before = guarantees(scheduler), _booked(scheduler)
        moves = _advance(scheduler, now)
        _log_demotions(scheduler, *before, now)
    if replan is not None:
        replan.moved.update(state.id for state in moves.started)
        replan.moved.update(state.id for state in moves.preempted)
    return moves


def _booked(scheduler: Scheduler) -> Mapping[str, tuple[float, ...]]:
    """The lease plan's booked starts per job, as they are before a re-plan replaces them (a
    snapshot: ``LeaseReport.lease_plan`` is one, converted per job when read)."""
    lease = scheduler.policy.lease_report()
    return {} if lease is None else lease.lease_plan


def _log_demotions(
    scheduler: Scheduler,
    promised: Mapping[str, DeadlineOption],
    booked: Mapping[str, tuple[float, ...]],
    now: float,
) -> None:
    """One ``demotion_numbers`` line per guarantee just withdrawn from an active job: the
    leases the plan had booked for it before, its work left as the plan counts it (with the
    overhead of the start it still needs), and that overhead's parts, the restart overhead and
    the cluster manager's start latency the plan charges (``Backend.start_latency``). Without
    them a demoted job that never started cannot be explained from the log (issue 26)."""
    for job_id, option in promised.items():
        state = scheduler.active.get(job_id)
        if state is None or state.guaranteed is not None:
            continue
        restart = restart_overhead(state.gpus)
        log.info(
            json.dumps(
                {
                    "event": "demotion_numbers",
                    "job": job_id,
                    "now": now,
                    "deadline": option.at,
                    "running": is_running(state),
                    "booked": list(booked.get(job_id, ())),
                    "remaining": round(state.remaining(now), 1),
                    "done": round(state.service_at(now), 1),
                    "restart_overhead": round(restart, 1),
                    "latency_charge": round(max(state.overhead - restart, 0.0), 1),
                }
            )
        )


def commit_replan(
    scheduler: Scheduler, replan: Replan, result: Any | None, now: float, *, caught_up: bool = False
) -> None:
    """Make the child's plan the scheduler's, atomically (the caller holds the scheduler): the
    policy takes in the jobs that arrived, started or stopped while it computed and
    :func:`catch_up` did not take yet (``Policy.commit_replan``), and every job whose key
    changed is re-sorted. ``caught_up``: :func:`catch_up` just left none, under the same hold,
    so the scans for them are not run again (half of the commit's CPU at 8,500 jobs).

    A failed child: the re-plan runs here, and the guarantees its select withdraws are logged
    with the bookings they had (:func:`_log_demotions`). With a result the commit withdraws
    none from the job records (the next round's select does, and logs them, see
    :func:`advance`), so the snapshots of every guarantee and booking a log needs are not
    taken (another third of its CPU)."""
    policy = scheduler.policy
    if result is None:
        before = guarantees(scheduler), _booked(scheduler)
        policy.commit_replan(None, _untaken(scheduler, replan), now, _moved(scheduler, replan))
        scheduler.select(now)
        _log_demotions(scheduler, *before, now)
    else:
        arrived, moved = [], []
        if not caught_up:
            arrived, moved = _untaken(scheduler, replan), _moved(scheduler, replan)
        changed = policy.commit_replan(result, arrived, now, moved)
        scheduler._rekey(replan.changed.union(changed), now)
    _freeze_bookings()
