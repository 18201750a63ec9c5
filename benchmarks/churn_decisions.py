"""Do two checkouts decide alike under churn, and what does a round cost each? The service
(``Service``, in-process, no HTTP) on the sim backend at 1,024 nodes x 8 GPUs, filled as
``serve_load.py`` fills it (1,024 jobs of 8 GPUs on every GPU, then 5,000 waiting, 70% with a
deadline), then ``--rounds`` rounds of churn: before each, ``--submits`` submissions and as
many cancellations (the waiting fill jobs in a random order, then the churn's own), as
``serve_load.py --churn`` sends them between two rounds at 500 + 500 a second.

    python benchmarks/churn_decisions.py --checkout A --checkout B [--rounds 300]

Each checkout runs in its own process. The sim's clock is this script's, not the wall's: it
moves 1 ms per request and 20 ms per round, so both checkouts see the same instants and their
decision logs (every line but its timestamp: admissions, starts, preemptions, late starts,
cancellations, promises) must be equal, line for line. A live server cannot show that (its
decisions follow wall time). Reports per checkout the thread CPU of a round's three locked
steps (``take_arrivals``, ``decide``, ``record``: what holds the request lock), their p50 /
p99, and a digest of the log; writes ``--out`` (JSON) and exits 1 if the logs differ.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def run(rounds: int, submits: int, log_path: Path) -> dict:
    """One checkout's churn (the checkout is the one on ``sys.path``)."""
    import logging
    import random
    import tempfile
    import time

    from chronus_py.backends import sim
    from chronus_py.service import rounds as service_rounds
    from chronus_py.service.core import Caller, Service
    from chronus_py.service.db import Database

    class Clock:
        """Stands in for the ``time`` module in the sim backend: its wall clock is ours."""

        now = 1_000_000.0

        def time(self) -> float:
            return self.now

        def __getattr__(self, name: str):
            return getattr(time, name)

    clock = Clock()
    sim.time = clock
    handler = logging.FileHandler(log_path, "w")
    handler.setFormatter(logging.Formatter("%(message)s"))
    logging.getLogger("chronus.serve").addHandler(handler)
    logging.getLogger("chronus.serve").setLevel(logging.INFO)
    workdir = Path(tempfile.mkdtemp(prefix="churn-decisions-"))
    options = argparse.Namespace(speed=1.0, nodes=1024, gpus_per_node=8, trace=None, sim_state=None)
    backend = sim.from_args(options, db_path=workdir / "chronus.db")
    service = Service(backend, Database(workdir / "chronus.db"), service_rounds.SchedulerSettings())
    caller = Caller("default", admin=True)
    rng = random.Random(1)

    def body(job_id: str, gpus: int | None = None, estimate: float | None = None) -> dict:
        work = estimate or rng.choice((7200.0, 14400.0, 28800.0, 57600.0))
        gpus = gpus or rng.choice((1, 1, 1, 2, 4, 8))
        out = {"id": job_id, "gpus": gpus, "estimate_seconds": work}
        if rng.random() < 0.7:
            out["deadlines"] = [{"at": backend.now() + work * rng.uniform(1.5, 4.0)}]
        return out

    def request(call, *args) -> None:
        clock.now += 0.001
        call(*args)

    for i in range(1024):
        request(service.submit, body(f"b{i}", 8, 800.0), caller)
    service.tick()
    fill = [f"b{1024 + i}" for i in range(5000)]
    for job_id in fill:
        request(service.submit, body(job_id), caller)
    service.tick()
    cancels = random.Random(3).sample(fill, len(fill))
    own: list[str] = []
    cpu: list[float] = []
    for r in range(rounds):
        for k in range(submits):
            request(service.submit, body(f"c{r}-{k}"), caller)
            own.append(f"c{r}-{k}")
            request(service.cancel, cancels.pop() if cancels else own.pop(0), caller)
        clock.now += 0.02
        held = 0.0
        for step in (service.take_arrivals, service.decide, service.record):
            began = time.thread_time()
            step()
            held += time.thread_time() - began
            if step is not service.record and service.to_act:
                service.act()
        cpu.append(held)
    handler.close()
    cpu.sort()
    return {
        "rounds": rounds,
        "round_cpu_ms_mean": round(1000 * sum(cpu) / len(cpu), 3),
        "round_cpu_ms_p50": round(1000 * cpu[len(cpu) // 2], 3),
        "round_cpu_ms_p99": round(1000 * cpu[int(0.99 * len(cpu))], 3),
        "running": len(service.scheduler.running),
        "pending": len(service.scheduler.active) - len(service.scheduler.running),
    }


def decisions(log_path: Path) -> list[str]:
    """The log's JSON lines, each without its timestamp (the lines carry none but ``now``)."""
    return [line for line in log_path.read_text().splitlines() if line.startswith("{")]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkout", type=Path, action="append", required=True)
    p.add_argument("--rounds", type=int, default=300)
    p.add_argument("--submits", type=int, default=25, help="submissions (as many cancels) a round")
    p.add_argument("--out", default="churn_decisions.json", help="name under benchmarks/results")
    p.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child is not None:
        print(json.dumps(run(args.rounds, args.submits, args.child)))
        return
    reports = []
    for n, checkout in enumerate(args.checkout):
        log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"churn_decisions_{os.getpid()}_{n}.log"
        child = subprocess.run(
            [
                sys.executable,
                __file__,
                "--checkout",
                str(checkout),
                "--rounds",
                str(args.rounds),
                "--submits",
                str(args.submits),
                "--child",
                str(log_path),
            ],
            cwd=checkout,
            env={**os.environ, "PYTHONPATH": str(checkout.resolve())},
            capture_output=True,
            text=True,
            check=True,
        )
        lines = decisions(log_path)
        report = json.loads(child.stdout.splitlines()[-1])
        report.update(
            checkout=str(checkout),
            log_lines=len(lines),
            starts=sum('"event":"start"' in line for line in lines),
            preemptions=sum('"event":"preempt"' in line for line in lines),
            digest=hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16],
        )
        reports.append(report)
        print(json.dumps(report), flush=True)
    same = len({r["digest"] for r in reports}) == 1
    out = {"command": " ".join(["python", *sys.argv]), "same_decisions": same, "checkouts": reports}
    (RESULTS / args.out).parent.mkdir(parents=True, exist_ok=True)
    (RESULTS / args.out).write_text(json.dumps(out, indent=2) + "\n")
    print("same decisions:", same)
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
