"""How long a lease re-plan's commit holds the service's request lock, and how long reading its
result and freeing the plan it replaced stop every thread (issue 27), at 8,192 GPUs with 6,024
guarantees (1,024 running jobs, 5,000 waiting, every one with a deadline) and 30 s leases, with
``--arrivals`` jobs admitted while the child re-planned. In-process, without HTTP: the service's
own calls (``chronus_py.service.rounds``), timed in wall and CPU seconds (CPU does not depend on
how busy the machine is). Also the cyclic collector's passes from the read of the result to
1,000 admissions after the commit, with the server's collector settings (``server.serve``), and
then the next pass of each generation, forced: a pass is one call no other thread runs during,
so the longest is a wait every request shares. And the re-plan's start in the request's call
(``rounds.start_replan``: the fork and what the parent does around it), wall, CPU and the
parent's minor page faults (copy-on-write copies) during it. While the result is read and
the replaced plan freed (worker threads' work in the server), a thread that sleeps a
millisecond at a time measures how late it gets the GIL back (``other_thread_late_ms``).
``next_replan``: the next lease's re-plan from start to release, whose replaced plan is one a
re-plan's read built, as in the service from its second re-plan on. ``lease_end_during_replan``:
the next lease ends while the first re-plan's child computes (``rounds.defer_replan`` at 60 s,
the committed plan being the one built in-process), wall, CPU and page faults; ``hold_cpu_ms``
each hold of the commit's CPU, and ``moved_scans`` the CPU of the catch-up's look for jobs
that started or stopped since the fork (``rounds._moved``), per call, in the first commit.

    python benchmarks/replan_commit.py [--arrivals 2500] [--before /path/to/other/checkout]
        [--fork-first]

``--before``: the same run with another checkout first (one that commits in one piece, as
main at 54b357e does), so the two are compared side by side. Writes
benchmarks/results/replan_commit.json (``replan_commit_fork_first.json`` with
``--fork-first``).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import random
import resource
import signal
import subprocess
import sys
import threading
import time
from functools import partial
from inspect import signature
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def timed(fn, *args):
    wall, cpu = time.perf_counter(), time.thread_time()
    out = fn(*args)
    return out, time.perf_counter() - wall, time.thread_time() - cpu


def faulted(fn, *args) -> tuple:
    """``fn(*args)`` and its wall and CPU milliseconds with the minor page faults it took: after
    a fork every page the parent writes (a reference count is a write) is copied from the
    child's, and the call's wait includes those copies (issue 27 part 2)."""
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    out, wall, cpu = timed(fn, *args)
    return out, {
        "wall_ms": 1000 * wall,
        "cpu_ms": 1000 * cpu,
        "minor_faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults,
    }


def measure(arrivals: int, fork_first: bool = False) -> dict:
    import gc

    from chronus_py.jobs.model import Cluster, DeadlineOption, Job, JobKind
    from chronus_py.service import rounds

    gc.freeze()  # as ``chronus serve`` does once started
    gc.set_threshold(50_000, 20, 100)
    passes: list[tuple[int, float]] = []  # (generation, CPU seconds) of each collector pass
    began: list[float] = []

    def pass_timed(phase, info):
        if phase == "start":
            began.append(time.thread_time())
        elif began:
            passes.append((info["generation"], time.thread_time() - began.pop()))

    rng = random.Random(1)
    estimates: dict[str, float] = {}
    s = rounds.scheduler_for(
        rounds.SchedulerSettings(options={"headroom": 0.0, "lease": 30.0}),
        Cluster.uniform(1024, 8),
        estimates=estimates,
    )

    def job(i: int, now: float, gpus: int | None = None, work: float | None = None) -> Job:
        work = work or rng.choice((7200.0, 14400.0, 28800.0, 57600.0))
        estimates[f"b{i}"] = work
        deadline = DeadlineOption(now + work * rng.uniform(1.5, 4.0), 1.0)
        gpus = gpus or rng.choice((1, 1, 1, 2, 4, 8))
        return Job(f"b{i}", "t", gpus, now, JobKind.STRICT_SLO, (deadline,), work)

    for i in range(1024):
        rounds.admit(s, job(i, 0.0, 8, 800.0), 0.0)
    rounds.advance(s, 0.0)
    for i in range(5000):
        rounds.admit(s, job(1024 + i, 1.0), 1.0)
    out: dict = {"guarantees_before": len(rounds.guarantees(s))}
    gc.collect()  # the fill is old by the time a lease ends (the server's passes moved it on)
    gc.callbacks.append(pass_timed)
    replan, out["start_replan"] = faulted(rounds.start_replan, s, 30.0)
    faults, cpu = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.thread_time()
    for i in range(arrivals):
        rounds.admit(s, job(100_000 + i, 30.0), 30.0)
    out["arrivals_during_replan"] = {  # the copies the requests after the fork pay
        "cpu_ms": 1000 * (time.thread_time() - cpu),
        "minor_faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults,
    }
    if hasattr(rounds, "defer_replan"):
        # The next lease ends while the child still computes (a re-plan longer than its
        # lease): the committed plan, the one built in this process, is told in the call
        # that meets it, with the child alive (every page it reads is copied).
        _, out["lease_end_during_replan"] = faulted(rounds.defer_replan, s, 60.0)
    scans = timed_calls(rounds, "_moved")  # the catch-up's scans for jobs that moved
    calls: list[float] = []  # CPU of each unpickle call: no other thread runs during one
    loads = pickle.loads

    def counted(data):
        cpu = time.thread_time()
        try:
            return loads(data)
        finally:
            calls.append(time.thread_time() - cpu)

    rounds.pickle.loads = counted
    stepped = hasattr(rounds, "catch_up")
    probe = GilProbe()
    probe.start()
    read_cpu = time.thread_time()  # the wait for the child is not CPU: what is left is the read
    result = rounds.replan_result(replan, s) if stepped else rounds.replan_result(replan)
    out["result_read_cpu_ms"] = 1000 * (time.thread_time() - read_cpu)
    probe.stop()
    out["result_longest_call_cpu_ms"] = 1000 * max(calls)
    out["result_other_thread_late_ms"] = probe.summary()
    holds: list[tuple[float, float]] = []
    # As ``Service.commit_replan`` calls it: told that the catch-up just left none, where the
    # checkout's ``commit_replan`` takes that (session 14 on)
    told = {"caught_up": True} if "caught_up" in signature(rounds.commit_replan).parameters else {}
    if stepped:
        while True:
            done, wall, cpu = timed(rounds.catch_up, s, replan, result, 30.0, 0.02)
            if done:
                _, wall2, cpu2 = timed(
                    partial(rounds.commit_replan, **told), s, replan, result, 30.0
                )
                wall, cpu = wall + wall2, cpu + cpu2
            holds.append((wall, cpu))
            if done:
                break
        scans = list(scans)  # this re-plan's (next_replan's are not counted)
        # With --fork-first the next lease's re-plan is forked before the replaced plan is
        # freed, as the server does when a re-plan took longer than a lease (the next is due
        # at the commit, and the release runs after it in a worker thread).
        following = rounds.start_replan(s, 60.0) if fork_first else None
        steps = []  # each call of the release's pieces: (wall, CPU)
        pieces = s.policy.replan_release

        def timed_pieces():
            # every call timed, the last too: it ends the generator, which drops the replaced
            # selector and whatever it still held, in one call
            wall, cpu = time.perf_counter(), time.thread_time()
            for piece in pieces():
                steps.append((time.perf_counter() - wall, time.thread_time() - cpu))
                yield piece
                wall, cpu = time.perf_counter(), time.thread_time()
            steps.append((time.perf_counter() - wall, time.thread_time() - cpu))

        s.policy.replan_release = timed_pieces
        probe = GilProbe()
        probe.start()
        faults, total = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.thread_time()
        wall = time.perf_counter()
        rounds.release_replaced(s)  # as the service frees it, paced or not
        wall = time.perf_counter() - wall
        probe.stop()
        longest = max(steps, default=(0.0, 0.0))
        out["freeing_replaced"] = {
            "after_a_fork": fork_first,
            "cpu_ms": 1000 * (time.thread_time() - total),
            "wall_ms": 1000 * wall,
            "minor_faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults,
            "pieces": len(steps),
            "other_thread_late_ms": probe.summary(),
        }
        if following is not None:
            os.kill(following.pid, signal.SIGKILL)
            os.waitpid(following.pid, 0)
    else:
        old = s.policy.selector
        _, wall, cpu = timed(rounds.commit_replan, s, replan, result, 30.0)
        holds.append((wall, cpu))
        wall, cpu = time.perf_counter(), time.thread_time()
        del old
        longest = (time.perf_counter() - wall, time.thread_time() - cpu)
    for i in range(1000):
        rounds.admit(s, job(300_000 + i, 30.0), 30.0)
    gc.callbacks.remove(pass_timed)
    # The passes still to come: each generation's next pass, forced in turn (young first, as
    # the thresholds would run them), is what the next request behind it waits for.
    next_passes = {}
    for generation in (0, 1, 2):
        cpu = time.thread_time()
        gc.collect(generation)
        next_passes[generation] = 1000 * (time.thread_time() - cpu)
    if stepped and not fork_first:
        out["next_replan"] = next_replan(s, partial(job, now=60.0), arrivals)
    out.update(
        hold_cpu_ms=[round(1000 * h[1], 2) for h in holds],
        moved_scans={
            "calls": len(scans),
            "cpu_ms_total": 1000 * sum(scans),
            "cpu_ms_max": 1000 * max(scans, default=0.0),
        },
        collector_passes=len(passes),
        collector_longest_pass_cpu_ms=1000 * max((c for _, c in passes), default=0.0),
        collector_longest_pass_generation=max(passes, key=lambda p: p[1], default=(None,))[0],
        collector_next_pass_cpu_ms=next_passes,
        collector_frozen_objects=gc.get_freeze_count(),
        collector_frozen_garbage=frozen_garbage(),
        arrivals=arrivals,
        lock_holds=len(holds),
        longest_hold_ms={
            "wall": 1000 * max(h[0] for h in holds),
            "cpu": 1000 * max(h[1] for h in holds),
        },
        total_hold_ms={
            "wall": 1000 * sum(h[0] for h in holds),
            "cpu": 1000 * sum(h[1] for h in holds),
        },
        freeing_replaced_longest_call_ms={"wall": 1000 * longest[0], "cpu": 1000 * longest[1]},
        guarantees_after=len(rounds.guarantees(s)),
        booked_after=len(rounds.lease_report(s).lease_plan),
    )
    return out


def next_replan(s, job, arrivals: int) -> dict:
    """The next lease's re-plan, start to release, as the service runs it: the plan it
    replaces is the one the first re-plan's read built (the first replaced the plan built in
    this process), which is the service's state from its second re-plan on."""
    from chronus_py.service import rounds

    out = {}
    replan, out["start_replan"] = faulted(rounds.start_replan, s, 60.0)
    for i in range(arrivals):
        rounds.admit(s, job(400_000 + i), 60.0)
    probe = GilProbe()
    probe.start()
    cpu = time.thread_time()
    result = rounds.replan_result(replan, s)
    out["result_read_cpu_ms"] = 1000 * (time.thread_time() - cpu)
    probe.stop()
    out["result_other_thread_late_ms"] = probe.summary()
    holds = []
    while True:
        done, wall, cpu = timed(rounds.catch_up, s, replan, result, 60.0, 0.02)
        if done:
            _, wall2, cpu2 = timed(
                partial(rounds.commit_replan, caught_up=True), s, replan, result, 60.0
            )
            wall, cpu = wall + wall2, cpu + cpu2
        holds.append((wall, cpu))
        if done:
            break
    out["lock_holds"] = len(holds)
    out["longest_hold_cpu_ms"] = 1000 * max(h[1] for h in holds)
    probe = GilProbe()
    probe.start()
    faults, cpu = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.thread_time()
    rounds.release_replaced(s)
    out["freeing_replaced"] = {
        "cpu_ms": 1000 * (time.thread_time() - cpu),
        "minor_faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults,
    }
    probe.stop()
    out["freeing_replaced"]["other_thread_late_ms"] = probe.summary()
    out["rss_mb"] = rss_mb()
    return out


