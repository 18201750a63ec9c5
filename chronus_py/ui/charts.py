"""The cluster heat map and the sparklines, as inline SVG drawn in Python.

The heat map draws every GPU of every node (a column of cells per node) but as one path per
state, with a node's neighbouring GPUs of the same state merged into one rectangle: 8,192 GPUs
cost tens of kilobytes, not one element each.
"""

from __future__ import annotations

from html import escape
from typing import Sequence

from markupsafe import Markup

from chronus_py.ui.snapshot import NodeView
from chronus_py.ui.timeline import COLOURS, HATCH

CELL = 9
GAP = 1
STATES = {
    **{f"busy:{k}": c for k, c in COLOURS.items()},
    "free": "#e2e8f0",
    "unhealthy": "#f87171",
}


def heatmap(nodes: Sequence[NodeView], *, per_block: int = 64, titles: bool = True) -> Markup:
    """A row per node, a cell per GPU; ``per_block`` nodes a block, blocks side by side. Node
    names are written when there is one block, and are tooltips up to ``titles``."""
    if not nodes:
        return Markup("")
    wide = max(n.gpus for n in nodes)
    pitch = CELL + GAP
    label = 70 if len(nodes) <= per_block else 0
    block_w = label + wide * pitch + 10
    paths: dict[str, list[str]] = {s: [] for s in STATES}
    extra: list[str] = []
    for i, node in enumerate(nodes):
        x0 = (i // per_block) * block_w + label
        y = (i % per_block) * pitch
        run_state, run_from = None, 0
        for g in range(node.gpus + 1):
            state = None
            if g < node.gpus:
                if not node.healthy:
                    state = "unhealthy"
                elif g in node.busy:
                    state = f"busy:{node.busy[g]}"
                else:
                    state = "free"
            if state != run_state:
                if run_state is not None:
                    w = (g - run_from) * pitch - GAP
                    paths[run_state].append(f"M{x0 + run_from * pitch} {y}h{w}v{CELL}h-{w}z")
                run_state, run_from = state, g
        if label:
            extra.append(
                f'<text x="{x0 - 4}" y="{y + CELL}" class="node">{escape(node.name)}</text>'
            )
        if titles or not node.healthy:
            what = "unhealthy: " + (node.reason or "no reason given") if not node.healthy else ""
            extra.append(
                f'<rect x="{x0}" y="{y}" width="{node.gpus * pitch - GAP}" height="{CELL}" '
                f'fill-opacity="0" data-node="{escape(node.name)}"><title>{escape(node.name)}: '
                f"{escape(what) or f'{len(node.busy)}/{node.gpus} GPUs busy'}</title></rect>"
            )
    blocks = (len(nodes) + per_block - 1) // per_block
    width = blocks * block_w
    height = min(len(nodes), per_block) * pitch
    scale = 2 if len(nodes) <= per_block else 1
    body = "".join(
        f'<path d="{"".join(p)}" fill="{STATES[s]}" data-state="{s}"/>'
        for s, p in paths.items()
        if p
    )
    return Markup(
        f'<svg xmlns="http://www.w3.org/2000/svg" class="heatmap" role="img" '
        f'aria-label="GPU heat map" viewBox="0 0 {width} {height}" width="{width * scale}" '
        f'height="{height * scale}">{HATCH}{body}{"".join(extra)}</svg>'
    )


def sparkline(
    points: Sequence[tuple[float, float]], *, width: int = 120, height: int = 32
) -> Markup:
    """A small line of (time, value) points, scaled to its own range."""
    if len(points) < 2:
        return Markup(
            f'<svg class="spark" width="{width}" height="{height}"><text x="2" y="{height - 12}" '
            'class="tick">collecting…</text></svg>'
        )
    t0, t1 = points[0][0], points[-1][0]
    lo = min(v for _, v in points)
    hi = max(v for _, v in points)
    span_t = (t1 - t0) or 1.0
    span_v = (hi - lo) or 1.0
    coords = " ".join(
        f"{2 + (t - t0) / span_t * (width - 4):.1f},"
        f"{height - 3 - (v - lo) / span_v * (height - 6):.1f}"
        for t, v in points
    )
    return Markup(
        f'<svg class="spark" viewBox="0 0 {width} {height}" preserveAspectRatio="none" '
        f'height="{height}" role="img" aria-label="history">'
        f'<polyline points="{coords}" fill="none" stroke="#2563eb" stroke-width="1.5"/></svg>'
    )


def share_bar(parts: Sequence[tuple[str, int, str]], total: int, *, width: int = 320) -> Markup:
    """A horizontal bar of (label, count, colour) parts of ``total``."""
    x = 0.0
    out = []
    for label, count, colour in parts:
        w = width * count / total if total else 0
        if w > 0:
            out.append(
                f'<rect x="{x:.1f}" y="0" width="{w:.1f}" height="14" fill="{colour}">'
                f"<title>{escape(label)}: {count}</title></rect>"
            )
        x += w
    return Markup(
        f'<svg class="share" width="{width}" height="14" viewBox="0 0 {width} 14" '
        f'preserveAspectRatio="none" role="img" aria-label="share">'
        f'<rect width="{width}" height="14" fill="#f1f5f9"/>{"".join(out)}</svg>'
    )
