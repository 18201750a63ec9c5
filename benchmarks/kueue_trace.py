"""A 200-job compressed trace on a private Kubernetes control plane (Kueue, kwok nodes): the
first-deadline ratio and the guarantees kept under ``chronus serve --backend kueue`` (a
ClusterQueue with chronus's admission check), beside the same Jobs under Kueue alone (a
ClusterQueue with ``BestEffortFIFO`` and no check), with the same quota and the same nodes.

Compressed time: one wall second is ``--scale`` trace seconds (default 120), so the 5-hour
arrival span takes 2.5 wall minutes. Jobs: ``replay.synthetic_trace`` (the Slurm trace's
generator: 1/2/4 GPUs, log-normal work with median 10 min, half of them with a deadline of
``--deadline-hours`` (default 2-6 h) plus 1-3 times their work after arrival). Each Job is one
pod that kwok runs for its work / scale wall seconds once bound (its ``pod-complete`` stage
delay). Both runs share one control plane, one after the other, on the same 4 nodes x 4 GPUs;
each has its own namespace and queue.

Checkpoints: a Job chronus preempts is suspended by Kueue and its pod deleted; when it runs
again, kwok would replay the whole duration. The harness stands in for the checkpoint a
training job writes: it measures how long the Job's pods were Running, and while the Job is
suspended sets its pod template's ``pod-complete`` delay to what is left. (A patch that comes
after the Job was resumed is counted as ``late_patches``: that run replays the old remainder.)

Outcomes are stamped by the harness (it polls Jobs and pods every ``--poll`` wall seconds):
submission when it creates the Job, end when it first sees the Job's ``Complete`` condition.
Guarantees are chronus's own answer for each job (``GET /v1/jobs``). A Job whose Workload was
deactivated (chronus refused it: its deadline had passed when Kueue first reserved quota for it,
and chronus only sees reserved Workloads) ends the wait as ``refused``: it never runs.

Quota: ``--quota`` GPUs per ClusterQueue (several values: every mode at each). Kueue reserves
within it in FIFO order; chronus decides only among what Kueue reserved, so a quota close to the
GPUs hides the queue from chronus, and a very large one hands it every Job.

    PYTHONPATH=. nice python benchmarks/kueue_trace.py [--jobs 200] [--scale 120]
        [--quota 32 10000] [--deadline-hours 2 6] [--modes kueue-fifo chronus]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from chronus_py.backends.kueue import harness
from chronus_py.backends.kueue.lab import ControlPlane, job, why_not_here
from chronus_py.backends.slurm.replay import TraceJob, synthetic_trace

RESULTS = Path(__file__).resolve().parent / "results"
CHECK = "chronus-trace"
COMPLETE_DELAY = "pod-complete.stage.kwok.x-k8s.io/"


@dataclass
class Tracked:
    """One Job of the trace as the harness saw it (wall seconds, ``time.time()``)."""

    name: str
    job: TraceJob
    submit: float
    ran: float = 0.0  # wall seconds its pods were Running, over every run
    runs: int = 0  # pods that reached Running
    live: set[str] = field(default_factory=set)  # names of its pods Running at the last look
    patched_for: int = 0  # the run count its remainder was last written for
    owed: bool = False  # suspended after a run, its remainder not yet written
    end: float | None = None
    failed: bool = False
    refused: bool = False  # its Workload deactivated (chronus refused it): it never runs


def annotations(j: TraceJob) -> dict[str, str]:
    """chronus's annotations for a trace job: its exact work, its deadline if it has one."""
    notes = {"chronus.io/estimate": f"{j.work:g}"}
    if j.deadline is not None:
        notes["chronus.io/deadline"] = f"+{j.deadline:g}"
    return notes


def delay(seconds: float) -> dict[str, str]:
    """The pod template annotations that make kwok complete a pod ``seconds`` after Running."""
    text = f"{max(seconds, 0.05):.3f}s"
    return {COMPLETE_DELAY + "delay": text, COMPLETE_DELAY + "jitter-delay": text}


