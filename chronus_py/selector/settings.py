"""The knobs of lease-based selection, in one place: the ``chronus`` policy is built from them
(``Chronus(headroom=0.5)``, sweep options) and hands them to its :class:`LeaseSelector`."""
from __future__ import annotations

from dataclasses import dataclass, fields

from chronus_py.selector.leases import DEFAULT_LEASE


@dataclass
class LeaseSettings:
    """``lease``: seconds per lease. ``objective``: the plan's secondary goal (``minimize`` keeps
    guaranteed work out of the current lease, ``maximize`` runs it early, ``adaptive`` switches as
    the artifact does). ``backend``: ``cpsat``, ``cbc`` or None (greedy only), with
    ``time_limit_s`` per solve and CP-SAT's ``deterministic_time`` budget (same plan on any
    machine). ``gpus_per_node``: for rounding GPU requests up in the plan. ``headroom``: the share
    of capacity new guarantees may not use (kept for short unguaranteed jobs). ``margin``: extra
    relative work planned for every job. ``guard``: seconds of slack a laxity trigger keeps: a job
    turns due (guaranteed) or urgent (unguaranteed) that long before it would have to start.
    Defaults are the measured best on the Philly traces (benchmarks/RESULTS.md). For ``guard``
    that is a trade: 2 h instead of 60 s lifts the first-deadline ratio from 0.9874 / 0.9940 /
    0.9790 to 0.9902 / 0.9979 / 0.9861 (SLO / MIX1 / MIX2) and stops fewer jobs, because long
    jobs no longer start at the last moment and get preempted; best-effort jobs wait longer
    (MIX1 488 -> 558 min, MIX2 596 -> 759). 4 h gains little more DSR for much more JCT."""

    lease: float = DEFAULT_LEASE
    objective: str = "minimize"
    backend: str | None = "cpsat"
    time_limit_s: float = 2.0
    deterministic_time: float | None = 0.2
    gpus_per_node: int = 8
    headroom: float = 0.7
    margin: float = 0.0
    guard: float = 7200.0

    def settings(self) -> LeaseSettings:
        """These settings alone (a copy, also when called on a subclass such as the policy)."""
        return LeaseSettings(**{f.name: getattr(self, f.name) for f in fields(LeaseSettings)})
