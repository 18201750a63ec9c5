"""Built-in policies by name. To add one: write a class with a ``key`` (see ``base``), register
it here with the options it takes, and add a test on a hand-computed trace.

``make_policy(name, options)`` is the one way every entry point (state file, ``chronus replay``,
sweep grids, the service) builds a policy from untrusted options: Chronus takes the fields of
:class:`~chronus_py.selector.ChronusSettings`, LAS its queue thresholds, the others nothing.

The elastic policies (``ELASTIC``: elastic Chronus, the ElasticFlow-style peer, elastic EDF,
``chronus_py.policies.elastic``) are registered here too; they name every job's size at each
event rather than order a queue, so they replay (``chronus_py.engine.replay`` runs them behind its
``ElasticScheduler``) but do not plan a round. The two lease-planning ones take the lease
planner's settings of the same ChronusSettings (``lease``, ``headroom``; elastic Chronus also
``backend`` and ``time_limit_s``) from elastic mode's defaults (``ELASTIC_DEFAULTS``).
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Callable, Mapping

from chronus_py.errors import InputError
from chronus_py.policies.base import LeaseReport, OrderPolicy, Policy, View
from chronus_py.policies.chronus import Chronus
from chronus_py.policies.elastic import ElasticEDF, elastic_chronus, elasticflow
from chronus_py.policies.las import LAS
from chronus_py.policies.priority import EDF, FIFO, SRTF, SRTFGPU
from chronus_py.selector import ChronusSettings


def _chronus(options: Mapping[str, Any]) -> Chronus:
    return Chronus(ChronusSettings.from_mapping(options))


def _las(options: Mapping[str, Any]) -> LAS:
    return LAS(**options)


def _plain(cls: type) -> Callable[[Mapping[str, Any]], Policy]:
    return lambda options: cls()


POLICIES: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "fifo": _plain(FIFO),
    "srtf": _plain(SRTF),
    "srtf-gpu": _plain(SRTFGPU),
    "edf": _plain(EDF),
    "las": _las,
    "chronus": _chronus,
    "elastic-chronus": elastic_chronus,
    "elasticflow": elasticflow,
    "elastic-edf": _plain(ElasticEDF),
}
ELASTIC = ("elastic-chronus", "elasticflow", "elastic-edf")
ROUND_POLICIES = tuple(name for name in POLICIES if name not in ELASTIC)
"""The policies a scheduling round (``chronus plan``, ``chronus serve``) can run."""
OPTIONS: dict[str, tuple[str, ...]] = {
    "chronus": tuple(f.name for f in fields(ChronusSettings)),
    "las": ("thresholds",),
    "elastic-chronus": ("lease", "headroom", "backend", "time_limit_s"),
    "elasticflow": ("lease", "headroom"),
}


def policy_options(name: str) -> tuple[str, ...]:
    """The option names policy ``name`` takes (empty for the plain baselines)."""
    return OPTIONS.get(name, ())


def make_policy(
    name: str, options: Mapping[str, Any] | None = None, *, source: str = "--policy"
) -> Policy:
    """The policy ``name`` with ``options``; an unknown name or a bad option is an InputError
    naming ``source`` and the option."""
    if name not in POLICIES:
        raise InputError(source, f"unknown policy {name!r} (have: {', '.join(POLICIES)})")
    options = dict(options or {})
    unknown = sorted(set(options) - set(policy_options(name)))
    if unknown:
        have = ", ".join(policy_options(name)) or "none"
        raise InputError(source, f"{name} has no option {unknown[0]!r} (have: {have})")
    try:
        return POLICIES[name](options)
    except (TypeError, ValueError) as exc:
        raise InputError(source, str(exc)) from None


__all__ = [
    "POLICIES",
    "ELASTIC",
    "ROUND_POLICIES",
    "Policy",
    "OrderPolicy",
    "View",
    "LeaseReport",
    "make_policy",
    "policy_options",
    "FIFO",
    "SRTF",
    "SRTFGPU",
    "EDF",
    "LAS",
    "Chronus",
]
