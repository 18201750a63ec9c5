"""The timeline component: lanes over time, as one inline SVG, drawn in Python.

The service's view (lanes by node, bars for running jobs and reserved leases) and the replay
report (lanes packed from a replayed schedule) both hand it :class:`Lane` s and :class:`Bar` s.
A bar stacks in its lane by GPUs (``offset``/``gpus`` of the lane's ``capacity``), so a node's
row shows which of its GPUs each job holds. A lane too crowded to show each job (a row standing
for many nodes) gets stacked areas per kind instead (:class:`Stack`): the GPUs each kind holds
over time, exact, in a size that grows with the number of job ends, not of jobs.

Colours are by kind; the "now" line, deadline marks and slack shading are drawn on top. Every
style is an SVG attribute, so the page needs no inline style (a strict Content-Security-Policy).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from typing import Callable, Iterable, Sequence

from markupsafe import Markup

COLOURS = {
    "guaranteed": "#2563eb",
    "pool": "#d97706",
    "best_effort": "#64748b",
    "elastic": "#7c3aed",
    "other": "url(#other-tenants)",
}
HATCH = (
    '<defs><pattern id="other-tenants" width="4" height="4" patternUnits="userSpaceOnUse" '
    'patternTransform="rotate(45)"><rect width="4" height="4" fill="#e2e8f0"/>'
    '<rect width="1.6" height="4" fill="#64748b"/></pattern></defs>'
)
"""Other tenants' GPUs: grey stripes, defined in every drawing that may use them (one id, the
same pattern). A flat #cbd5e1 was 1.2:1 against a free GPU's #e2e8f0 in the heat map, so a
tenant could not tell the GPUs others hold from free ones; no flat grey is both 3:1 from
free and apart from best-effort's slate, and stripes are, in colour or not."""
ON = {"pool": "on-amber"}
"""The class of a job's name written on its bar, by kind (else ``on-dark``, white; ``on-light``
on a reserved lease's pale bar): white on the pool's amber was 3.2:1, under the 4.5:1 that
11 px text needs (WCAG 1.4.3), so its names are dark (5.6:1)."""
LABELS = {
    "guaranteed": "guaranteed",
    "pool": "deadline, in the pool",
    "best_effort": "best-effort",
    "elastic": "elastic",
    "other": "other tenants",
}
LEFT = 150
TOP = 24
ROW = 22
GROUP = 16
CHAR = 6.6
"""Width of a character of a bar's name (11 px sans-serif), to cut names that do not fit."""
STEPS = (60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 2 * 86400)


@dataclass(frozen=True, slots=True)
class Lane:
    key: str
    label: str
    group: str = ""
    capacity: int = 1
    rows: int = 1
    """Height in rows (a lane standing for a whole cluster gets more)."""


@dataclass(frozen=True, slots=True)
class Bar:
    """One job (or lease of a job) in a lane: ``reserved`` marks a lease booked ahead rather
    than a run; ``deadline`` is drawn next to its end with the slack between them shaded."""

    lane: str
    start: float
    end: float
    kind: str
    label: str
    offset: int = 0
    gpus: int = 1
    deadline: float | None = None
    reserved: bool = False
    href: str | None = None
    name: str = ""
    """Written on the bar where it fits."""


@dataclass(frozen=True, slots=True)
class Stack:
    """A crowded lane's jobs as (start, end, gpus, kind) spans, drawn as stacked areas."""

    lane: str
    spans: tuple[tuple[float, float, int, str], ...]
    reserved: bool = False
    """Leases booked ahead (drawn light, as reserved bars are)."""


