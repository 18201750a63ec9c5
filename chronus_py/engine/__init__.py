"""The replay engine: a discrete-event world that plays the cluster manager for a trace and
reports the metrics.

One loop (``loop.replay``) for rigid, elastic and mixed traces. It reads the policy's kind and
puts a stage behind it: the :class:`~chronus_py.scheduler.Scheduler` for a policy that orders a
queue, the :class:`~chronus_py.engine.elastic.ElasticScheduler` for one that names every job's
size. Both take the same calls - ``submit`` an arrival, ``finish`` a completion,
``next_wakeup``, and the round's ``select`` then ``place`` (``chronus_py.round.advance``), which
return what started, stopped or was resized - and keep the one job record
(``chronus_py.jobs.state.JobState``). The loop owns the one clock (``clock``: arrival groups,
the completion of every run segment, wake-ups) and the jobs' true work: each started or resized
run's completion is stamped on the clock, a stale one is dropped. ``resize`` moves an elastic job
to a new size on the allocator, ``profiling`` is the profiling pool, ``metrics`` the one summary
and ``jobs.csv``, and ``setup`` builds a whole replay from its options (``elastic_setup`` for
an elastic one).
"""

from chronus_py.engine.loop import ReplayResult, replay
from chronus_py.engine.metrics import summarize, write_jobs_csv

__all__ = ["ReplayResult", "replay", "summarize", "write_jobs_csv"]
