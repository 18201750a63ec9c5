"""What one service round spends listing Slurm's jobs: ``arrivals()`` then ``jobs()``, the two
looks of every round, on a private cluster holding ``--jobs`` accepted chronus jobs, with this
checkout's backend and with the backend of ``--base`` (a git revision, read with ``git show``),
alternating round by round in one process so both see the same load.

    sudo [CHRONUS_TEST_SLURM=PREFIX] PYTHONPATH=. python benchmarks/slurm_listing.py \\
        [--jobs 200] [--rounds 20] [--base d6a468d]

Prints medians and the ratio; results go to ``results/slurm_listing_<release>.json``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from chronus_py.backends.slurm import marker
from chronus_py.backends.slurm.backend import SlurmBackend
from chronus_py.backends.slurm.lab import SlurmLab, why_not_here
from chronus_py.backends.slurm.rest import SlurmRest

RESULTS = Path(__file__).resolve().parent / "results"
MODULE = "chronus_py/backends/slurm/backend.py"


def backend_class(revision: str, tmp: Path) -> type:
    """The ``SlurmBackend`` of another revision, loaded beside this checkout's."""
    path = tmp / "backend_base.py"
    path.write_text(
        subprocess.run(
            ["git", "show", f"{revision}:{MODULE}"], capture_output=True, text=True, check=True
        ).stdout
    )
    spec = importlib.util.spec_from_file_location("backend_base", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SlurmBackend


def one_round(b) -> float:
    t0 = time.perf_counter()
    b.arrivals()
    b.jobs()
    return time.perf_counter() - t0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=200)
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--base", default="d6a468d")
    args = p.parse_args()
    why = why_not_here()
    if why:
        print(why, file=sys.stderr)
        return 2
    out: dict = {"jobs": args.jobs, "rounds": args.rounds, "base": args.base}
    with tempfile.TemporaryDirectory(prefix="slurm-listing-") as tmp:
        base_class = backend_class(args.base, Path(tmp))
        with SlurmLab(Path(tmp) / "lab", nodes=2, gpus_per_node=4) as lab:
            out["slurm"] = lab.release
            rest = SlurmRest(f"unix:{lab.socket}")
            out["api"] = rest.version
            for i in range(args.jobs):
                user = marker.parse(f"chronus: estimate=60 deadline=+2h id=j{i}").user
                comment = marker.render(user, accepted=True)
                lab.sbatch("--hold", "--gres=gpu:1", "--comment", comment)
            backends = {
                "this": SlurmBackend(rest, partition=lab.partition, env=lab.env),
                "base": base_class(rest, partition=lab.partition, env=lab.env),
            }
            assert len(backends["this"].jobs()) == args.jobs, "the jobs are not all listed"
            out["load_before"] = os.getloadavg()
            times: dict[str, list[float]] = {k: [] for k in backends}
            for _ in range(args.rounds):
                for name, b in backends.items():
                    times[name].append(one_round(b))
            out["load_after"] = os.getloadavg()
            out["listing_s"] = min(
                (lambda t0: (rest.jobs(), time.perf_counter() - t0)[1])(time.perf_counter())
                for _ in range(3)
            )
    for name, ts in times.items():
        out[f"round_{name}_median_s"] = round(statistics.median(ts), 3)
    out["ratio_this_over_base"] = round(out["round_this_median_s"] / out["round_base_median_s"], 3)
    print(json.dumps(out, indent=2))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"slurm_listing_{out['slurm']}.json").write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
