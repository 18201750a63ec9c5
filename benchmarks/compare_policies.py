"""Regenerate the policy-comparison figures of RESULTS.md from the grids in benchmarks/compare/.

For each grid NAME (benchmarks/compare/NAME.yaml) this runs ``chronus compare`` into a work
directory, copies its PNGs to benchmarks/figures/NAME/ and writes
benchmarks/results/compare_NAME.json
(the sweep's wall time, executor and every results row). ``--check EXECUTOR`` runs the same grid a
second time on another executor and counts rows whose metrics differ (wall time aside). Usage:

    PYTHONPATH=. python benchmarks/compare_policies.py [--grids philly,load] [--executor process]
        [--workers 2] [--check ray] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def status(result) -> str:
    """A run's outcome for the progress line: its wall time, or why it failed."""
    if result.failed:
        return "FAILED " + result.row["error"]
    return format(result.row["wall_seconds"], ".1f") + " s"


def sweep(name: str, executor: str, workers: int | None, work: Path) -> tuple[float, "object"]:
    from chronus_py.sweep import compare, make_grid, read_grid

    config = HERE / "compare" / f"{name}.yaml"
    grid = make_grid(config, read_grid(config))
    started = time.perf_counter()
    outcome = compare(
        grid,
        work,
        executor=executor,
        workers=workers,
        command=f"chronus compare --config benchmarks/compare/{name}.yaml --executor {executor}",
        on_result=lambda r, done, total: print(
            f"  [{done}/{total}] {r.config.key} {status(r)}", flush=True
        ),
    )
    return time.perf_counter() - started, outcome


def rows_of(out: Path) -> list[dict]:
    import pandas as pd

    table = pd.read_csv(out / "results.csv", keep_default_na=False, na_values=[""])
    return json.loads(table.to_json(orient="records"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grids", default="philly,load")
    parser.add_argument("--executor", default="process")
    parser.add_argument("--workers", type=int)
    parser.add_argument("--check", help="second executor whose metrics must equal the first's")
    parser.add_argument(
        "--work", type=Path, help="keep run directories here (resumable) instead of a temp dir"
    )
    args = parser.parse_args()
    from chronus_py.sweep import same_metrics

    base = args.work or Path(tempfile.mkdtemp(prefix="compare-"))
    for name in args.grids.split(","):
        out = base / name / args.executor
        print(f"{name}: {args.executor} -> {out}", flush=True)
        wall, outcome = sweep(name, args.executor, args.workers, out)
        print(
            f"{name}: {outcome.ran} runs in {wall:.0f} s ({outcome.skipped} resumed, "
            f"{outcome.failed} failed)"
        )
        figures = HERE / "figures" / name
        figures.mkdir(parents=True, exist_ok=True)
        for png in outcome.figures:
            shutil.copy(png, figures / png.name)
        record = {
            "grid": name,
            "executor": args.executor,
            "workers": args.workers,
            "sweep_seconds": wall,
            "runs_made": outcome.ran,
            "runs_resumed": outcome.skipped,
            "failed": outcome.failed,
            "report": (out / "report.md").read_text(),
            "rows": rows_of(out),
        }
        if args.check:
            check_out = base / name / args.check
            check_wall, _ = sweep(name, args.check, args.workers, check_out)
            ours = {r["run"]: r for r in record["rows"]}
            theirs = {r["run"]: r for r in rows_of(check_out)}
            differ = sorted(
                k for k in ours if k not in theirs or not same_metrics(ours[k], theirs[k])
            )
            record["check"] = {
                "executor": args.check,
                "sweep_seconds": check_wall,
                "runs": len(theirs),
                "differing_runs": differ,
            }
            print(
                f"{name}: {args.check} in {check_wall:.0f} s; {len(differ)} of {len(ours)} runs "
                f"differ: {differ}"
            )
        (HERE / "results").mkdir(exist_ok=True)
        (HERE / "results" / f"compare_{name}.json").write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
