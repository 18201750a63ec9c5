"""Elastic mode: jobs that may run on any power-of-two size between a minimum and a maximum.

A job's progress is ``throughput[model][global batch][gpus]`` iterations per second (strong
scaling at a fixed global batch), read from a throughput table directory. The job and its state
are the rigid world's (:class:`chronus_py.model.Job`, :class:`chronus_py.state.JobState`): a rigid
job is one with a single size.

Modules: ``throughputs`` (the table reader), ``jobs`` (an ITP job's sizes and the ITP trace
reader), ``overhead`` (the resize overhead model), ``leaseplan`` (the free-GPU timeline and the
minimum-satisfactory-share fill), ``policies`` (elastic Chronus, an ElasticFlow-style peer,
elastic EDF), ``engine`` (the replay), ``metrics`` (the summary and the elastic ceiling) and
``cli`` (what ``chronus replay --elastic`` runs).
"""
