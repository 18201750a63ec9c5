"""Evaluation sweeps: policies x traces x parameters, run on a process pool or Ray, into a
resumable results table, a Markdown report and PNG figures (``chronus compare``)."""

from chronus_py.sweep.compare import Comparison, compare
from chronus_py.sweep.executors import EXECUTORS, execute
from chronus_py.sweep.grid import Grid, RunConfig, make_grid, read_grid
from chronus_py.sweep.run import RunResult, run, safe_run, same_metrics

__all__ = [
    "Comparison",
    "compare",
    "EXECUTORS",
    "execute",
    "Grid",
    "RunConfig",
    "make_grid",
    "read_grid",
    "RunResult",
    "run",
    "safe_run",
    "same_metrics",
]
