"""The library behind ``chronus compare``: run a grid into a results directory, then report.

Runs already finished in the directory are skipped (resume); the others go to the executor and
are written as they finish. The report and figures are always rebuilt from the whole table, so
an interrupted and resumed sweep ends with the same files as an uninterrupted one.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from chronus_py.sweep.executors import execute
from chronus_py.sweep.grid import Grid, RunConfig
from chronus_py.sweep.report import write_report
from chronus_py.sweep.run import RunResult
from chronus_py.sweep.store import ResultsStore

OnResult = Callable[[RunResult, int, int], None]


@dataclass(frozen=True)
class Comparison:
    out: Path
    ran: int
    skipped: int
    failed: int
    report: Path
    figures: tuple[Path, ...]
    plots_skipped: str = ""


def order_for_balance(configs: list[RunConfig]) -> list[RunConfig]:
    """Lease-planning policies (by far the slowest runs) first, so a pool does not end on one."""
    return sorted(configs, key=lambda c: c.lease_min is None)


def compare(
    grid: Grid,
    out: Path,
    *,
    executor: str = "process",
    workers: int | None = None,
    ray_address: str | None = None,
    on_result: OnResult | None = None,
    plots: bool = True,
    command: str = "chronus compare",
) -> Comparison:
    store = ResultsStore(out)
    configs = grid.runs()
    todo = order_for_balance([c for c in configs if c.key not in store.done])
    failed = 0
    for done, result in enumerate(
        execute(todo, executor, workers=workers, ray_address=ray_address), 1
    ):
        store.add(result)
        failed += result.failed
        if on_result:
            on_result(result, done, len(todo))
    store.write_parquet()
    order = {c.key: i for i, c in enumerate(configs)}
    table = store.table()
    table = table[table["run"].isin(order)].sort_values("run", key=lambda runs: runs.map(order))
    figures: list[Path] = []
    note = ""
    if plots and (table["error"].isna()).any():
        if importlib.util.find_spec("matplotlib") is None:
            note = "Figures skipped: matplotlib is not installed (pip install 'chronus-py[plots]')."
        else:
            from chronus_py.sweep.plots import draw_all

            figures = draw_all(table, store.series(), out)
    report = write_report(table, out, command=command, figures=figures, note=note)
    return Comparison(
        out, len(todo), len(configs) - len(todo), failed, report, tuple(figures), note
    )
