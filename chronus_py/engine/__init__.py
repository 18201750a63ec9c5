"""The replay engine: a discrete-event world that plays the cluster manager for a trace and
reports the metrics.

``loop.replay`` is the one entry point for rigid, elastic and mixed traces: it drives the
:class:`~chronus_py.scheduler.Scheduler` for a policy that orders a queue, and the elastic event
loop (``elastic``) for a policy that names every job's size. Both keep the one job record
(``chronus_py.jobs.state.JobState``), charge the named overhead model and return one
:class:`ReplayResult`, summarised by ``metrics`` (one summary, one ``jobs.csv``). ``clock`` orders
arrivals and completions, ``profiling`` is the profiling pool, and ``setup`` builds a whole replay
from its options (``elastic_setup`` reads a trace elastically).
"""

from chronus_py.engine.loop import ReplayResult, replay
from chronus_py.engine.metrics import summarize, write_jobs_csv

__all__ = ["ReplayResult", "replay", "summarize", "write_jobs_csv"]