def timed_calls(module, name: str) -> list[float]:
    """The CPU seconds of each later call of ``module.name`` (none where it has no such
    function): wrapped in place, so the module's own callers are timed too."""
    calls: list[float] = []
    fn = getattr(module, name, None)
    if fn is None:
        return calls

    def wrapped(*args, **kwargs):
        cpu = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            calls.append(time.thread_time() - cpu)

    setattr(module, name, wrapped)
    return calls


def rss_mb() -> float:
    """The process's resident memory now (what a fork copies the page tables of)."""
    with open("/proc/self/status") as status:
        kb = next(line for line in status if line.startswith("VmRSS:")).split()[1]
    return int(kb) / 1024


class GilProbe(threading.Thread):
    """A thread that sleeps a millisecond at a time: how late each sleep ends is how long a
    thread that wants the GIL (a request's) waits behind the work measured meanwhile."""

    def __init__(self):
        super().__init__(daemon=True)
        self.late: list[float] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            began = time.perf_counter()
            time.sleep(0.001)
            self.late.append(time.perf_counter() - began - 0.001)

    def stop(self) -> None:
        self.done.set()
        self.join()

    def summary(self) -> dict:
        late = sorted(self.late) or [0.0]
        return {
            "wakeups": len(self.late),
            "p99": 1000 * late[min(int(0.99 * len(late)), len(late) - 1)],
            "max": 1000 * late[-1],
        }


