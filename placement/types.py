"""The allocator protocol and its request/result records.

They mirror the cell-scenario format (docs/cell-scenarios.md): a request is one gang
(all pods or none), a result is ``placed | wait | error`` with a reason. Every allocator in this
package, and every caller (replay, ``chronus plan``, scenario runner), speaks only these types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Literal, Mapping, Protocol

Outcome = Literal["placed", "wait", "error"]


@dataclass(frozen=True, slots=True)
class PodSpec:
    """``count`` pods of ``gpus`` GPUs each."""

    gpus: int
    count: int = 1


@dataclass(frozen=True, slots=True)
class Request:
    """One gang. ``priority`` -1 is opportunistic, 0..1000 guaranteed (higher wins)."""

    job: str
    pods: tuple[PodSpec, ...]
    vc: str = "default"
    priority: int = 0
    sku: str | None = None
    pinned: str | None = None
    lazy_preempt: bool = False
    nodes: frozenset[str] | None = None

    @property
    def total_gpus(self) -> int:
        return sum(p.gpus * p.count for p in self.pods)


# Every allocation builds these records, and a frozen dataclass's generated ``__init__`` sets each
# field through ``object.__setattr__``: a third of the cost of a fast allocate + release. The
# ``__init__``s below set the slots through their descriptors instead (same signature, same
# immutability); ``dataclass`` keeps an ``__init__`` the class defines.


@dataclass(frozen=True, slots=True)
class PodPlacement:
    node: str
    gpus: tuple[int, ...]

    def __init__(self, node: str, gpus: tuple[int, ...]):
        _SET_NODE(self, node)
        _SET_GPUS(self, gpus)


_SET_NODE = PodPlacement.__dict__["node"].__set__
_SET_GPUS = PodPlacement.__dict__["gpus"].__set__


@dataclass(frozen=True, slots=True)
class Result:
    outcome: Outcome
    pods: tuple[PodPlacement, ...] = ()
    preempted: tuple[str, ...] = ()
    downgraded: tuple[str, ...] = ()
    reason: str = ""

    def __init__(
        self,
        outcome: Outcome,
        pods: tuple[PodPlacement, ...] = (),
        preempted: tuple[str, ...] = (),
        downgraded: tuple[str, ...] = (),
        reason: str = "",
    ):
        _SET_OUTCOME(self, outcome)
        _SET_PODS(self, pods)
        _SET_PREEMPTED(self, preempted)
        _SET_DOWNGRADED(self, downgraded)
        _SET_REASON(self, reason)

    def by_node(self) -> dict[str, tuple[int, ...]]:
        """GPU indices per node, pods on the same node merged (what a job's placement is)."""
        out: dict[str, list[int]] = {}
        for pod in self.pods:
            out.setdefault(pod.node, []).extend(pod.gpus)
        return {node: tuple(sorted(gpus)) for node, gpus in out.items()}


_SET_OUTCOME, _SET_PODS, _SET_PREEMPTED, _SET_DOWNGRADED, _SET_REASON = (
    Result.__dict__[name].__set__
    for name in ("outcome", "pods", "preempted", "downgraded", "reason")
)


@dataclass(frozen=True, slots=True)
class RunningJob:
    """A job that kept running while its allocator restarted: what HiveD keeps in a pod's bind
    annotation. ``placement`` is node -> GPU indices; ``cell_types`` (optional) is node -> GPU
    index -> type of the VC cell the GPU was in (``CellAllocator.cell_types_of``). ``request``
    carries the priority the job was placed with, not one a lazy preemption left it."""

    request: Request
    placement: Mapping[str, tuple[int, ...]]
    cell_types: Mapping[str, Mapping[int, str]] | None = None


@dataclass(frozen=True, slots=True)
class NodeUsage:
    """A node as a caller sees it: total and free GPU indices."""

    name: str
    gpus: int
    free: tuple[int, ...] = field(default=())


class Allocator(Protocol):
    """What the scheduler needs from placement; ``allocate`` is atomic (all pods or none)."""

    def allocate(self, request: Request) -> Result: ...

    def reserve(self, request: Request, placement: Mapping[str, Iterable[int]]) -> Result:
        """Hold exactly ``placement`` (node -> GPU indices) for a job already running there (a
        restored state, a restarted service); all or nothing."""

    def release(self, job: str) -> None: ...

    def set_bad(self, node: str) -> None: ...

    def set_healthy(self, node: str) -> None: ...

    def free_gpus(self) -> int: ...

    def placement_of(self, job: str) -> Mapping[str, tuple[int, ...]]: ...
