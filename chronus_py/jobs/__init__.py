"""The one job model, for rigid and elastic jobs alike.

``model`` holds what is submitted (:class:`Job`, its deadline options, the :class:`Cluster`): a job
may run on any of its ``sizes``, making ``rate(n)`` units of work per second on ``n`` GPUs; a rigid
job is one with a single size and no throughput curve. ``state`` is the one mutable record a
scheduler or replay keeps per job (:class:`JobState`: status, progress, starts, pauses, sizes).
``overhead`` is what a (re)start or resize costs, one interface with two models chosen by name
(the Chronus artifact's extra work per start, ElasticFlow's pause). ``throughputs`` reads the
per-(model, global batch) throughput tables; ``sizes`` derives an elastic job's sizes from its
curve (powers of two up to its fastest); ``sizing`` checks an elastic range a cluster manager
submits against those tables; ``checks`` checks what a library caller hands the scheduler (a job,
a number, a time) and holds the errors it raises.
"""
