"""The names chronus goes by in a cluster unless told otherwise: the ``spec.controllerName`` of
its AdmissionChecks and the extended resource it counts as GPUs. A module of their own because
both the backend and its flags (``entry.py``, which must not import the backend) use them."""

CONTROLLER = "chronus.io/deadline"
GPU = "nvidia.com/gpu"
