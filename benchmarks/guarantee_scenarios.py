"""Do guarantees hold with exact estimates? Random small clusters, counted.

With exact runtimes a guaranteed job should never be demoted nor miss its promised deadline.
This replays many random job streams (the distribution of ``tests/core/test_properties.py``:
1-3 nodes of 4 or 8 GPUs, 5-30 jobs of 1-8 GPUs, 60-3000 s, strict, soft or best-effort
deadlines 1-4x their runtime after submission; Chronus on the ``--solver`` backend with a random
lease, headroom, guard and objective) and counts scenarios with a demotion, demotions,
guaranteed jobs, guaranteed jobs that missed, and SLO jobs that met their first deadline.
Small clusters make the lease plan tight, which is where the re-plan has gone wrong before.

    python benchmarks/guarantee_scenarios.py [--scenarios 1500] [--seed 1] [--overhead-scale 1]
        [--solver greedy] [--shape small] [--out FILE]

``--overhead-scale`` multiplies what every start costs (30-120 s for 1-8 GPUs): 10 makes a
start cost about a lease, as a cluster manager's long start latency (a preempted pod's grace
period) does with no guard. ``--solver`` is greedy by default, as the earlier counts were made
(no search: fast and exactly repeatable); ``cpsat`` is the service's and replay's default.
``--shape large`` draws 4-12 nodes of 8 GPUs and 40-120 jobs of 1-32 GPUs instead: wide jobs
around which the plan must split narrower ones.

Run it with ``PYTHONPATH=<another checkout>`` to count an earlier version on the same scenarios.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from chronus_py.engine.loop import replay
from chronus_py.jobs.model import Cluster, DeadlineOption, Job, JobKind
from chronus_py.jobs.overhead import ChronusRestart
from chronus_py.policies import Chronus
from chronus_py.selector.settings import ChronusSettings

ROOT = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Shape:
    """The clusters and job streams drawn: nodes, GPUs per node, jobs, and job widths."""

    nodes: tuple[int, int]
    per_node: tuple[int, ...]
    jobs: tuple[int, int]
    widths: tuple[int, ...]


SHAPES = {
    "small": Shape((1, 3), (4, 8), (5, 30), (1, 1, 1, 2, 4, 8)),
    "large": Shape((4, 12), (8,), (40, 120), (1, 1, 1, 2, 4, 8, 16, 32)),
}


def scenario(
    rng: random.Random, solver: str = "greedy", shape: Shape = SHAPES["small"]
) -> tuple[list[Job], Cluster, Chronus]:
    nodes, per_node = rng.randint(*shape.nodes), rng.choice(shape.per_node)
    jobs = []
    for i in range(rng.randint(*shape.jobs)):
        submit, duration = rng.randint(0, 4000), rng.randint(60, 3000)
        gpus = min(rng.choice(shape.widths), nodes * per_node)
        kind = rng.choice(["best", "strict", "soft"])
        first = submit + rng.randint(10, 40) * duration / 10
        options = {"best": (), "strict": ((first, 10),), "soft": ((first, 10), (2 * first, 4))}
        deadlines = tuple(DeadlineOption(at, value) for at, value in options[kind])
        job_kind = {"best": JobKind.BEST_EFFORT, "strict": JobKind.STRICT_SLO}
        jobs.append(
            Job(
                f"j{i}",
                "t",
                gpus,
                float(submit),
                job_kind.get(kind, JobKind.SOFT_SLO),
                deadlines,
                float(duration),
            )
        )
    settings = ChronusSettings(
        backend=solver,
        lease=rng.choice([600.0, 1200.0]),
        headroom=rng.choice([0.0, 0.5]),
        guard=rng.choice([0.0, 60.0, 600.0]),
        objective=rng.choice(["minimize", "maximize", "adaptive"]),
    )
    return jobs, Cluster.uniform(nodes, per_node), Chronus(settings)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=1500)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--overhead-scale", type=float, default=1.0)
    parser.add_argument("--solver", choices=("greedy", "cpsat", "cbc"), default="greedy")
    parser.add_argument("--shape", choices=tuple(SHAPES), default="small")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "guarantee_scenarios.json")
    args = parser.parse_args(argv)
    if not 0 <= args.overhead_scale < float("inf"):
        parser.error(f"--overhead-scale: must be a number >= 0, got {args.overhead_scale:g}")
    rng = random.Random(args.seed)
    counts = {"scenarios": args.scenarios, "overhead_scale": args.overhead_scale}
    counts |= {"solver": args.solver, "shape": args.shape}
    counts |= {"with_demotion": 0, "demotions": 0}
    counts |= {"guaranteed": 0, "guaranteed_missed": 0, "slo_jobs": 0, "first_deadline_met": 0}
    started = time.perf_counter()
    for _ in range(args.scenarios):
        jobs, cluster, policy = scenario(rng, args.solver, SHAPES[args.shape])
        result = replay(jobs, cluster, policy, overhead=ChronusRestart(args.overhead_scale))
        demoted = policy.solver_stats().demoted
        counts["with_demotion"] += bool(demoted)
        counts["demotions"] += len(demoted)
        for state in result.jobs:
            if state.job.deadlines:
                counts["slo_jobs"] += 1
                counts["first_deadline_met"] += state.finish <= state.job.deadlines[0].at + 1e-6
            if state.was_guaranteed is not None:
                counts["guaranteed"] += 1
                counts["guaranteed_missed"] += state.finish > state.was_guaranteed.at + 1e-6
    counts["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(counts))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"seed": args.seed, **counts}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
