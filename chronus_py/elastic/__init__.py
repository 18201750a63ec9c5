"""Elastic mode: jobs that may run on any power-of-two size between a minimum and a maximum.

A job's progress is ``throughput[model][global batch][gpus]`` iterations per second (strong
scaling at a fixed global batch), read from a throughput table directory. Rigid jobs are elastic
jobs whose minimum equals their maximum, so both kinds share one cluster and one replay engine.

Modules: ``throughputs`` (the table reader), ``jobs`` (the elastic job model; traces are read
into it by ``chronus_py.readers.elastic``), ``overhead`` (the resize overhead model),
``leaseplan`` (the free-GPU timeline and the minimum-satisfactory-share fill), ``policies``
(elastic Chronus, an ElasticFlow-style peer, elastic EDF), ``engine`` (the replay), ``metrics``
(the summary and the elastic ceiling), ``replay`` (a ``ReplaySetup`` replayed elastically) and
``cli`` (the ``--elastic`` flags).
"""
