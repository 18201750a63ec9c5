"""The lease-slot planning problem as plain data, validated once at construction.

Time is cut into leases; slot 0 is the lease about to start. A job needs ``leases_needed`` whole
slots (not necessarily consecutive: jobs may be preempted between leases) of ``gpus`` GPUs each,
all before its option's ``deadline_slot`` and not before its ``earliest_slot``. Every slot has a
GPU capacity. Nothing here knows about traces, profiles or clusters: the caller rounds GPUs and
turns deadlines into slot counts, so this package can be reasoned about (and tested) on its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Literal

import numpy as np

Objective = Literal["maximize", "minimize"]
OBJECTIVES: tuple[str, ...] = ("maximize", "minimize")

# Values are compared exactly as integers after scaling by the first of these that makes all of
# them whole; anything finer is rounded to 1/1000. Exact integers keep the objective tiers of
# the MILP lexicographic (see solvers/score.py) and keep CP-SAT, which needs integers, honest.
_VALUE_SCALES = (1, 10, 100, 1000)


class SolverError(ValueError):
    """Malformed problem or parameter. ``field`` names the offending item (``jobs[3].gpus``)."""

    def __init__(self, field: str, why: str):
        self.field = field
        self.why = why
        super().__init__(f"{field}: {why}")


def _is_int(x: object) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


@dataclass(frozen=True, slots=True)
class LeaseOption:
    """One way to satisfy a job: all ``leases_needed`` slots before ``deadline_slot``, worth
    ``value``.

    ``deadline_slot`` is the number of whole slots, counted from slot 0, that end by the deadline,
    so slots ``0 .. deadline_slot-1`` are usable.
    """

    deadline_slot: int
    leases_needed: int
    value: float


@dataclass(frozen=True, slots=True)
class LeaseJob:
    """A job to plan. ``fixed`` jobs are already guaranteed: they must be planned in full with one
    of their options (pass only the guaranteed option to pin the choice). Other jobs are
    candidates: admitted with exactly one option, or not at all.

    ``running`` marks a job that holds GPUs in the lease now ending; among otherwise equal plans
    the solver keeps such jobs in slot 0 to avoid a preemption. ``earliest_slot`` forbids slots
    before it (e.g. a job whose input is not ready yet).
    """

    id: str
    gpus: int
    options: tuple[LeaseOption, ...]
    fixed: bool = False
    running: bool = False
    earliest_slot: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", tuple(self.options))


@dataclass(frozen=True, slots=True, eq=False)
class LeaseProblem:
    """Jobs × options × slots with per-slot GPU capacity, and the secondary objective.

    The primary objective is always the total value of admitted options. ``objective`` picks the
    secondary term: ``"maximize"`` runs guaranteed work as early as possible (most GPUs in slot 0),
    ``"minimize"`` as little of it now as possible (room for unguaranteed work). The secondary term
    never outweighs the smallest possible difference in value.

    ``capacity`` may be longer than needed: only the first ``horizon`` (= last deadline) slots
    matter.
    Construction validates everything and raises ``SolverError`` naming the bad field.
    """

    capacity: np.ndarray
    jobs: tuple[LeaseJob, ...]
    objective: Objective = "maximize"
    checked: LeaseProblem | None = field(default=None, repr=False)
    """A problem already built, whose jobs this one may share (the same objects): those are
    not checked again, and keep their value units if the scale is the same. Forgotten once
    read (None after construction). The selector solves its guarantees a second time with
    only the jobs its restarts made short replaced (issue 27, session 16)."""
    value_scale: int = field(init=False, repr=False)
    value_units: tuple[tuple[int, ...], ...] = field(init=False, repr=False)
    horizon: int = field(init=False, repr=False)
    _fit_prefix: dict = field(init=False, repr=False)
    _index: dict = field(init=False, repr=False)

    def __post_init__(self) -> None:
        cap = np.asarray(self.capacity)
        if cap.ndim != 1:
            raise SolverError(
                "capacity", f"must be a 1-D array of GPUs per slot, got shape {cap.shape}"
            )
        if cap.size and not np.all(np.isfinite(cap.astype(float))):
            raise SolverError("capacity", "must be finite")
        if cap.size and not np.array_equal(cap, np.round(cap)):
            raise SolverError("capacity", "must be whole GPUs per slot")
        cap = cap.astype(np.int64)
        if cap.size and cap.min() < 0:
            raise SolverError(
                f"capacity[{int(np.argmin(cap))}]", f"must be >= 0, got {int(cap.min())}"
            )
        cap.setflags(write=False)
        object.__setattr__(self, "capacity", cap)
        object.__setattr__(self, "jobs", tuple(self.jobs))
        if self.objective not in OBJECTIVES:
            raise SolverError(
                "objective", f"must be one of {', '.join(OBJECTIVES)}, got {self.objective!r}"
            )
        prior = self.checked
        object.__setattr__(self, "checked", None)
        # The prior problem's jobs by identity: alive (it holds them), so no id is reused.
        known = {} if prior is None else {id(job): k for k, job in enumerate(prior.jobs)}
        # One pass over the jobs (the selector builds a problem of ~225 jobs twice a lease):
        # each checked (unless known), indexed, and its options' values and deadline slots
        # noted.
        index: dict[str, int] = {}
        values: set[float] = set()  # a few distinct ones
        horizon, slots = 0, len(cap)
        for i, job in enumerate(self.jobs):
            if id(job) not in known and not _plainly_valid(job, slots):
                _validate_job(f"jobs[{i}]", job, slots)
            if job.id in index:
                raise SolverError(f"jobs[{i}].id", f"duplicate job id {job.id!r}")
            index[job.id] = i
            for o in job.options:
                values.add(o.value)
                if o.deadline_slot > horizon:
                    horizon = o.deadline_slot
        if horizon > slots:  # only a known job can reach past these slots: say which
            for i, job in enumerate(self.jobs):
                _validate_job(f"jobs[{i}]", job, slots)
        object.__setattr__(self, "_index", index)
        scale = next(
            (s for s in _VALUE_SCALES if all(abs(v * s - round(v * s)) < 1e-9 for v in values)),
            _VALUE_SCALES[-1],
        )
        units = {v: int(round(v * scale)) for v in values}
        if prior is None or prior.value_scale != scale:
            known = {}
        kept = () if prior is None else prior.value_units
        object.__setattr__(self, "value_scale", scale)
        object.__setattr__(
            self,
            "value_units",
            tuple(
                kept[k]
                if (k := known.get(id(j))) is not None
                else tuple([units[o.value] for o in j.options])
                for j in self.jobs
            ),
        )
        object.__setattr__(self, "horizon", horizon)
        object.__setattr__(self, "_fit_prefix", {})

    def slots_fitting(self, gpus: int, lo: int, hi: int) -> int:
        """How many slots in ``[lo, hi)`` have capacity >= ``gpus`` (prefix sums, cached per
        size)."""
        prefix = self.fitting_prefix(gpus)
        return prefix[hi] - prefix[lo] if hi > lo else 0

    def fitting_prefix(self, gpus: int) -> list[int]:
        """``prefix[t]``: slots before ``t`` with capacity >= ``gpus``. A list, cached per size:
        indexing it is several times cheaper than an array's, and bounds ask for every job."""
        prefix = self._fit_prefix.get(gpus)
        if prefix is None:
            prefix = [0, *np.cumsum(self.capacity >= gpus).tolist()]
            self._fit_prefix[gpus] = prefix
        return prefix

    def with_jobs(self, jobs: Iterable[LeaseJob]) -> LeaseProblem:
        """The same capacity and objective with ``jobs`` appended (what ``admit`` solves)."""
        return LeaseProblem(self.capacity, self.jobs + tuple(jobs), self.objective)

    def index(self) -> dict[str, int]:
        """Job id → position in ``jobs``, built once with the duplicate check: a solve asks for
        it several times (hints, packing, verification). Shared: do not change it."""
        return self._index