def draw(
    lanes: Sequence[Lane],
    bars: Iterable[Bar],
    *,
    start: float,
    end: float,
    now: float | None = None,
    stacks: Iterable[Stack] = (),
    width: int = 1240,
    tick: Callable[[float], str] | None = None,
    anchor: float | None = None,
    title: str = "timeline",
) -> Markup:
    """The SVG of ``lanes`` from ``start`` to ``end`` (the backend's seconds). Ticks fall on
    whole steps from ``anchor`` (default: now) and are labelled by ``tick`` (default: the
    offset from now)."""
    span = max(end - start, 1e-9)
    plot = width - LEFT - 8
    scale = plot / span

    def x(t: float) -> float:
        return LEFT + (min(max(t, start), end) - start) * scale

    ys: dict[str, tuple[float, float, float]] = {}
    out: list[str] = []
    y = TOP
    group = None
    for lane in lanes:
        if lane.group and lane.group != group:
            group = lane.group
            out.append(
                f'<text x="4" y="{y + 12}" class="grp">{escape(group)}</text>'
                f'<line x1="{LEFT}" x2="{width - 8}" y1="{y + GROUP - 2}" y2="{y + GROUP - 2}" '
                'stroke="#94a3b8" stroke-width="0.5"/>'
            )
            y += GROUP
        ys[lane.key] = (y, float(lane.capacity), ROW * lane.rows)
        out.append(
            f'<text x="{12 if lane.group else 4}" y="{y + 15}" class="lane">'
            f"{escape(lane.label)}</text>"
        )
        y += ROW * lane.rows
    height = y + 6
    grid = [
        f'<rect x="{LEFT}" y="{TOP}" width="{plot}" height="{y - TOP}" fill="#f8fafc"/>',
    ]
    step = next((s for s in STEPS if span / s <= 12), STEPS[-1] * math.ceil(span / STEPS[-1] / 12))
    label = tick or (lambda t: _relative(t - now) if now is not None else f"{t / 3600:g} h")
    if anchor is None:
        anchor = now if now is not None else 0.0
    t = anchor + math.ceil((start - anchor) / step) * step
    while t <= end:
        gx = x(t)
        grid.append(
            f'<line x1="{gx:.1f}" x2="{gx:.1f}" y1="{TOP - 4}" y2="{y}" stroke="#e2e8f0"/>'
            f'<text x="{gx:.1f}" y="{TOP - 8}" class="tick">{escape(label(t))}</text>'
        )
        t += step
    marks: list[str] = []
    linked = False
    for stack in stacks:
        if stack.lane in ys:
            out.append(_stack(stack, ys[stack.lane], x, start, end))
    for bar in bars:
        if bar.lane not in ys or bar.end <= start or bar.start >= end:
            continue
        top, capacity, tall = ys[bar.lane]
        by = top + 1 + (tall - 2) * bar.offset / capacity
        bh = max((tall - 2) * bar.gpus / capacity, 1.5)
        x0, x1 = x(bar.start), x(bar.end)
        colour = COLOURS.get(bar.kind, COLOURS["other"])
        tip = escape(bar.label)
        style = (
            f'fill="{colour}" fill-opacity="0.35" stroke="{colour}" stroke-dasharray="3 2"'
            if bar.reserved
            else f'fill="{colour}"'
        )
        # A linked bar's tip is its link's <title>: one copy is both the tooltip over the bar
        # and the link's name for a screen reader and the keyboard.
        titled = "" if bar.href else f"<title>{tip}</title>"
        rect = (
            f'<rect x="{x0:.1f}" y="{by:.1f}" width="{max(x1 - x0, 1.0):.1f}" height="{bh:.1f}" '
            f"{style}>{titled}</rect>"
        )
        fits = int((x1 - x0 - 6) / CHAR)
        if bar.name and bh >= 10 and fits >= 4:
            name = bar.name if len(bar.name) <= fits else bar.name[: fits - 1] + "…"
            rect += (
                f'<text x="{x0 + 3:.1f}" y="{by + bh / 2 + 4:.1f}" class="'
                f'{"on-light" if bar.reserved else ON.get(bar.kind, "on-dark")}">'
                f"{escape(name)}</text>"
            )
        if bar.href:
            rect = f'<a href="{escape(bar.href)}"><title>{tip}</title>{rect}</a>'
            linked = True
        out.append(rect)
        if bar.deadline is not None and start <= bar.deadline <= end + span:
            dx = x(bar.deadline)
            lo, hi = sorted((x1, dx))
            late = bar.deadline < bar.end
            marks.append(
                f'<rect x="{lo:.1f}" y="{by:.1f}" width="{hi - lo:.1f}" height="{bh:.1f}" '
                f'fill="{"#dc2626" if late else "#16a34a"}" fill-opacity="0.18"/>'
            )
            if bar.deadline <= end:
                marks.append(
                    f'<path d="M{dx:.1f} {by - 1:.1f}v{bh + 2:.1f}" stroke="#b91c1c" '
                    'stroke-width="2"><title>deadline</title></path>'
                )
    if now is not None and start <= now <= end:
        nx = x(now)
        marks.append(
            f'<line x1="{nx:.1f}" x2="{nx:.1f}" y1="{TOP - 4}" y2="{y}" stroke="#0f172a" '
            f'stroke-width="1.5"/><text x="{nx + 3:.1f}" y="{y + 4}" class="now">now</text>'
        )
        height += 8
    # A drawing whose bars are links is a group of them: as an image, a screen reader heard one
    # picture while the keyboard's focus went into links within it (axe's nested-interactive).
    return Markup(
        f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" '
        f'role="{"group" if linked else "img"}" aria-label="{escape(title)}" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}">{HATCH}'
        + "".join(grid)
        + "".join(out)
        + "".join(marks)
        + "</svg>"
    )


