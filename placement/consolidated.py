"""Node-level consolidated placement for clusters described only by nodes and GPU counts.

This is what the baselines and the Chronus artifact use (``consolidate``): each pod goes to the
best-fitting node (the one with the fewest free GPUs that still holds it), larger pods first, so
jobs span as few nodes as possible and small jobs fill gaps instead of breaking whole nodes.
When ``spread`` is on and the pods do not fit whole nodes, the gang's GPUs are split over the
nodes with the most free GPUs (fewest nodes) instead of waiting: the artifact's fallback, which
never leaves a job waiting while enough GPUs are free.

With ``even`` on, a gang gets the same GPU count on every node it spans: a fit that stacks pods
unevenly (two 3-GPU pods on one node, one on another) is refused, and the spread takes ``k``
nodes of ``total / k`` GPUs, the fewest such nodes, best fit. A cluster manager that asks GPUs
*per node* (Slurm's ``--gres=gpu:N`` with ``--nodes=K``) cannot run 3 GPUs on one node and 1 on
another, and a placement it cannot run would leave the job waiting with its GPUs held for nothing.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from typing import Iterable, Mapping

from placement.types import NodeUsage, PodPlacement, Request, Result


class ConsolidatedAllocator:
    """Best-fit node placement with optional spreading; no tenants, no preemption."""

    def __init__(
        self, nodes: Iterable[tuple[str, int]], *, spread: bool = True, even: bool = False
    ):
        self.spread = spread
        self.even = even
        self._size: dict[str, int] = {}
        self._free: dict[str, list[int]] = {}
        for name, gpus in nodes:
            if name in self._size:
                raise ValueError(f"duplicate node name {name!r}")
            self._size[name] = gpus
            self._free[name] = list(range(gpus))
        self._bad: set[str] = set()
        self._jobs: dict[str, tuple[PodPlacement, ...]] = {}
        self._free_total = sum(self._size.values())
        self._order = sorted((gpus, name) for name, gpus in self._size.items())  # (free GPUs, node)

    def allocate(self, request: Request) -> Result:
        if request.job in self._jobs:
            return Result("error", reason=f"job {request.job} is already placed")
        if any(p.gpus <= 0 or p.count <= 0 for p in request.pods) or not request.pods:
            return Result("error", reason="every pod needs at least one GPU")
        total = request.total_gpus
        if not self._bad and request.nodes is None:
            allowed = None
            if self._free_total < total:
                return Result("wait", reason=f"fewer than {total} free GPUs on usable nodes")
            counts = self._fit_indexed(request)
        else:
            allowed = self._allowed(request)
            if sum(len(self._free[n]) for n in allowed) < total:
                return Result("wait", reason=f"fewer than {total} free GPUs on usable nodes")
            counts = self._fit_pods(request, allowed)
        if counts is not None and self.even and not _equal_shares(counts):
            counts = None
        if counts is None and self.spread:
            nodes = self._allowed(request) if allowed is None else allowed
            counts = self._spread_even(total, nodes) if self.even else self._spread(total, nodes)
        if counts is None:
            return Result("wait", reason="no node set holds the pods whole")
        pods = tuple(PodPlacement(node, self._take(node, n)) for node, n in counts)
        self._jobs[request.job] = pods
        self._free_total -= total
        return Result("placed", pods=pods)

    def _allowed(self, request: Request) -> list[str]:
        return [
            n
            for n in self._free
            if n not in self._bad and (request.nodes is None or n in request.nodes)
        ]

    def _fit_indexed(self, request: Request) -> list[tuple[str, int]] | None:
        """``_fit_pods`` over every node, from the (free GPUs, node) index: a bisection per pod
        instead of a scan of the cluster (the same choice: fewest free GPUs, then name)."""
        sizes = sorted((p.gpus for p in request.pods for _ in range(p.count)), reverse=True)
        if len(sizes) == 1:
            i = bisect_left(self._order, (sizes[0], ""))
            return None if i == len(self._order) else [(self._order[i][1], sizes[0])]
        order = list(self._order)
        out: list[tuple[str, int]] = []
        for size in sizes:
            i = bisect_left(order, (size, ""))
            if i == len(order):
                return None
            free, node = order.pop(i)
            insort(order, (free - size, node))
            out.append((node, size))
        return out

    def reserve(self, request: Request, placement: Mapping[str, Iterable[int]]) -> Result:
        """Hold exactly ``placement`` (node -> GPU indices) for ``request.job``: a job already
        running there, e.g. restored from a cluster manager's state. All or nothing; the GPUs
        must exist, be free and add up to the request (bad nodes are allowed: the job is there)."""
        if request.job in self._jobs:
            return Result("error", reason=f"job {request.job} is already placed")
        pods = []
        for node, gpus in placement.items():
            if node not in self._size:
                return Result("error", reason=f"unknown node {node!r}")
            wanted = tuple(sorted(gpus))
            free = set(self._free[node])
            for g in wanted:
                if not 0 <= g < self._size[node]:
                    return Result("error", reason=f"node {node} has no GPU {g}")
                if g not in free:
                    return Result("error", reason=f"GPU {g} of node {node} is not free")
            if len(set(wanted)) != len(wanted):
                return Result("error", reason=f"a GPU of node {node} is listed twice")
            if wanted:
                pods.append(PodPlacement(node, wanted))
        total = sum(len(p.gpus) for p in pods)
        if total != request.total_gpus:
            return Result(
                "error", reason=f"placement holds {total} GPUs, the request {request.total_gpus}"
            )
        for pod in pods:
            self._set_free(pod.node, [g for g in self._free[pod.node] if g not in pod.gpus])
        self._jobs[request.job] = tuple(pods)
        self._free_total -= total
        return Result("placed", pods=tuple(pods))

    def _fit_pods(self, request: Request, allowed: list[str]) -> list[tuple[str, int]] | None:
        free = {n: len(self._free[n]) for n in allowed}
        sizes = sorted((p.gpus for p in request.pods for _ in range(p.count)), reverse=True)
        out: list[tuple[str, int]] = []
        for size in sizes:
            fits = [n for n, f in free.items() if f >= size]
            if not fits:
                return None
            node = min(fits, key=lambda n: (free[n], n))
            free[node] -= size
            out.append((node, size))
        return out

    def _spread(self, total: int, allowed: list[str]) -> list[tuple[str, int]]:
        free = {n: len(self._free[n]) for n in allowed if self._free[n]}
        out: list[tuple[str, int]] = []
        left = total
        while left:
            fits = [n for n, f in free.items() if f >= left]
            node = (
                min(fits, key=lambda n: (free[n], n))
                if fits
                else max(free, key=lambda n: (free[n], n))
            )
            n = min(left, free.pop(node))
            out.append((node, n))
            left -= n
        return out

    def _spread_even(self, total: int, allowed: list[str]) -> list[tuple[str, int]] | None:
        """``k`` nodes of ``total / k`` free GPUs each, for the smallest ``k`` that divides
        ``total`` and has that many such nodes (best fit among them); None if no ``k`` does."""
        free = {n: len(self._free[n]) for n in allowed}
        for k in range(1, total + 1):
            if total % k:
                continue
            share = total // k
            fits = sorted((f, n) for n, f in free.items() if f >= share)
            if len(fits) >= k:
                return [(n, share) for _, n in fits[:k]]
        return None

    def _take(self, node: str, n: int) -> tuple[int, ...]:
        free = self._free[node]
        self._set_free(node, free[n:])
        return tuple(free[:n])

    def _set_free(self, node: str, free: list[int]) -> None:
        """Replace a node's free GPU list, keeping the (free GPUs, node) index in step."""
        order = self._order
        del order[bisect_left(order, (len(self._free[node]), node))]
        insort(order, (len(free), node))
        self._free[node] = free

    def release(self, job: str) -> None:
        for pod in self._jobs.pop(job, ()):
            self._set_free(pod.node, sorted(self._free[pod.node] + list(pod.gpus)))
            self._free_total += len(pod.gpus)

    def set_bad(self, node: str) -> None:
        self._check_node(node)
        self._bad.add(node)

    def set_healthy(self, node: str) -> None:
        self._check_node(node)
        self._bad.discard(node)

    def _check_node(self, node: str) -> None:
        if node not in self._size:
            raise KeyError(f"unknown node {node!r}")

    def free_gpus(self) -> int:
        """Free GPUs on healthy nodes."""
        return self._free_total - sum(len(self._free[n]) for n in self._bad)

    def placement_of(self, job: str) -> Mapping[str, tuple[int, ...]]:
        return Result("placed", pods=self._jobs.get(job, ())).by_node()

    def nodes(self) -> tuple[NodeUsage, ...]:
        return tuple(NodeUsage(n, self._size[n], tuple(self._free[n])) for n in self._size)


def _equal_shares(counts: list[tuple[str, int]]) -> bool:
    """Whether every node of a fit holds the same number of the gang's GPUs."""
    per_node: dict[str, int] = {}
    for node, n in counts:
        per_node[node] = per_node.get(node, 0) + n
    return len(set(per_node.values())) == 1