class Run:
    """Submit the trace into one namespace and queue, follow its Jobs and pods until all ended."""

    def __init__(self, cp: ControlPlane, ns: str, queue: str, scale: float, poll: float):
        self.cp, self.ns, self.queue, self.scale, self.poll = cp, ns, queue, scale, poll
        self.tracked: dict[str, Tracked] = {}
        self.patches = 0
        self.late_patches = 0
        self.refused_patches = 0
        self.last_look = time.time()
        self.looks = 0

    def go(self, jobs: list[TraceJob], timeout: float) -> float:
        """Run the trace; the wall time of its origin (trace time 0)."""
        origin = time.time()
        pending = list(enumerate(jobs))
        end = origin + jobs[-1].at / self.scale + timeout
        while time.time() < end:
            now = time.time()
            while pending and origin + pending[0][1].at / self.scale <= now:
                i, j = pending.pop(0)
                self.submit(f"j{i:03d}", j)
            self.look()
            if not pending and all(t.end is not None for t in self.tracked.values()):
                break
            time.sleep(self.poll)
        return origin

    def submit(self, name: str, j: TraceJob) -> None:
        manifest = job(
            name,
            self.queue,
            namespace=self.ns,
            gpus=j.gpus,
            run_seconds=j.work / self.scale,
            annotations=annotations(j),
        )
        self.tracked[name] = Tracked(name, j, time.time())
        self.cp.apply(manifest)

    def look(self) -> None:
        now = time.time()
        dt, self.last_look = now - self.last_look, now
        self.looks += 1
        if self.looks % 8 == 0:
            self.refusals(now)
        pods = self.cp.api("GET", f"/api/v1/namespaces/{self.ns}/pods")["items"]
        running: dict[str, set[str]] = {}
        for p in pods:
            owner = (p["metadata"].get("labels") or {}).get("job-name")
            if owner in self.tracked and p["status"].get("phase") == "Running":
                if not p["metadata"].get("deletionTimestamp"):
                    running.setdefault(owner, set()).add(p["metadata"]["name"])
        for name, t in self.tracked.items():
            now_running = running.get(name, set())
            if t.live:
                t.ran += dt
            t.runs += len(now_running - t.live)
            t.live = now_running
        for j in self.cp.api("GET", f"/apis/batch/v1/namespaces/{self.ns}/jobs")["items"]:
            t = self.tracked.get(j["metadata"]["name"])
            if t is None or t.end is not None:
                continue
            conds = {c["type"]: c["status"] for c in (j.get("status") or {}).get("conditions", [])}
            if conds.get("Complete") == "True" or conds.get("Failed") == "True":
                t.end, t.failed = now, conds.get("Complete") != "True"
                t.live = set()
            elif j["spec"].get("suspend") and (t.owed or t.runs > t.patched_for):
                t.owed = True
                self.checkpoint(t)
            elif t.owed:  # resumed before the remainder was written: it replays the old one
                self.late_patches += 1
                t.owed, t.patched_for = False, t.runs

    def refusals(self, now: float) -> None:
        """Jobs whose Workload was deactivated end here: chronus refused them (a deadline
        already past when Kueue first reserved quota for it), and they would never run."""
        for wl in self.cp.api("GET", f"/apis/{self.cp.kueue_api}/namespaces/{self.ns}/workloads")[
            "items"
        ]:
            if wl["spec"].get("active", True):
                continue
            for ref in wl["metadata"].get("ownerReferences") or []:
                t = self.tracked.get(ref.get("name"))
                if t is not None and t.end is None:
                    t.end, t.failed, t.refused = now, True, True

    def checkpoint(self, t: Tracked) -> None:
        """Set a suspended Job's remaining run time (its work less the time its pods ran). The
        API server refuses it until the Job controller has reset the Job's start time after the
        suspension (the template is mutable only then): tried again at the next look."""
        left = t.job.work / self.scale - t.ran
        body = {"spec": {"template": {"metadata": {"annotations": delay(left)}}}}
        try:
            self.cp.api(
                "PATCH",
                f"/apis/batch/v1/namespaces/{self.ns}/jobs/{t.name}",
                body,
                content_type="application/merge-patch+json",
            )
        except httpx.HTTPStatusError:
            self.refused_patches += 1
            return
        self.patches += 1
        t.owed, t.patched_for = False, t.runs


