"""Estimating runtimes nobody gave: in-place measurement and what a job's answer says about it.

``report`` holds :class:`EstimateState`, the part of a job's answer that says what is known of
its runtime and what is promised; ``in_place`` the replay's realistic estimation stage (a new
job runs at once on its own GPUs, is measured there, and gets its admission answer then).
"""
from chronus_py.estimation.in_place import InPlaceEstimation
from chronus_py.estimation.report import EstimateState, Phase, Promise, describe

__all__ = ["EstimateState", "InPlaceEstimation", "Phase", "Promise", "describe"]
