"""What one scheduling round decided, as data: a :class:`Plan` of :class:`JobDecision` s.

The scheduler decides in memory; this module turns its state after ``plan(now)`` into values a
cluster manager can act on (start, continue, preempt, wait: with placements, guarantees and
reasons) and into the ``chronus plan`` JSON. Acting on them is the caller's business, last.

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

from chronus_py.state import JobState, Status

if TYPE_CHECKING:
    from chronus_py.layers import HostLayers
    from chronus_py.scheduler import Round, Scheduler


class Action(StrEnum):
    START = "start"
    CONTINUE = "continue"
    PREEMPT = "preempt"
    WAIT = "wait"


@dataclass(frozen=True, slots=True)
class JobDecision:
    """One job's outcome of a round. ``placement`` (node -> GPU indices) is where it runs after
    the round (empty unless it starts or continues); ``deadline`` is its guaranteed deadline, else
    its tightest one (None for best-effort jobs)."""

    job_id: str
    action: Action
    placement: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    guaranteed: bool = False
    deadline: float | None = None
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "job": self.job_id,
            "action": str(self.action),
            "placement": {node: list(gpus) for node, gpus in sorted(self.placement.items())},
            "guaranteed": self.guaranteed,
            "deadline": self.deadline,
            "reason": self.reason,
        }


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
            return "{\n    " + ",\n    ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in value.items()) + "\n  }"
        return json.dumps(value)

    return "{\n" + ",\n".join(f"  {json.dumps(k)}: {block(v)}" for k, v in obj.items()) + "\n}\n"


# -- from scheduler state to decisions --------------------------------------------------------

_TIERS = {
    "MUST_RUN": "guaranteed, due in this lease",
    "SPOT": "runs on spare capacity by remaining GPU-time",
    "AHEAD": "guaranteed, ahead of its lease plan (capacity is held for it later)",
    "HOPELESS": "cannot meet its last deadline even alone; leftover GPUs only",
}


def decide(scheduler: Scheduler, decided: Round) -> tuple[JobDecision, ...]:
    """Every active job's decision after ``decided`` (preempted jobs are pending again, so they
    are among them), by submission order. Reads the scheduler; changes nothing."""
    started = {s.id for s in decided.started}
    preempted = {s.id for s in decided.preempted}
    free = scheduler.allocator.free_gpus()
    out = []
    for state in sorted(scheduler.active.values(), key=lambda s: s.seq):
        if state.status is Status.RUNNING:
            action = Action.START if state.id in started else Action.CONTINUE
        else:
            action = Action.PREEMPT if state.id in preempted else Action.WAIT
        out.append(JobDecision(
            job_id=state.id,
            action=action,
            placement=dict(state.placement) if state.status is Status.RUNNING else {},
            guaranteed=state.guaranteed is not None,
            deadline=_deadline(state),
            reason=_reason(scheduler, state, action, free),
        ))
    return tuple(out)


def _deadline(state: JobState) -> float | None:
    if state.guaranteed is not None:
        return state.guaranteed.at
    return state.job.deadlines[0].at if state.job.deadlines else None


def _reason(scheduler: Scheduler, state: JobState, action: Action, free: int) -> str:
    if action is Action.WAIT:
        where = (f"needs {state.gpus} GPUs, {free} free after this round" if state.gpus > free
                 else f"{free} GPUs free, but no placement holds its gang (e.g. its tenant's cells are full)")
    elif action is Action.PREEMPT:
        where = f"its GPUs go to jobs ahead in {scheduler.policy.name} order"
    else:
        where = f"fits, in {scheduler.policy.name} order"
    selector = getattr(scheduler.policy, "selector", None)
    if selector is None:
        return where
    tier = selector.tier(state.id).name
    return f"{_TIERS.get(tier, tier.lower())}; {where}"


def assemble_plan(scheduler: Scheduler, decided: Round, *, host_layers: Mapping[str, HostLayers] | None = None,
                  timings: Mapping[str, float] | None = None) -> Plan:
    """The :class:`Plan` of a round: decisions, plus the lease plan and solver statistics when
    the policy keeps a lease selector."""
    selector = getattr(scheduler.policy, "selector", None)
    lease_plan: dict[str, tuple[float, ...]] = {}
    solver = None
    lease_end = None
    if selector is not None:
        lease_end = selector.lease_end()
        order = sorted(selector.plan, key=lambda j: scheduler.jobs[j].seq)
        lease_plan = {j: tuple(k * selector.settings.lease for k in selector.plan[j]) for j in order}
        stats = selector.stats
        solver = {
            "backend": stats.last_backend,
            "status": stats.last_status,
            "rounds": stats.rounds,
            "fallbacks": stats.fallbacks,
            "admitted": stats.admitted_at_arrival + stats.admitted_on_retry,
            "demoted": list(stats.demoted),
        }
        timings = {"solve_s": sum(stats.solve_seconds), **(timings or {})}
    return Plan(
        now=decided.now,
        policy=scheduler.policy.name,
        lease_end=lease_end,
        next_decision=scheduler.next_wakeup(decided.now),
        decisions=scheduler.decisions(decided),
        lease_plan=lease_plan,
        solver=solver,
        timings=dict(timings or {}),
        host_layers=dict(host_layers or {}),
    )