def chronus_ids(cp: ControlPlane, ns: str) -> dict[str, str]:
    """Job name -> chronus id (``<namespace>.<workload name>``)."""
    out = {}
    for wl in cp.api("GET", f"/apis/{cp.kueue_api}/namespaces/{ns}/workloads")["items"]:
        for ref in wl["metadata"].get("ownerReferences") or []:
            if ref.get("kind") == "Job":
                out[ref["name"]] = f"{ns}.{wl['metadata']['name']}"
    return out


def summary(run: Run, origin: float, views: dict[str, dict], ids: dict[str, str]) -> dict:
    """The run's outcome in trace seconds (``views``: chronus's answer per chronus id)."""

    def v(wall: float) -> float:
        return (wall - origin) * run.scale

    rows = []
    for t in run.tracked.values():
        view = views.get(ids.get(t.name, ""), {})
        done = t.end is not None and not t.failed
        met = None
        if t.job.deadline is not None:
            met = done and v(t.end) <= v(t.submit) + t.job.deadline
        rows.append(
            {
                "name": t.name,
                "gpus": t.job.gpus,
                "work": t.job.work,
                "deadline": t.job.deadline,
                "submit": round(v(t.submit), 1),
                "end": None if t.end is None else round(v(t.end), 1),
                "runs": t.runs,
                "refused": t.refused,
                "guaranteed": (view.get("admission") or {}).get("decision") == "guaranteed",
                "met": met,
            }
        )
    slo = [r for r in rows if r["deadline"] is not None]
    guaranteed = [r for r in slo if r["guaranteed"]]
    done = [r for r in rows if r["end"] is not None and not r["refused"]]
    return {
        "jobs": len(rows),
        "completed": len(done),
        "refused": sum(r["refused"] for r in rows),
        "slo_jobs": len(slo),
        "deadlines_met": sum(bool(r["met"]) for r in slo),
        "deadline_ratio": round(sum(bool(r["met"]) for r in slo) / len(slo), 4) if slo else None,
        "guaranteed": len(guaranteed),
        "guarantees_kept": sum(bool(r["met"]) for r in guaranteed),
        "preemptions": sum(max(r["runs"] - 1, 0) for r in rows),
        "mean_jct_s": round(statistics.fmean(r["end"] - r["submit"] for r in done), 1)
        if done
        else None,
        "makespan_s": max((r["end"] for r in done), default=0.0),
        "patches": run.patches,
        "late_patches": run.late_patches,
        "refused_patches": run.refused_patches,
        "broken": [r for r in guaranteed if not r["met"]],
        "missed": [r["name"] for r in slo if not r["met"]],
    }


