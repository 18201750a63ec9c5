"""The knobs of lease-based selection, in one place: the ``chronus`` policy is built from them
(``Chronus(headroom=0.5)``, sweep options) and hands them to its :class:`LeaseSelector`."""
from __future__ import annotations

import math
from dataclasses import dataclass, fields

from chronus_py.selector.leases import DEFAULT_LEASE
from solvers import BACKENDS, OBJECTIVES

ADAPTIVE = "adaptive"


@dataclass
class LeaseSettings:
    """``lease``: seconds per lease. ``objective``: the plan's secondary goal (``minimize`` keeps
    guaranteed work out of the current lease, ``maximize`` runs it early, ``adaptive`` maximizes
    only after a round that refused no SLO job a guarantee, as the artifact does). ``backend``:
    ``cpsat``, ``cbc`` or None (greedy only), with ``time_limit_s`` per solve and CP-SAT's
    ``deterministic_time`` budget (same plan on any machine). ``gpus_per_node``: for rounding GPU requests up in the plan. ``headroom``: the share
    of capacity new guarantees may not use (kept for the SRTF pool). ``margin``: extra relative
    work planned for every job. ``guard``: seconds of slack a guaranteed job's laxity trigger
    keeps: it turns due that long before it would have to start.
    Defaults are the measured best on the Philly traces (benchmarks/RESULTS.md): headroom 0.9 gives
    first-deadline ratio 0.9953 / 0.9943 / 0.9929 (SLO / MIX1 / MIX2) against 0.9952 / 0.9947 /
    0.9896 at 0.7, and shorter best-effort JCT; the pool, ordered by GPU-time, meets more deadlines
    than guarantees carved out of it. ``guard`` 60 s and 2 h measure the same on MIX2 (0.9930 and
    0.9929); 2 h leaves room for estimates that turn out short."""

    lease: float = DEFAULT_LEASE
    objective: str = "minimize"
    backend: str | None = "cpsat"
    time_limit_s: float = 2.0
    deterministic_time: float | None = 0.2
    gpus_per_node: int = 8
    headroom: float = 0.9
    margin: float = 0.0
    guard: float = 7200.0

    def __post_init__(self) -> None:
        """Refuse a setting no plan could use, naming it: sweeps and cluster managers build these
        from their own input, and a negative guard or a headroom of 2 would only show up as odd
        plans much later."""
        if self.objective not in (*OBJECTIVES, ADAPTIVE):
            raise ValueError(f"objective: unknown {self.objective!r} (have: {', '.join(OBJECTIVES)}, {ADAPTIVE})")
        if self.backend is not None and self.backend not in BACKENDS:
            raise ValueError(f"backend: unknown {self.backend!r} (have: {', '.join(BACKENDS)} or None)")
        _check("lease", self.lease, positive=True)
        _check("time_limit_s", self.time_limit_s, positive=True)
        _check("margin", self.margin)
        _check("guard", self.guard)
        _check("headroom", self.headroom, most=1.0)
        if self.deterministic_time is not None:
            _check("deterministic_time", self.deterministic_time, positive=True)
        if isinstance(self.gpus_per_node, bool) or not isinstance(self.gpus_per_node, int) or self.gpus_per_node < 1:
            raise ValueError(f"gpus_per_node: must be an integer >= 1, got {self.gpus_per_node!r}")

    def settings(self) -> LeaseSettings:
        """These settings alone (a copy, also when called on a subclass such as the policy)."""
        return LeaseSettings(**{f.name: getattr(self, f.name) for f in fields(LeaseSettings)})


def _check(name: str, value: object, *, positive: bool = False, most: float = math.inf) -> None:
    """A finite number, >= 0 (> 0 if ``positive``) and <= ``most``, or a ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name}: expected a number, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise ValueError(f"{name}: must be {'> 0' if positive else '>= 0'}, got {value!r}")
    if value > most:
        raise ValueError(f"{name}: must be <= {most:g}, got {value!r}")
