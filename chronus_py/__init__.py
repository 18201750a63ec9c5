"""chronus-py: deadline-aware scheduling of deep-learning training jobs on GPU clusters.

One scheduling round, in the order the data flows (``chronus plan`` in ``cli/plan.py`` is this
list as a command; ``replay`` runs it at every decision point of a trace):

1. **Jobs** (:class:`Job`, :class:`DeadlineOption`) on a :class:`Cluster` come from a cluster
   manager's state file (``state_file.load_state``) or a trace (:func:`read_trace`).
2. **Profile**: :class:`Profile` fits per-iteration time from short 1- and 2-node runs and
   predicts the job's runtime at its GPU count; the estimate and its band become the
   scheduler's view of the job (:class:`Scheduler` takes an estimator).
3. **Select**: the policy orders the jobs. :class:`Chronus` asks its lease selector
   (:class:`LeaseSelector`) which SLO jobs are guaranteed and which must run in this lease, the
   MILP in ``solvers`` keeping every guarantee; everything else follows by remaining GPU-time.
4. **Place**: :meth:`Scheduler.plan` walks that order against an allocator from ``placement``
   (the HiveD-style :class:`CellAllocator`, or a consolidated one) and starts, keeps or
   preempts jobs.
5. **Host configs**: ``layers.emit_host_layers`` turns the placements into an ``scx_layered``
   config per host that protects each job's latency-critical threads.
6. **Plan**: :func:`assemble_plan` turns the round into per-job decisions a cluster manager acts on.
"""
from chronus_py.model import Cluster, DeadlineOption, Job, JobKind, Node
from chronus_py.plan import Plan, assemble_plan
from chronus_py.policies import Chronus, make_policy
from chronus_py.profiler import Profile
from chronus_py.readers import read_trace
from chronus_py.replay import replay, summarize
from chronus_py.scheduler import Round, Scheduler
from chronus_py.selector import LeaseSelector
from placement import CellAllocator

__all__ = ["Cluster", "DeadlineOption", "Job", "JobKind", "Node", "Profile", "Scheduler", "Round",
           "Chronus", "make_policy", "LeaseSelector", "CellAllocator", "Plan", "assemble_plan",
           "read_trace", "replay", "summarize"]