def run_mode(
    cp: ControlPlane,
    kubeconfig: Path,
    tmp: Path,
    mode: str,
    quota: int,
    jobs: list[TraceJob],
    args,
) -> dict:
    ns = f"trace-{mode}-q{quota}"
    chronus = mode == "chronus"
    cp.make_queues(ns, quota, ns, admission_checks=[CHECK] if chronus else [])
    run = Run(cp, ns, ns, args.scale, args.poll)
    serve = None
    if chronus:
        serve = harness.ServeProcess(
            cp,
            kubeconfig,
            tmp / f"chronus-q{quota}.db",
            f"--kueue-controller-name=chronus.io/{CHECK}",
            "--solver=cpsat",
            f"--time-limit={args.time_limit:g}",
            scale=args.scale,
            lease=1200.0,
            headroom=0.5,
            guard=7200.0,
            poll=args.kueue_poll,
        ).start()
    t0 = time.monotonic()
    served = cp.server_writes()
    writes: dict = {}
    reads: dict = {}
    try:
        origin = run.go(jobs, args.timeout)
        views = serve.jobs() if serve is not None else {}
    finally:
        if serve is not None:
            serve.stop()
            writes = next(iter(serve.events("kueue_writes")), {})
            reads = next(iter(serve.events("kueue_reads")), {})
            if args.log:
                shutil.copyfile(serve.log, f"{args.log}.q{quota}")
    out = summary(run, origin, views, chronus_ids(cp, ns) if chronus else {})
    out["wall_s"] = round(time.monotonic() - t0, 1)
    # every client's writes the API server served meanwhile (Kueue's, kube-controller-manager's,
    # kwok's, the scheduler's, this harness's, chronus's): what the trace costs the API server
    after = cp.server_writes()
    delta = {k: v - served.get(k, 0) for k, v in after.items() if v > served.get(k, 0)}
    out["server_writes"] = dict(sorted(delta.items(), key=lambda kv: -kv[1])[:8])
    out["server_writes_per_job"] = round(sum(delta.values()) / len(jobs), 2)
    out["server_writes_per_s"] = round(sum(delta.values()) / out["wall_s"], 2)
    if chronus:  # the controller's API writes (its count at shutdown), in all and per Job
        by_kind = {k: v for k, v in writes.items() if k != "event"}
        out["api_writes"] = by_kind
        out["api_writes_per_job"] = round(sum(by_kind.values()) / len(jobs), 2)
        if reads:  # single-object reads (watches aside), counted since session 13
            out["api_reads_per_job"] = round(reads.get("workload or job", 0) / len(jobs), 2)
    return out


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=200)
    p.add_argument("--scale", type=float, default=120.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--deadline-hours", type=float, nargs=2, default=(2.0, 6.0))
    p.add_argument("--nodes", type=int, default=4)
    p.add_argument("--gpus-per-node", type=int, default=4)
    p.add_argument(
        "--quota",
        type=int,
        nargs="+",
        default=[32],
        help="GPU quota of each ClusterQueue; several: every mode at each",
    )
    p.add_argument(
        "--modes", nargs="+", choices=("kueue-fifo", "chronus"), default=["kueue-fifo", "chronus"]
    )
    p.add_argument("--time-limit", type=float, default=0.5, help="chronus's solver cap, s")
    p.add_argument("--kueue-poll", type=float, default=0.3, help="chronus's --kueue-poll, s")
    p.add_argument("--poll", type=float, default=0.25, help="the harness's look, wall s")
    p.add_argument("--timeout", type=float, default=1200.0, help="wall s after the last arrival")
    p.add_argument("--out", default="kueue_trace.json")
    p.add_argument("--log", help="copy chronus serve's log to LOG.q<quota>")
    args = p.parse_args()
    why = why_not_here()
    if why:
        print(why, file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _interrupt)  # so every daemon is stopped on the way out
    jobs = synthetic_trace(args.jobs, seed=args.seed, deadline_hours=tuple(args.deadline_hours))
    out: dict = {
        "command": " ".join(sys.argv),
        "jobs": args.jobs,
        "scale": args.scale,
        "seed": args.seed,
        "deadline_hours": list(args.deadline_hours),
        "nodes": args.nodes,
        "gpus_per_node": args.gpus_per_node,
        "quota": args.quota,
        "machine": platform.node(),
        "load_before": os.getloadavg(),
        "runs": {},
    }
    with harness.control_plane("kueue-trace-") as (cp, kubeconfig, tmp):
        for i in range(args.nodes):
            cp.add_node(f"gpu-{i + 1}", args.gpus_per_node)
        harness.admission_check(cp, CHECK, f"chronus.io/{CHECK}")
        for quota in args.quota:
            for mode in args.modes:
                s = run_mode(cp, kubeconfig, tmp, mode, quota, jobs, args)
                out["runs"][f"{mode}-q{quota}"] = s
                brief = {k: v for k, v in s.items() if k not in ("broken", "missed")}
                print(f"{mode} quota {quota}", json.dumps(brief), flush=True)
    out["load_after"] = os.getloadavg()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {RESULTS / args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
