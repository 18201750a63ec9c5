"""The headline figures: one function computes them, ``/metrics`` exports them (a collector on
the service's registry) and the web view shows them, so both always say the same.

"Rolling" means the last day of the backend's clock (jobs that finished in it). A small history
of them is sampled after rounds, at most every ``EVERY`` wall seconds, for the sparklines.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

from prometheus_client.core import GaugeMetricFamily

from chronus_py.service import rounds

WINDOW = 86400.0
EVERY = 10.0
KEEP = 360


@dataclass(frozen=True, slots=True)
class Figure:
    key: str
    metric: str
    title: str
    unit: str  # "ratio", "seconds", "count"
    help: str


FIGURES = (
    Figure(
        "deadline_ratio",
        "chronus_first_deadline_ratio_rolling",
        "first-deadline ratio (24 h)",
        "ratio",
        "Share of the SLO jobs finished in the last day (backend clock) that met their "
        "first deadline",
    ),
    Figure(
        "be_jct",
        "chronus_best_effort_jct_seconds_rolling",
        "best-effort JCT (24 h)",
        "seconds",
        "Mean completion time of the best-effort jobs finished in the last day",
    ),
    Figure(
        "utilization",
        "chronus_gpu_utilization",
        "GPU utilisation",
        "ratio",
        "Share of the cluster's GPUs running jobs after the last round",
    ),
    Figure("made", "chronus_guarantees_made", "guarantees made", "count", "Jobs ever guaranteed"),
    Figure(
        "kept",
        "chronus_guarantees_kept",
        "guarantees kept",
        "count",
        "Guaranteed jobs that finished by their guaranteed deadline",
    ),
    Figure(
        "demoted",
        "chronus_guarantees_demoted",
        "guarantees demoted",
        "count",
        "Guarantees withdrawn (recorded in the database, across restarts)",
    ),
    Figure(
        "preemptions",
        "chronus_preemptions",
        "preemptions",
        "count",
        "Preemptions decided (the audit log)",
    ),
    Figure(
        "round_p50",
        "chronus_round_seconds_p50",
        "round latency p50",
        "seconds",
        "Median wall seconds of the last 1,000 rounds",
    ),
    Figure(
        "round_p99",
        "chronus_round_seconds_p99",
        "round latency p99",
        "seconds",
        "99th percentile wall seconds of the last 1,000 rounds",
    ),
)


def figures(service) -> dict[str, float | None]:
    """The headline numbers now (call with the service's lock held)."""
    conn = service.db.conn
    since = service.backend.now() - WINDOW
    slo, met = conn.execute(
        "SELECT COUNT(*), COALESCE(SUM(finished_at <= first_deadline), 0) FROM job"
        " WHERE state='finished' AND first_deadline IS NOT NULL AND finished_at >= ?",
        (since,),
    ).fetchone()
    (jct,) = conn.execute(
        "SELECT AVG(finished_at - submit) FROM job"
        " WHERE state='finished' AND first_deadline IS NULL AND finished_at >= ?",
        (since,),
    ).fetchone()
    (made,) = conn.execute(
        "SELECT COUNT(DISTINCT job) FROM promise WHERE event='promised'"
    ).fetchone()
    (kept,) = conn.execute(
        "SELECT COUNT(*) FROM job WHERE state='finished' AND guaranteed_at IS NOT NULL"
        " AND finished_at <= guaranteed_at"
    ).fetchone()
    (demoted,) = conn.execute("SELECT COUNT(*) FROM promise WHERE event='demoted'").fetchone()
    (preempted,) = conn.execute("SELECT COUNT(*) FROM decision WHERE action='preempt'").fetchone()
    busy = rounds.busy_gpus(service.scheduler)
    latest = sorted(service.counters.round_seconds)
    return {
        "deadline_ratio": met / slo if slo else None,
        "be_jct": jct,
        "utilization": busy / service.cluster.gpus if service.cluster.gpus else None,
        "made": made,
        "kept": kept,
        "demoted": demoted,
        "preemptions": preempted,
        "round_p50": _quantile(latest, 0.5),
        "round_p99": _quantile(latest, 0.99),
    }


def _quantile(ordered: list[float], q: float) -> float | None:
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)] if ordered else None


class FiguresCollector:
    """Exports :func:`figures` on ``/metrics`` (read at scrape time, like the service's own)."""

    def __init__(self, service):
        self.service = service

    def collect(self):
        values = figures(self.service)
        for figure in FIGURES:
            family = GaugeMetricFamily(figure.metric, figure.help)
            if values[figure.key] is not None:
                family.add_metric([], float(values[figure.key]))
            yield family


class History:
    """The figures sampled over time: (backend time, values) pairs, the last ``KEEP``."""

    def __init__(self, service):
        self.service = service
        self.samples: deque[tuple[float, dict[str, float | None]]] = deque(maxlen=KEEP)
        self._next = 0.0

    def after_round(self) -> None:
        """Called after each round, in the round's thread (the lock held)."""
        if time.monotonic() < self._next:
            return
        self._next = time.monotonic() + EVERY
        self.samples.append((self.service.backend.now(), figures(self.service)))

    def series(self, key: str) -> list[tuple[float, float]]:
        return [(t, v[key]) for t, v in self.samples if v[key] is not None]
