"""Every policy on every bundled trace through ``chronus replay --json``, and whether the metrics
match an earlier run's: the check that a refactor moved no result.

    python benchmarks/replay_all.py [--out replay_all.json] [--compare OLD.json]
    python benchmarks/replay_all.py --source /path/to/other/checkout --out old.json

Each run is a fresh ``python -m chronus_py replay`` of ``--source`` (default: this checkout), so
two checkouts can be measured with the same script. ``--compare`` reports, per run, the metrics
that differ (wall time aside) and exits 1 if any does.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
TRACES = ("philly-slo", "philly-mix1", "philly-mix2")
POLICIES = ("chronus", "srtf", "srtf-gpu", "edf", "fifo", "las")
CLOCK = {"wall_seconds"}


def replay(source: Path, trace: str, policy: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(source)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "chronus_py",
            "replay",
            "--trace",
            trace,
            "--policy",
            policy,
            "--json",
        ],
        cwd=source,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def differences(old: dict, new: dict) -> list[str]:
    """Metric names whose values differ (a key only the new run has does not count)."""
    return [key for key in old if key not in CLOCK and old[key] != new.get(key)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--out", default="replay_all.json")
    parser.add_argument("--compare", type=Path, help="an earlier output of this script")
    parser.add_argument(
        "--policies", default=",".join(POLICIES), help="comma-separated (default: all)"
    )
    args = parser.parse_args()
    runs = {}
    for trace in TRACES:
        for policy in args.policies.split(","):
            runs[f"{trace}/{policy}"] = metrics = replay(args.source.resolve(), trace, policy)
            print(
                f"{trace:12s} {policy:9s} DSR {metrics['slo_deadline_ratio']:.4f}  "
                f"{metrics['wall_seconds']:6.1f} s",
                flush=True,
            )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / args.out).write_text(json.dumps(runs, indent=1) + "\n")
    if args.compare is None:
        return 0
    old = json.loads(args.compare.read_text())
    both = [run for run in runs if run in old]
    moved = {run: differences(old[run], runs[run]) for run in both}
    moved = {run: keys for run, keys in moved.items() if keys}
    print(f"{len(both) - len(moved)} of {len(both)} runs identical (wall time aside)")
    for run, keys in moved.items():
        print(f"  {run}: {', '.join(keys)} differ")
    return 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main())
