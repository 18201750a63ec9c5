"""What one scheduling round decided, as data: a :class:`Plan` of :class:`JobDecision` s.

"Plan" means this and only this: the output of a round (``chronus_py.round.run_round``), values
a cluster manager can act on (start, continue, preempt, wait: with placements, guarantees and
reasons), and the ``chronus plan`` JSON. Acting on them is the caller's business, last.

Times in the JSON are absolute seconds, as in the state file. ``lease_plan`` maps each guaranteed
job to the start times of the future leases (from the current one on) the lease plan reserves for
it; ``solver`` says how that plan was obtained. Wall-clock timings make output differ between runs,
so they appear only under ``timings`` when asked for: the rest is the same for the same input.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from chronus_py.estimates.report import EstimateState
    from chronus_py.layers import HostLayers


class Action(StrEnum):
    START = "start"
    CONTINUE = "continue"
    PREEMPT = "preempt"
    WAIT = "wait"


@dataclass(frozen=True, slots=True)
class JobDecision:
    """One job's outcome of a round. ``gpus`` is its size (for an elastic job, the size the
    round chose); ``placement`` (node -> GPU indices) is where it runs after
    the round (empty unless it starts or continues); ``deadline`` is its guaranteed deadline, else
    its tightest one (None for best-effort jobs); ``estimate`` what is known of its runtime and
    what is promised on it (None when the round was assembled without it)."""

    job_id: str
    action: Action
    gpus: int = 0
    placement: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    guaranteed: bool = False
    deadline: float | None = None
    reason: str = ""
    estimate: EstimateState | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {
            "job": self.job_id,
            "action": str(self.action),
            "gpus": self.gpus,
            "placement": {node: list(gpus) for node, gpus in sorted(self.placement.items())},
            "guaranteed": self.guaranteed,
            "deadline": self.deadline,
            "reason": self.reason,
        }
        if self.estimate is not None:
            out["estimate"] = self.estimate.to_dict(with_id=False)
        return out


@dataclass(frozen=True)
class Plan:
    """The output of one round: a value, not an action.

    ``lease_end`` is the end of the current lease (None for policies without leases);
    ``next_decision`` the latest time the scheduler wants to be asked again if nothing arrives or
    finishes (None: only then). ``host_layers`` maps cluster node -> its scx_layered config, for
    nodes with a host model and at least one opted-in job running there after the round."""

    now: float
    policy: str
    lease_end: float | None
    next_decision: float | None
    decisions: tuple[JobDecision, ...]
    lease_plan: Mapping[str, tuple[float, ...]]
    solver: Mapping[str, Any] | None
    timings: Mapping[str, float] = field(default_factory=dict)
    host_layers: Mapping[str, HostLayers] = field(default_factory=dict)

    def to_dict(self, *, timings: bool = False) -> dict[str, Any]:
        out = {
            "now": self.now,
            "policy": self.policy,
            "lease_end": self.lease_end,
            "next_decision": self.next_decision,
            "decisions": [d.to_dict() for d in self.decisions],
            "lease_plan": {job: list(starts) for job, starts in self.lease_plan.items()},
            "solver": None if self.solver is None else dict(self.solver),
            "host_layers": sorted(self.host_layers),
        }
        if timings:
            out["timings"] = dict(self.timings)
        return out

    def to_json(self, *, timings: bool = False) -> str:
        """The ``chronus plan`` output: one JSON object, keys in a fixed order, newline-ended."""
        return format_json(self.to_dict(timings=timings))


def format_json(obj: Mapping[str, Any]) -> str:
    """An object one key per line, and one line per element of its non-empty lists and mappings
    (one decision per line): readable and diffable, and encoded by json's C encoder (an
    ``indent`` would switch to the pure-Python one, seconds for thousands of jobs)."""

    def block(value: Any) -> str:
        if isinstance(value, list) and value:
            return "[\n    " + ",\n    ".join(json.dumps(v) for v in value) + "\n  ]"
        if isinstance(value, dict) and value:
            return (
                "{\n    "
                + ",\n    ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in value.items())
                + "\n  }"
            )
        return json.dumps(value)

    return "{\n" + ",\n".join(f"  {json.dumps(k)}: {block(v)}" for k, v in obj.items()) + "\n}\n"
