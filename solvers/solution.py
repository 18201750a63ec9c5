"""What a solve returns: the chosen option and slots per job, plus how the plan was obtained."""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, Mapping, NamedTuple

Status = Literal["optimal", "feasible", "greedy", "fallback"]


class Placement(NamedTuple):
    """An admitted job's option index (into ``LeaseJob.options``) and its sorted slot indices."""

    option: int
    slots: tuple[int, ...]


Assignment = Mapping[str, Placement]
"""Admitted jobs only; what backends produce and consume (the greedy plan is one)."""


@dataclass(frozen=True, slots=True)
class SolveStats:
    """How the returned plan was obtained.

    ``status``: ``optimal`` (proven, by the MILP or because the greedy plan meets the objective's
    bounds), ``feasible`` (MILP plan, at least as good as greedy, not proven optimal), ``greedy``
    (the greedy backend was asked for and optimality is not proven) or ``fallback`` (the MILP was
    asked for but timed out without a better plan, failed, returned a plan that did not pass
    ``check``, or one better only in slot 0 at the price of more restarts; the greedy plan was
    returned and ``fallback_reason`` says why).
    ``objective`` and ``greedy_objective`` use the formula in ``solvers.score.objective_value``;
    they leave out guarantees that had to be dropped (``LeaseSolution.dropped`` lists those), so
    compare them only between plans that drop the same number.
    """

    backend: str
    status: Status
    wall_s: float
    objective: float
    greedy_objective: float
    fallback_reason: str | None = None
    solver_status: str = ""
    rows: int = 0
    slots: int = 0
    variables: int = 0

    @property
    def fallback(self) -> bool:
        return self.status == "fallback"


@dataclass(frozen=True, slots=True)
class LeaseSolution:
    """A verified plan. ``option[id]`` is the chosen option index, or ``None`` if not admitted;
    ``slots[id]`` the slots it runs in (empty if not admitted); every job of the problem is a key.

    ``dropped`` lists fixed jobs that could not be planned at all (capacity fell below what the
    guarantees need); it is empty unless the guarantees themselves are infeasible, and the caller
    must decide what to do with those jobs (e.g. demote them).
    """

    option: Mapping[str, int | None]
    slots: Mapping[str, tuple[int, ...]]
    stats: SolveStats
    dropped: tuple[str, ...] = ()

    @staticmethod
    def build(
        job_ids: tuple[str, ...],
        assignment: Assignment,
        stats: SolveStats,
        dropped: tuple[str, ...] = (),
    ) -> LeaseSolution:
        option = {j: (assignment[j].option if j in assignment else None) for j in job_ids}
        slots = {j: (assignment[j].slots if j in assignment else ()) for j in job_ids}
        return LeaseSolution(MappingProxyType(option), MappingProxyType(slots), stats, dropped)

    @property
    def admitted(self) -> tuple[str, ...]:
        return tuple(j for j, v in self.option.items() if v is not None)

    def in_slot(self, slot: int) -> tuple[str, ...]:
        """Jobs planned to run in ``slot`` (slot 0: the lease about to start)."""
        return tuple(j for j, s in self.slots.items() if slot in s)

    def assignment(self) -> dict[str, Placement]:
        """The admitted jobs as an ``Assignment`` (e.g. to pass back as a ``hint``)."""
        return {j: Placement(v, self.slots[j]) for j, v in self.option.items() if v is not None}
