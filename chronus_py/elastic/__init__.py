"""Elastic mode: jobs that may run on any power-of-two size between a minimum and a maximum.

A job's progress is ``throughput[model][global batch][gpus]`` iterations per second (strong
scaling at a fixed global batch), read from a throughput table directory. The job and its state
are the rigid world's (:class:`chronus_py.model.Job`, :class:`chronus_py.state.JobState`): a rigid
job is one with a single size.

Modules: ``throughputs`` (the table reader), ``jobs`` (an elastic job's sizes; traces are read
into jobs by ``chronus_py.readers.elastic``), ``leaseplan`` (the free-GPU timeline and the
minimum-satisfactory-share fill), ``policies`` (elastic Chronus, an ElasticFlow-style peer,
elastic EDF), ``engine`` (the elastic event loop), ``replay`` (a ``ReplaySetup`` replayed
elastically), ``sizing`` (a waiting elastic job's size in a round) and ``cli`` (the ``--elastic``
flags).
"""
