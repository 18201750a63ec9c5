"""Trace replay: a discrete-event world that drives the scheduler, and the metrics it reports."""

from chronus_py.replay.engine import ReplayResult, replay
from chronus_py.replay.metrics import summarize, write_jobs_csv

__all__ = ["ReplayResult", "replay", "summarize", "write_jobs_csv"]
