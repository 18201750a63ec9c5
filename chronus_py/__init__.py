"""chronus-py: deadline-aware scheduling of deep-learning training jobs on GPU clusters.

One scheduling round, in the order the data flows (``chronus_py/round.py`` holds it; ``chronus
plan`` in ``cli/plan.py`` runs it once, the service once per wake-up, ``replay`` at every event):

1. **Jobs** (:class:`Job`, :class:`DeadlineOption`) on a :class:`Cluster` come from a cluster
   manager's state file (``state_file.load_state``, a reader that only reads) or a trace
   (:func:`read_trace`); :func:`build_scheduler` puts them in a :class:`Scheduler`.
2. **Profile**: :class:`Profile` fits per-iteration time from short 1- and 2-node runs and
   predicts the job's runtime at its GPU count; every source of estimates (``estimates``:
   oracle, fixed, profiled, noisy, the replay's profiling pool, in-place measurement) is one
   ``Estimator`` the scheduler takes. A job nobody can give a runtime is measured in place, and
   each decision says its estimate state (``estimates.report``). An elastic job waiting for GPUs
   gets its size here too, from the policy (``Policy.size``): its smallest size the lease plan can
   still guarantee.
3. **Select** (:meth:`Scheduler.select`): the policy orders the jobs. :class:`Chronus`, configured
   by one :class:`ChronusSettings`, asks its lease selector (:class:`LeaseSelector`) which SLO
   jobs are guaranteed and which must run in this lease, the MILP in ``solvers`` keeping every
   guarantee; everything else follows by remaining GPU-time.
4. **Place** (:meth:`Scheduler.place`): that order is walked against an allocator from
   ``placement`` (the HiveD-style :class:`CellAllocator`, or a consolidated one), which starts,
   keeps or preempts jobs.
5. **Host configs** (``round.host_configs``): an ``scx_layered`` config per host that protects
   each job's latency-critical threads.
6. **Plan** (``round.assemble``): per-job decisions a cluster manager acts on, as a :class:`Plan`.

What a caller hands the :class:`Scheduler` and :func:`run_round` is checked there: a bad job,
number, time or report is one :class:`ArgumentError` (a job id the scheduler does not hold, a
:class:`JobIdError`) naming the argument or field, raised before anything changes
(``chronus_py/jobs/checks.py``).
"""

from chronus_py.engine import replay, summarize
from chronus_py.errors import ArgumentError, JobIdError
from chronus_py.estimates import Estimator, Fixed, Noisy, Oracle, Profiled
from chronus_py.jobs.model import Cluster, DeadlineOption, Job, JobKind, Node
from chronus_py.plan import JobDecision, Plan
from chronus_py.policies import Chronus, make_policy
from chronus_py.profiler import Profile
from chronus_py.readers import read_trace
from chronus_py.round import build_scheduler, run_round
from chronus_py.scheduler import Moves, Scheduler
from chronus_py.selector import ChronusSettings, LeaseSelector
from placement import CellAllocator

__all__ = [
    "Cluster",
    "DeadlineOption",
    "Job",
    "JobKind",
    "Node",
    "Profile",
    "Estimator",
    "Oracle",
    "Fixed",
    "Profiled",
    "Noisy",
    "Scheduler",
    "Moves",
    "Chronus",
    "ChronusSettings",
    "make_policy",
    "LeaseSelector",
    "CellAllocator",
    "Plan",
    "JobDecision",
    "build_scheduler",
    "run_round",
    "read_trace",
    "replay",
    "summarize",
    "ArgumentError",
    "JobIdError",
]
