"""The knobs of the Chronus policy, in one place, each default written once.

Every entry point builds a :class:`ChronusSettings` and hands it to the policy
(``Chronus(ChronusSettings(headroom=0.5))``): the state file's top-level keys, ``chronus replay``'s
flags (generated from the fields below), and sweep grids' ``options``. ``from_mapping`` is the one
checked path from untrusted values (a file, a request, a grid) to settings: an unknown or bad key
raises one ``ValueError`` naming it, so a typo never silently falls back to a default.

Elastic mode (``chronus_py.jobs``) reads the same settings (``lease`` and ``headroom`` for its
lease plan, ``backend`` and ``time_limit_s`` for its admission) from its own defaults,
``ELASTIC_DEFAULTS`` below.

The GPUs per node are not a setting: they are a fact of the cluster, and the selector takes them
from the scheduler's view, so a cluster of 4-GPU nodes rounds GPU requests to its own nodes.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from numbers import Real
from typing import Any, Mapping

from placement.loading import show
from solvers import BACKENDS, OBJECTIVES

ADAPTIVE = "adaptive"


def _knob(default: Any, flag: str, help: str) -> Any:
    """A setting with its command-line flag and help text (``chronus replay`` builds flags from
    them, so the default and its documentation live beside each other)."""
    return field(default=default, metadata={"flag": flag, "help": help})


@dataclass(frozen=True)
class ChronusSettings:
    """Defaults are the measured best on the Philly traces at 960 GPUs (benchmarks/RESULTS.md):
    headroom 0.9 gives first-deadline ratio 0.9953 / 0.9943 / 0.9929 (SLO / MIX1 / MIX2) against
    0.9952 / 0.9947 / 0.9896 at 0.7, and shorter best-effort JCT; the pool, ordered by GPU-time,
    meets more deadlines than guarantees carved out of it. ``guard`` 60 s and 2 h measure the
    same on MIX2 (0.9930 and 0.9929); 2 h leaves room for estimates that turn out short.
    ``headroom`` is the share of every lease's GPUs that new guarantees no wider than the rest
    (``capacity - int(headroom x capacity)`` GPUs: 96 of 960, 4 of 32) leave to the pool. A
    job wider than that rest can still be promised, in any GPUs the plan has free, when the
    GPU-time free before its deadline holds its own booking and the pool's work there, queued
    and expected to arrive (issue 28: ``LeaseSelector._place``), so the setting means the
    same at every size: the pool keeps its share of each lease, and a wide promise is made
    only where the pool would not need the GPUs it takes. Jobs no wider than the share, every
    Philly job at 960 GPUs, are admitted as those figures were measured."""

    lease: float = _knob(
        1200.0, "--lease", "seconds per lease; the plan is revised at every lease end"
    )
    objective: str = _knob(
        "minimize",
        "--objective",
        "the plan's secondary goal: minimize keeps guaranteed work out of the current "
        "lease, maximize runs it early, adaptive maximizes only after a round that "
        "refused no SLO job a guarantee (as the artifact does)",
    )
    backend: str = _knob("cpsat", "--solver", "lease-plan solver: cpsat, cbc or greedy (no search)")
    time_limit_s: float = _knob(
        2.0,
        "--time-limit",
        "seconds per solve, a safety cap (CP-SAT stops on its deterministic budget first)",
    )
    deterministic_time: float | None = _knob(
        0.2,
        "--deterministic-time",
        "CP-SAT's deterministic budget per solve: the same plan on any machine",
    )
    headroom: float = _knob(
        0.9,
        "--headroom",
        "share of each lease's GPUs new guarantees leave to the SRTF pool; a job wider than "
        "the rest may take any free GPUs when what is free before its deadline also holds "
        "the pool's queued and expected work; 1 promises nothing",
    )
    margin: float = _knob(0.0, "--margin", "extra relative work planned for every guaranteed job")
    guard: float = _knob(
        7200.0,
        "--guard",
        "seconds of slack a guaranteed job's laxity trigger keeps: it turns due that "
        "long before it would have to start",
    )

    def __post_init__(self) -> None:
        """Refuse a setting no plan could use, naming it: a negative guard or a headroom of 2
        would otherwise only show up as odd plans much later."""
        if self.objective not in (*OBJECTIVES, ADAPTIVE):
            raise ValueError(
                f"objective: unknown {show(self.objective)} (have: {', '.join(OBJECTIVES)}, "
                f"{ADAPTIVE})"
            )
        if self.backend not in BACKENDS:
            raise ValueError(f"backend: unknown {show(self.backend)} (have: {', '.join(BACKENDS)})")
        _check("lease", self.lease, positive=True)
        _check("time_limit_s", self.time_limit_s, positive=True)
        _check("margin", self.margin)
        _check("guard", self.guard)
        _check("headroom", self.headroom, most=1.0)
        if self.deterministic_time is not None:
            _check("deterministic_time", self.deterministic_time, positive=True)
        for f in fields(self):  # 600 from a YAML file, or numpy's 600, is the setting 600.0
            value = getattr(self, f.name)
            if isinstance(value, Real) and type(value) is not float:
                object.__setattr__(self, f.name, float(value))

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> ChronusSettings:
        """Settings from field names to values; unknown names are refused, not ignored."""
        known = {f.name for f in fields(cls)}
        for name in values:
            if name not in known:
                raise ValueError(
                    f"{show(name)}: unknown setting (have: {', '.join(sorted(known))})"
                )
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _check(name: str, value: object, *, positive: bool = False, most: float = math.inf) -> None:
    """A finite real number (an int, a float, a numpy scalar; not a bool, a string or a Decimal),
    >= 0 (> 0 if ``positive``) and <= ``most``, or a ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
        raise ValueError(f"{name}: expected a number, got {show(value)}")
    if value < 0 or (positive and value == 0):
        raise ValueError(f"{name}: must be {'> 0' if positive else '>= 0'}, got {show(value)}")
    if value > most:
        raise ValueError(f"{name}: must be <= {most:g}, got {show(value)}")


ELASTIC_DEFAULTS: Mapping[str, Any] = {
    "lease": 60.0,
    "headroom": 0.0,
    "backend": "greedy",
    "time_limit_s": 0.5,
}
"""Where elastic mode's lease planner (``chronus_py.jobs``) starts from, under the options a
user gives: the same settings, its own defaults. Leases of 60 s are ElasticFlow's slots (a plan
revised per minute fits jobs that resize every few minutes; 1200 s would hold a resized job to a
size for 20 minutes); no headroom, since an elastic plan's leftover GPUs go to every job by
marginal gain anyway; the greedy plan, with CP-SAT (``backend`` cpsat) as a second chance of
``time_limit_s`` each. These are the settings every published elastic result was measured at."""
