"""Run one list of jobs on a private Slurm cluster twice over: through ``chronus serve --backend
slurm`` (held jobs with the marker) or under plain Slurm (the same jobs, not held, first come
first served), in compressed time, and read back from Slurm what happened to each.

Used by the one-command demo (``python -m chronus_py.backends.slurm.demo``) and by
``benchmarks/slurm_trace.py``. Times in a :class:`TraceJob` are chronus seconds; at time scale K
a job of ``work`` seconds sleeps ``work / K`` wall seconds, in 1-second checkpointed steps.
"""

from __future__ import annotations

import math
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from chronus_py.backends.slurm import marker
from chronus_py.backends.slurm.backend import chronus_id
from chronus_py.backends.slurm.harness import ServeProcess
from chronus_py.backends.slurm.lab import SlurmLab, workload
from chronus_py.backends.slurm.rest import SlurmRest
from chronus_py.service.db import Database


@dataclass(frozen=True, slots=True)
class TraceJob:
    at: float  # arrival, seconds after the run's start
    gpus: int
    work: float  # seconds of work (the estimate chronus is given, exact here)
    deadline: float | None  # seconds after arrival; None: best-effort


@dataclass
class Outcome:
    """What happened to one job (chronus seconds from the run's start): its submission as the
    harness timed it (Slurm resets a job's submit time when it is requeued, which would move a
    preempted job's deadline later), the rest as Slurm recorded it."""

    job: TraceJob
    slurm_id: int
    submit: float = math.nan
    end: float = math.nan
    state: str = ""
    restarts: int = 0
    guaranteed: bool = False
    met: bool | None = None  # None for best-effort jobs
    chronus: dict = field(default_factory=dict)  # the service's answer for the job, if it ran


def synthetic_trace(
    n: int,
    *,
    seed: int = 1,
    span: float = 5 * 3600.0,
    slo_share: float = 0.5,
    deadline_hours: tuple[float, float] = (2, 4),
) -> list[TraceJob]:
    """``n`` jobs arriving over ``span`` seconds: 1/2/4 GPUs, log-normal work (median 10 min,
    1 min - 1 h), half of them with a deadline ``deadline_hours`` (uniform, default 2-4 h) plus
    1-3 times their work after arrival."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        work = min(max(rng.lognormvariate(math.log(600), 0.8), 60.0), 3600.0)
        deadline = None
        if rng.random() < slo_share:
            deadline = rng.uniform(*deadline_hours) * 3600 + rng.uniform(1, 3) * work
        out.append(
            TraceJob(
                at=rng.uniform(0, span),
                gpus=rng.choice((1, 1, 2, 2, 4)),
                work=round(work),
                deadline=deadline and round(deadline),
            )
        )
    return sorted(out, key=lambda j: j.at)


def run(
    lab: SlurmLab,
    jobs: list[TraceJob],
    *,
    chronus: bool,
    scale: float,
    workdir: Path,
    timeout: float = 1800.0,
    serve_args: tuple[str, ...] = (),
    progress=None,
    exact: bool = False,
) -> list[Outcome]:
    """Submit ``jobs`` at their times (compressed by ``scale``) and wait until all ended.
    A job runs ``max(1, round(work / scale))`` wall seconds; chronus is told ``work``, or with
    ``exact`` that rounded amount (what the script really runs)."""
    origin = time.time()

    def v(t: float) -> float:
        return (t - origin) * scale

    serve = None
    if chronus:
        serve = ServeProcess(
            lab,
            workdir / "chronus.db",
            "--slurm-time-scale",
            f"{scale:g}",
            "--slurm-time-origin",
            f"{origin:.3f}",
            *serve_args,
        ).start()
    rest = SlurmRest(f"unix:{lab.socket}")
    outcomes: list[Outcome] = []
    try:
        pending = list(jobs)
        while pending:
            wall_at = origin + pending[0].at / scale
            if time.time() < wall_at:
                time.sleep(min(wall_at - time.time(), 0.5))
                continue
            j = pending.pop(0)
            steps = max(1, round(j.work / scale))
            args = [f"--gres=gpu:{j.gpus}"]
            if chronus:
                comment = f"chronus: estimate={steps * scale if exact else j.work:g}"
                if j.deadline is not None:
                    comment += f" deadline=+{j.deadline:g}"
                args = ["--hold", *args, "--comment", comment]
            submit = v(time.time())
            outcomes.append(Outcome(j, lab.sbatch(*args, script=workload(steps)), submit))
        ids = {o.slurm_id: o for o in outcomes}
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            live = [
                s
                for s in rest.jobs()
                if s.id in ids and s.state in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING")
            ]
            if progress is not None:
                progress(len(ids) - len(live), len(ids))
            if not live:
                break
            time.sleep(1.0)
        chronus_view = serve.jobs() if serve is not None else {}
    finally:
        if serve is not None:
            serve.stop()
    history = Database(workdir / "chronus.db") if serve is not None else None
    for s in rest.jobs():
        o = ids.get(s.id)
        if o is None:
            continue
        o.end, o.state, o.restarts = v(s.end_time), s.state, s.restart_cnt
        o.chronus = chronus_view.get(chronus_id(s), {}) if marker.is_marked(s.comment) else {}
        if history is not None and o.chronus:
            o.chronus["promises"] = history.promises(o.chronus["id"])
            o.chronus["decisions"] = history.decisions(o.chronus["id"])
        o.guaranteed = o.chronus.get("admission", {}).get("decision") == "guaranteed"
        if o.job.deadline is not None:
            o.met = s.state == "COMPLETED" and o.end <= o.submit + o.job.deadline
    if history is not None:
        history.close()
    return outcomes


def summary(outcomes: list[Outcome]) -> dict:
    slo = [o for o in outcomes if o.job.deadline is not None]
    guaranteed = [o for o in slo if o.guaranteed]
    done = [o for o in outcomes if o.state == "COMPLETED"]
    return {
        "jobs": len(outcomes),
        "completed": len(done),
        "states": dict(Counter(o.state for o in outcomes)),
        "slo_jobs": len(slo),
        "deadline_ratio": sum(bool(o.met) for o in slo) / len(slo) if slo else None,
        "guaranteed": len(guaranteed),
        "guarantees_kept": sum(bool(o.met) for o in guaranteed),
        "preemptions": sum(o.restarts for o in outcomes),
        "makespan_s": max((o.end for o in done), default=0.0),
        "mean_jct_s": (sum(o.end - o.submit for o in done) / len(done)) if done else None,
        "broken": [broken(o) for o in guaranteed if not o.met],
    }


def broken(o: Outcome) -> dict:
    """One broken guarantee, as the harness and chronus each saw it, so it can be explained: how
    late the job ended (``times``: the harness's submission stamp, Slurm's end), and the
    service's own times, promises and decisions for it (its seconds)."""
    view = o.chronus
    return {
        "slurm_id": o.slurm_id,
        "gpus": o.job.gpus,
        "work": o.job.work,
        "deadline": o.job.deadline,
        "state": o.state,
        "restarts": o.restarts,
        "late_s": o.end - (o.submit + o.job.deadline),
        "times": {"submit": o.submit, "end": o.end},
        "chronus": {
            k: view.get(k)
            for k in (
                "submit",
                "deadlines",
                "guaranteed",
                "first_start",
                "finished_at",
                "starts",
                "promises",
                "decisions",
            )
        },
    }
