"""The one model of Slurm jobs and nodes the backend sees, whatever slurmrestd's API version.

The REST layers (``api_v0038.py``, ``api_v0040.py``) turn slurmrestd's JSON into
:class:`SlurmJob` and :class:`SlurmNode`, and :class:`NewJob` and :class:`JobChange` into the
JSON their version takes; nothing above them reads or writes slurmrestd's fields. The helpers
here read what every version spells the same way (node lists, GRES strings, ``gres_detail``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping


@dataclass(frozen=True, slots=True)
class SlurmNode:
    name: str
    gpus: int
    state: str  # the base state, lower case: "idle", "mixed", "allocated", "down", ...
    flags: tuple[str, ...]  # upper case, e.g. ("DRAIN",), ("NOT_RESPONDING",)
    reason: str
    partitions: tuple[str, ...]
    features: tuple[str, ...] = ()  # its available features (what ``--constraint`` asks for)
    memory: int = 0  # RealMemory, MB


@dataclass(frozen=True, slots=True)
class SlurmReservation:
    """An advance reservation (``scontrol create reservation``): its nodes run only the jobs
    submitted into it from ``start_time`` to ``end_time`` (Unix seconds)."""

    name: str
    nodes: tuple[str, ...]
    start_time: float
    end_time: float


@dataclass(frozen=True, slots=True)
class SlurmPartition:
    """A partition's ``MaxTime`` in seconds (infinity: INFINITE, or not set): no job in it
    runs longer, so a reservation that starts later than that from now takes no node from a
    job started now."""

    name: str
    max_time: float


@dataclass(frozen=True, slots=True)
class SlurmJob:
    """One Slurm job as the backend needs it. Times are Unix seconds (0: not set)."""

    id: int
    name: str
    state: str  # PENDING, RUNNING, COMPLETING, COMPLETED, CANCELLED, FAILED, ...
    reason: str  # e.g. JobHeldUser, JobHeldAdmin, None
    comment: str
    user: str
    account: str
    partition: str
    submit_time: float
    start_time: float
    end_time: float
    restart_cnt: int
    node_count: int
    gpus_per_node: int
    nodes: tuple[str, ...]  # where it runs or ran
    placement: Mapping[str, tuple[int, ...]]  # node -> GPU indices, from gres_detail
    group: str = ""  # "array" (sbatch --array) or "heterogeneous" (sbatch ... : ...), else ""
    exclusive: bool = False  # sbatch --exclusive (or =user, =mcs, =topo): no sharing its nodes
    # What its owner asked of the nodes it runs on (sbatch --nodelist, --exclude, --constraint,
    # --reservation, --mem) and its --dependency as Slurm shows it ("afterok:5(unfulfilled)").
    # After a release ``required_nodes`` are chronus's.
    required_nodes: tuple[str, ...] = ()
    excluded_nodes: tuple[str, ...] = ()
    constraint: str = ""
    reservation: str = ""
    memory_per_node: int = 0  # MB, 0: not asked
    dependency: str = ""
    gpus_per_job: int = 0  # sbatch --gpus=N (not per node)
    requeue: bool = True  # False: sbatch --no-requeue (or JobRequeue=0 without --requeue)

    @property
    def held(self) -> bool:
        return self.state == "PENDING" and self.reason in ("JobHeldUser", "JobHeldAdmin")


@dataclass(frozen=True, slots=True)
class NewJob:
    """A batch job chronus submits (held, requeueable) for a job that came through its API."""

    name: str
    comment: str
    script: str
    gpus_per_node: int
    workdir: str
    output: str
    environment: Mapping[str, str]
    partition: str | None = None


@dataclass(frozen=True, slots=True)
class JobChange:
    """One update of a job; None leaves a field as it is. ``nodes`` releases it onto exactly
    those nodes; ``requeue`` makes it requeueable (chronus preempts by requeueing);
    ``begin_now`` lets it start at once (a requeued job waits ~2 min, one
    submitted with ``--begin`` until then)."""

    hold: bool | None = None
    comment: str | None = None
    nodes: tuple[str, ...] | None = None
    gpus_per_node: int | None = None
    node_count: int | None = None
    requeue: bool | None = None
    begin_now: bool = False


def expand_hostlist(text: str) -> list[str]:
    """``n[1-3,5],gpu7`` -> ``['n1', 'n2', 'n3', 'n5', 'gpu7']`` (Slurm's compact node lists)."""
    out: list[str] = []
    for m in re.finditer(r"([^,\[]+)(?:\[([^\]]*)\])?", text):
        prefix, ranges = m.group(1), m.group(2)
        if ranges is None:
            out.append(prefix)
            continue
        for part in ranges.split(","):
            lo, _, hi = part.partition("-")
            for i in range(int(lo), int(hi or lo) + 1):
                out.append(f"{prefix}{i:0{len(lo)}d}")
    return out


def _indices(text: str) -> tuple[int, ...]:
    """``0-1,3`` -> (0, 1, 3)."""
    out: list[int] = []
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return tuple(out)


def gpu_count(gres: str) -> int:
    """GPUs in a GRES or TRES string: ``gpu:8``, ``gpu:a100:4(S:0-1)``, ``gpu:a:2,gpu:b:2``,
    ``gres:gpu:2`` (v0.0.38's ``tres_per_node``), ``gres/gpu:2`` (v0.0.40 and later)."""
    total = 0
    for item in gres.split(","):
        item = re.sub(r"^(gres[:/])", "", item.strip())
        parts = item.split("(")[0].split(":")
        if parts[0] == "gpu" and parts[-1].isdigit():
            total += int(parts[-1])
    return total


def placement(nodes: str, gres_detail: list[str]) -> dict[str, tuple[int, ...]]:
    """Node -> GPU indices of a running job: ``gres_detail`` has one entry per node of ``nodes``,
    e.g. ``gpu:2(IDX:0-1)`` or, with typed GRES, ``gpu:a:1(IDX:0),gpu:b:1(IDX:3)``."""
    out: dict[str, tuple[int, ...]] = {}
    for node, detail in zip(expand_hostlist(nodes) if nodes else [], gres_detail):
        idx: list[int] = []
        for m in re.finditer(r"gpu[^(,]*\(IDX:([0-9,\-]*)\)", detail):
            idx.extend(_indices(m.group(1)))
        out[node] = tuple(sorted(idx))
    return out