def frozen_garbage() -> int:
    """Objects a collection finds unreachable once everything frozen is thawed: garbage that
    a ``gc.freeze`` kept from the collector (last: it changes the heap)."""
    import gc

    gc.collect()
    gc.unfreeze()
    return gc.collect()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arrivals", type=int, default=2500)
    p.add_argument("--before", type=Path, help="another checkout, run first")
    p.add_argument(
        "--fork-first",
        action="store_true",
        help="fork the next re-plan before the replaced plan is freed",
    )
    p.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.measure:
        print(json.dumps(measure(args.arrivals, args.fork_first)))
        return
    here = Path(__file__).resolve().parent.parent
    runs = {}
    for name, checkout in (("before", args.before), ("this", here)):
        if checkout is None:
            continue
        load = os.getloadavg()
        done = subprocess.run(
            [sys.executable, __file__, "--measure", "--arrivals", str(args.arrivals)]
            + ["--fork-first"] * args.fork_first,
            env={**os.environ, "PYTHONPATH": str(checkout.resolve())},
            capture_output=True,
            text=True,
            check=True,
        )
        runs[name] = {
            "checkout": str(checkout),
            "load_before": load,
            "load_after": os.getloadavg(),
            **json.loads(done.stdout),
        }
        print(name, json.dumps(runs[name]), flush=True)
    RESULTS.mkdir(exist_ok=True)
    name = "replan_commit_fork_first.json" if args.fork_first else "replan_commit.json"
    (RESULTS / name).write_text(json.dumps(runs, indent=2) + "\n")


if __name__ == "__main__":
    main()