SWATCH = '<svg width="12" height="12" aria-hidden="true">'
"""A legend's colour sample: decoration beside its words (a screen reader reads the words)."""


def legend(
    kinds: Iterable[str] = ("guaranteed", "pool", "best_effort", "elastic"),
    *,
    reserved: bool = True,
) -> Markup:
    items = "".join(
        f'<span class="key">{SWATCH}{HATCH if k == "other" else ""}'
        f'<rect width="12" height="12" fill="{COLOURS[k]}"/></svg>{escape(LABELS[k])}</span>'
        for k in kinds
    )
    if reserved:
        items += (
            f'<span class="key">{SWATCH}<rect width="11" height="11" '
            'x="0.5" y="0.5" fill="#2563eb" fill-opacity="0.35" stroke="#2563eb" '
            'stroke-dasharray="3 2"/></svg>reserved lease</span>'
        )
    return Markup(
        items + f'<span class="key">{SWATCH}<rect width="12" height="12" '
        'fill="#16a34a" fill-opacity="0.3"/><path d="M11 0v12" stroke="#b91c1c" '
        'stroke-width="2"/></svg>slack to deadline</span>'
    )


def pack(bars: Sequence[tuple[float, float]]) -> list[int]:
    """First-fit lanes for intervals (sorted by start by the caller): lane index per interval,
    so bars that do not overlap in time share a lane."""
    ends: list[float] = []
    out = []
    for begin, finish in bars:
        for i, last in enumerate(ends):
            if last <= begin:
                ends[i] = finish
                out.append(i)
                break
        else:
            ends.append(finish)
            out.append(len(ends) - 1)
    return out


def _stack(stack: Stack, lane: tuple[float, float, float], x, start: float, end: float) -> str:
    """Stacked step areas, one polygon per kind, of the GPUs each kind holds in a lane."""
    top, capacity, tall = lane
    # Changes within one pixel column are one change: a lane costs at most its width in
    # points, however many jobs end in it.
    deltas: dict[float, dict[str, int]] = {}
    for s, e, gpus, kind in stack.spans:
        s, e = round(x(s)), round(x(e))
        if e <= s:
            continue
        deltas.setdefault(s, {}).setdefault(kind, 0)
        deltas[s][kind] += gpus
        deltas.setdefault(e, {}).setdefault(kind, 0)
        deltas[e][kind] -= gpus
    if not deltas:
        return ""
    times = sorted(deltas)
    kinds = [k for k in COLOURS if any(k in d for d in deltas.values())]
    level = dict.fromkeys(kinds, 0)
    rows = []  # per interval: the cumulative level below each kind, and its top
    for t in times[:-1]:
        for kind, d in deltas[t].items():
            level[kind] += d
        below = 0
        cuts = []
        for kind in kinds:
            cuts.append((below, below + level[kind]))
            below += level[kind]
        rows.append(cuts)
    base = top + tall - 1
    unit = (tall - 2) / capacity
    light = ' fill-opacity="0.4"' if stack.reserved else ""
    out = []
    for k, kind in enumerate(kinds):
        if not any(r[k][1] > r[k][0] for r in rows):
            continue
        upper = "".join(
            f"V{base - min(r[k][1], capacity) * unit:.1f}H{times[i + 1]}"
            for i, r in enumerate(rows)
        )
        lower = "".join(
            f"V{base - min(rows[i][k][0], capacity) * unit:.1f}H{times[i]}"
            for i in range(len(rows) - 1, -1, -1)
        )
        out.append(
            f'<path d="M{times[0]} {base}{upper}{lower}Z" fill="{COLOURS[kind]}"{light}>'
            f"<title>{escape(LABELS[kind])}</title></path>"
        )
    return "".join(out)


def _relative(seconds: float) -> str:
    """A tick's offset from now: ``now``, ``+30m``, ``−1h30m``, ``+2d``."""
    minutes = round(seconds / 60)
    if minutes == 0:
        return "now"
    sign = "+" if minutes > 0 else "−"
    days, rest = divmod(abs(minutes), 1440)
    hours, mins = divmod(rest, 60)
    text = (
        (f"{days}d" if days else "") + (f"{hours}h" if hours else "") + (f"{mins}m" if mins else "")
    )
    return sign + text
