"""One-command demo: ``python -m chronus_py.backends.slurm.demo`` (root, Slurm installed).

Starts a private 4-node Slurm cluster (4 fake GPUs per node) in a temporary directory, runs
``chronus serve --backend slurm`` in front of it, submits a small mixed workload the way users
would (``sbatch --hold --comment 'chronus: ...'``), in compressed time (1 wall second = 2 min),
prints what Slurm recorded for each job, and stops every daemon it started.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from chronus_py.backends.slurm.lab import SlurmLab, why_not_here
from chronus_py.backends.slurm.replay import run, summary, synthetic_trace


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m chronus_py.backends.slurm.demo", description=__doc__.split("\n\n")[1]
    )
    p.add_argument("--jobs", type=int, default=16, help="jobs to run (default 16)")
    p.add_argument(
        "--scale", type=float, default=120.0, help="chronus seconds per wall second (default 120)"
    )
    args = p.parse_args(argv)
    why = why_not_here()
    if why is not None:
        print(f"demo: {why}", file=sys.stderr)
        return 2
    jobs = synthetic_trace(args.jobs, seed=7, span=args.jobs * 240.0)
    with tempfile.TemporaryDirectory(prefix="chronus-slurm-demo-") as tmp:
        with SlurmLab(Path(tmp) / "lab", nodes=4, gpus_per_node=4) as lab:
            print(f"private Slurm cluster up: 4 nodes x 4 GPUs, SLURM_CONF={lab.conf}")
            print(
                f"submitting {len(jobs)} held jobs with the chronus marker; chronus serve "
                "places them"
            )
            outcomes = run(
                lab,
                jobs,
                chronus=True,
                scale=args.scale,
                workdir=Path(tmp),
                progress=lambda done, n: print(f"\r{done}/{n} jobs ended", end=""),
            )
            print()
    print(
        f"{'slurm id':>8} {'gpus':>4} {'work':>6} {'deadline':>9} {'finished':>9} "
        f"{'requeues':>8}  guaranteed  met"
    )
    for o in outcomes:
        deadline = "-" if o.job.deadline is None else f"{o.job.deadline / 60:.0f}m"
        print(
            f"{o.slurm_id:>8} {o.job.gpus:>4} {o.job.work / 60:>5.0f}m {deadline:>9} "
            f"{(o.end - o.submit) / 60:>8.0f}m {o.restarts:>8}  {str(o.guaranteed):>10}  "
            f"{'-' if o.met is None else o.met}"
        )
    print(summary(outcomes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