def _plainly_valid(job: object, slots: int) -> bool:
    """True for a well-formed job of plain ints and floats, checked with a few comparisons: the
    selector builds problems of thousands of jobs every lease. Anything else goes through
    :func:`_validate_job`, which names what is wrong (or accepts numpy integers and the like)."""
    if (
        type(job) is not LeaseJob
        or type(job.id) is not str
        or not job.id
        or type(job.gpus) is not int
        or job.gpus < 1
        or type(job.earliest_slot) is not int
        or job.earliest_slot < 0
        or not job.options
    ):
        return False
    for o in job.options:
        if not (
            type(o) is LeaseOption
            and type(o.deadline_slot) is int
            and 0 <= o.deadline_slot <= slots
            and type(o.leases_needed) is int
            and o.leases_needed >= 1
            and type(o.value) in (int, float)
            and 0 <= o.value < math.inf
        ):
            return False
    return True


def _validate_job(where: str, job: LeaseJob, slots: int) -> None:
    if not isinstance(job, LeaseJob):
        raise SolverError(where, f"must be a LeaseJob, got {type(job).__name__}")
    if not isinstance(job.id, str) or not job.id:
        raise SolverError(f"{where}.id", f"must be a non-empty string, got {job.id!r}")
    where = f"{where} ({job.id})"
    if not _is_int(job.gpus) or job.gpus < 1:
        raise SolverError(f"{where}.gpus", f"must be an integer >= 1, got {job.gpus!r}")
    if not _is_int(job.earliest_slot) or job.earliest_slot < 0:
        raise SolverError(
            f"{where}.earliest_slot", f"must be an integer >= 0, got {job.earliest_slot!r}"
        )
    if not job.options:
        raise SolverError(f"{where}.options", "must name at least one option")
    for k, opt in enumerate(job.options):
        at = f"{where}.options[{k}]"
        if not isinstance(opt, LeaseOption):
            raise SolverError(at, f"must be a LeaseOption, got {type(opt).__name__}")
        if not _is_int(opt.deadline_slot) or not 0 <= opt.deadline_slot <= slots:
            raise SolverError(
                f"{at}.deadline_slot",
                f"must be an integer in 0..{slots} (capacity has {slots} slots), "
                f"got {opt.deadline_slot!r}",
            )
        if not _is_int(opt.leases_needed) or opt.leases_needed < 1:
            raise SolverError(
                f"{at}.leases_needed", f"must be an integer >= 1, got {opt.leases_needed!r}"
            )
        if (
            not isinstance(opt.value, (int, float, np.integer, np.floating))
            or isinstance(opt.value, bool)
            or not math.isfinite(opt.value)
            or opt.value < 0
        ):
            raise SolverError(f"{at}.value", f"must be a finite number >= 0, got {opt.value!r}")
