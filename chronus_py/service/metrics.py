"""Prometheus metrics of the service (``GET /metrics``), on a registry of its own so two services
in one process (tests) never share counters. Gauges are read at scrape time from the service."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from chronus_py.service import rounds

_LATENCY = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0)


class ServiceMetrics:
    def __init__(self):
        self.registry = CollectorRegistry()
        self.round_seconds = Histogram(
            "chronus_round_seconds",
            "Wall seconds per scheduling round",
            buckets=_LATENCY,
            registry=self.registry,
        )
        self.admission_seconds = Histogram(
            "chronus_admission_seconds",
            "Wall seconds to answer a submission",
            buckets=_LATENCY,
            registry=self.registry,
        )
        self.request_seconds = Histogram(
            "chronus_request_seconds",
            "Wall seconds from reading a request to its answer, by handler (the waits for "
            "the event loop, the request's batch and the lock included)",
            ["handler"],
            buckets=_LATENCY,
            registry=self.registry,
        )
        self.up = Gauge("chronus_up", "1 while the service runs", registry=self.registry)
        self.up.set(1)
        self.service = None

    def attach(self, service) -> None:
        self.service = service
        self.registry.register(_Collector(service))

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _Collector:
    def __init__(self, service):
        self.service = service

    def collect(self):
        service = self.service
        scheduler = service.scheduler
        jobs = GaugeMetricFamily("chronus_jobs", "Jobs by state", labels=["state"])
        counts = service.db.counts()
        pending, running = rounds.job_counts(scheduler)
        counts.update({"pending": pending, "running": running})
        for state, n in sorted(counts.items()):
            jobs.add_metric([state], n)
        yield jobs
        yield GaugeMetricFamily(
            "chronus_guaranteed_jobs",
            "Active jobs holding a guarantee",
            value=len(service.promised),
        )
        yield GaugeMetricFamily(
            "chronus_free_gpus", "GPUs free after the last round", value=rounds.free_gpus(scheduler)
        )
        slo, met = service.db.slo_outcomes()
        yield GaugeMetricFamily(
            "chronus_finished_slo_jobs", "Finished jobs with deadlines", value=slo
        )
        ratio = GaugeMetricFamily(
            "chronus_first_deadline_ratio",
            "Share of finished SLO jobs that met their first deadline",
        )
        if slo:
            ratio.add_metric([], met / slo)
        yield ratio
        submissions = CounterMetricFamily(
            "chronus_submissions", "Submissions by admission", labels=["decision"]
        )
        for decision, n in sorted(service.counters.submissions.items()):
            submissions.add_metric([decision], n)
        yield submissions
        stats = rounds.solver_stats(scheduler)
        yield CounterMetricFamily(
            "chronus_solver_fallbacks",
            "Lease plans solved by the greedy fallback",
            value=0 if stats is None else stats.fallbacks,
        )
        yield CounterMetricFamily(
            "chronus_demotions", "Guarantees withdrawn", value=service.counters.demotions
        )
        yield CounterMetricFamily(
            "chronus_rounds", "Scheduling rounds", value=service.counters.rounds
        )
        yield CounterMetricFamily(
            "chronus_backend_errors",
            "Backend calls that failed",
            value=service.counters.backend_errors,
        )
        yield CounterMetricFamily(
            "chronus_rebuilds",
            "Scheduler rebuilt from the backend's view "
            "(start, and after any disagreement or backend error)",
            value=service.counters.resyncs,
        )
        yield GaugeMetricFamily(
            "chronus_backend_now", "The backend's clock (seconds)", value=service.backend.now()
        )
