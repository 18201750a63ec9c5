"""From a :class:`~chronus_py.ui.snapshot.Snapshot` to what the pages draw: the timeline's
lanes and bars, the jobs table sorted and filtered, and the cluster's tenant shares. Pure
functions: the same snapshot gives the same page.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from markupsafe import Markup

from chronus_py.ui import timeline
from chronus_py.ui.format import job_url
from chronus_py.ui.snapshot import JobRow, NodeView, Snapshot

SPANS = {"1h": 3600.0, "6h": 6 * 3600.0, "1d": 86400.0, "3d": 3 * 86400.0, "7d": 7 * 86400.0}
DEFAULT_SPAN = "6h"
MAX_NODE_LANES = 48
MAX_LANES = 32
MAX_RESERVED_LANES = 16
TICK = 60.0
"""The step of the clock the jobs, job and cluster pages are drawn at (their now, rounded down
to it): they write times to the minute, so between two steps an unchanged service draws them
the same, and their polls are 304s (``routes``)."""
PAGE = 200
ENDED = 200
"""The jobs table lists every active job and the most recently ended ones, this many."""
SORTS = (
    "slack",
    "id",
    "tenant",
    "state",
    "kind",
    "gpus",
    "decision",
    "guaranteed_at",
    "planned_start",
    "planned_finish",
    "estimate",
    "preemptions",
)


def window(now: float, span: str) -> tuple[float, float]:
    """A quarter of the span behind now, three quarters ahead."""
    seconds = SPANS[span]
    return now - seconds / 4, now + 3 * seconds / 4


def quantize(now: float, span: str | None = None) -> float:
    """Now to a thousandth of the span (under a pixel): between two such steps the timeline's
    drawing, and so its ETag, stays the same. Without a span: to the ``TICK``."""
    step = TICK if span is None else SPANS[span] / 1000
    return math.floor(now / step) * step


def draw_timeline(snap: Snapshot, span: str) -> Markup:
    start, end = window(snap.now, span)
    lanes, bars, stacks = plan_lanes(snap, start, end)
    return timeline.draw(
        lanes,
        bars,
        start=start,
        end=end,
        now=snap.now,
        stacks=stacks,
        title="timeline of the lease plan",
    )


def _group_of(snap: Snapshot, node: NodeView, owners: dict[str, str]) -> str:
    """A node's group under a HiveD config: the tenant whose cell it is pinned to, else the
    tenant that holds most of its GPUs now (virtual cells bind as jobs are placed)."""
    tenant = snap.cells.get(node.name) or owners.get(node.name)
    if tenant is None:
        return "unbound cells"
    if not snap.caller.admin and tenant != snap.caller.tenant:
        return "other tenants' cells"
    return f"cells of {tenant}"


def plan_lanes(
    snap: Snapshot, start: float, end: float
) -> tuple[list[timeline.Lane], list[timeline.Bar], list[timeline.Stack]]:
    """Lanes by node (by groups of nodes on a large cluster), then the reserved leases."""
    hived = bool(snap.quotas)
    owners = _owners(snap) if hived else {}
    nodes = list(snap.nodes)
    if hived:
        nodes.sort(key=lambda n: (_group_of(snap, n, owners), n.name))
    lanes: list[timeline.Lane] = []
    bars: list[timeline.Bar] = []
    stacks: list[timeline.Stack] = []
    by_node: dict[str, list[tuple[JobRow, tuple[int, ...]]]] = {}
    for job in snap.jobs:
        for node, gpus in job.placement.items():
            by_node.setdefault(node, []).append((job, gpus))
    if len(nodes) <= MAX_NODE_LANES:
        for node in nodes:
            group = _group_of(snap, node, owners) if hived else "nodes"
            lanes.append(timeline.Lane(node.name, node.name, group, node.gpus))
            bars.extend(_node_bars(snap, node, by_node.get(node.name, []), start))
    else:
        size = math.ceil(len(nodes) / MAX_LANES)
        for at in range(0, len(nodes), size):
            chunk = nodes[at : at + size]
            key = f"{chunk[0].name}…{chunk[-1].name}"
            group = _group_of(snap, chunk[0], owners) if hived else f"nodes ({size} a row)"
            lanes.append(timeline.Lane(key, key, group, sum(n.gpus for n in chunk)))
            spans = []
            for node in chunk:
                for job, gpus in by_node.get(node.name, []):
                    spans.append(
                        (job.planned_start or start, job.planned_finish or end, len(gpus), job.kind)
                    )
                mine = {g for _, gs in by_node.get(node.name, []) for g in gs}
                others = sum(1 for g in node.busy if g not in mine)
                if others:
                    spans.append((_held_now(snap, start), snap.now, others, "other"))
            stacks.append(timeline.Stack(key, tuple(spans)))
    reserved = sorted(
        (j for j in snap.jobs if j.state == "pending" and j.leases and snap.lease),
        key=lambda j: (j.planned_start, j.id),
    )
    if reserved:
        group = "reserved leases (guaranteed jobs ahead)"
        lane_of = timeline.pack([(j.planned_start, j.planned_finish) for j in reserved])
        if max(lane_of) < MAX_RESERVED_LANES:
            for i in range(max(lane_of) + 1):
                lanes.append(timeline.Lane(f"reserved-{i}", f"lane {i + 1}", group, 1))
            for job, lane in zip(reserved, lane_of):
                bars.extend(_lease_bars(job, f"reserved-{lane}", snap.lease))
        else:
            spans = tuple(
                (b.start, b.end, job.gpus, job.kind)
                for job in reserved
                for b in _lease_bars(job, "reserved", snap.lease)
            )
            peak = _peak(spans)
            label = f"{len(reserved)} jobs, ≤{peak} GPUs"
            lanes.append(timeline.Lane("reserved", label, group, max(peak, 1), rows=3))
            stacks.append(timeline.Stack("reserved", spans, reserved=True))
    return lanes, bars, stacks


def _peak(spans) -> int:
    """The most GPUs the spans hold at once."""
    changes = sorted([(s, g) for s, _, g, _ in spans] + [(e, -g) for _, e, g, _ in spans])
    level = peak = 0
    for _, delta in changes:
        level += delta
        peak = max(peak, level)
    return peak


def _owners(snap: Snapshot) -> dict[str, str]:
    """node -> the tenant holding most of its GPUs now (the caller's own jobs only, unless
    admin: another tenant's occupancy shows as theirs without a name)."""
    held: dict[str, dict[str, int]] = {}
    for job in snap.jobs:
        for node, gpus in job.placement.items():
            held.setdefault(node, {}).setdefault(job.tenant, 0)
            held[node][job.tenant] += len(gpus)
    for node in snap.nodes:
        others = sum(1 for k in node.busy.values() if k == "other")
        if others:
            held.setdefault(node.name, {})["(others)"] = others
    return {n: max(t.items(), key=lambda kv: kv[1])[0] for n, t in held.items() if t}


def _node_bars(
    snap: Snapshot, node: NodeView, jobs: list[tuple[JobRow, tuple[int, ...]]], start: float
) -> list[timeline.Bar]:
    out = []
    mine: set[int] = set()
    first_node = {}
    for job, gpus in jobs:
        mine.update(gpus)
        first_node.setdefault(job.id, min(job.placement))
        for lo, count in _runs(sorted(gpus)):
            out.append(
                timeline.Bar(
                    lane=node.name,
                    start=job.planned_start if job.planned_start is not None else start,
                    end=job.planned_finish if job.planned_finish is not None else snap.now,
                    kind=job.kind,
                    label=_tip(job),
                    offset=lo,
                    gpus=count,
                    deadline=_deadline(job) if node.name == first_node[job.id] else None,
                    href=job_url(job.id),
                    name=job.id,
                )
            )
    others = sorted(g for g in node.busy if g not in mine)
    for lo, count in _runs(others):
        out.append(
            timeline.Bar(
                node.name,
                _held_now(snap, start),
                snap.now,
                "other",
                "held now by another tenant's job (its times are not yours to see)",
                lo,
                count,
            )
        )
    return out


def _lease_bars(job: JobRow, lane: str, lease: float) -> list[timeline.Bar]:
    """A reserved job's leases, neighbouring ones merged; the deadline next to the last."""
    spans: list[list[float]] = []
    for t in job.leases:
        end = min(t + lease, job.planned_finish)
        if spans and abs(spans[-1][1] - t) < 1e-6:
            spans[-1][1] = end
        else:
            spans.append([t, end])
    return [
        timeline.Bar(
            lane=lane,
            start=s,
            end=e,
            kind=job.kind,
            label=_tip(job),
            deadline=_deadline(job) if i == len(spans) - 1 else None,
            reserved=True,
            href=job_url(job.id),
            name=job.id,
        )
        for i, (s, e) in enumerate(spans)
    ]


def _held_now(snap: Snapshot, start: float) -> float:
    """Where a mark of GPUs another tenant holds now begins: a short block ending at now (the
    view knows they are busy, not since when nor until when)."""
    return snap.now - (snap.now - start) / 40


def _runs(indices: Sequence[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for g in indices:
        if out and out[-1][0] + out[-1][1] == g:
            out[-1] = (out[-1][0], out[-1][1] + 1)
        else:
            out.append((g, 1))
    return out


def _deadline(job: JobRow) -> float | None:
    return job.guaranteed_at if job.guaranteed_at is not None else job.first_deadline


def _tip(job: JobRow) -> str:
    size = f"{job.gpus} GPUs" + (" (elastic size)" if job.kind == "elastic" else "")
    deadline = _deadline(job)
    parts = [f"{job.id} ({job.tenant}): {job.kind.replace('_', '-')}, {size}"]
    if deadline is not None:
        parts.append(f"deadline {deadline:.0f}")
    if job.planned_finish is not None:
        parts.append(f"planned finish {job.planned_finish:.0f}")
    return ", ".join(parts)


@dataclass(frozen=True)
class Table:
    rows: list[JobRow]
    total: int
    sort: str
    descending: bool
    first: int = 0
    """The index of the first row shown among the ``total`` chosen."""
    pages: int = 1


def table(
    jobs: Sequence[JobRow],
    *,
    sort: str = "slack",
    descending: bool = False,
    state: str = "",
    kind: str = "",
    text: str = "",
    limit: int = PAGE,
    page: int = 1,
) -> Table:
    """Filter (state, kind, a substring of id or tenant) then sort, missing values last; the
    ``page``-th ``limit`` rows."""
    text = text.strip().lower()
    chosen = [
        j
        for j in jobs
        if (not state or j.state == state)
        and (not kind or j.kind == kind)
        and (not text or text in j.id.lower() or text in j.tenant.lower())
    ]
    present = [j for j in chosen if getattr(j, sort) is not None]
    missing = [j for j in chosen if getattr(j, sort) is None]
    present.sort(key=lambda j: (getattr(j, sort), j.id), reverse=descending)
    ordered = present + sorted(missing, key=lambda j: j.id)
    first = (page - 1) * limit
    pages = max(1, -(-len(chosen) // limit))
    return Table(ordered[first : first + limit], len(chosen), sort, descending, first, pages)


def tenant_shares(snap: Snapshot) -> list[dict]:
    """Per tenant: GPUs running now, against its HiveD cells (its quota) when there is one."""
    tenants = sorted(set(snap.usage) | set(snap.quotas))
    return [
        {"tenant": t, "used": snap.usage.get(t, 0), "quota": snap.quotas.get(t)} for t in tenants
    ]


def gpu_counts(snap: Snapshot) -> dict[str, int]:
    busy = sum(len(n.busy) for n in snap.nodes if n.healthy)
    unhealthy = sum(n.gpus for n in snap.nodes if not n.healthy)
    free = max(snap.total_gpus - busy - unhealthy, 0)
    reserved = min(snap.reserved_now, free)
    return {"busy": busy, "reserved": reserved, "free": free - reserved, "unhealthy": unhealthy}
