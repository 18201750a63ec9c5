"""The SVG drawn in Python: what the heat map says of a node, and that a crowded timeline lane
stays small however many jobs it holds."""

from __future__ import annotations

import re
from pathlib import Path

from chronus_py.ui import charts, timeline
from chronus_py.ui.snapshot import NodeView


def test_heatmap_shows_busy_free_and_unhealthy_with_reason():
    nodes = [
        NodeView("n0", 8, True, "", {0: "guaranteed", 1: "guaranteed", 5: "best_effort"}),
        NodeView("n1", 8, False, "drained: bad DIMM", {}),
    ]
    svg = str(charts.heatmap(nodes))
    states = dict(re.findall(r'<path d="([^"]+)" fill="[^"]+" data-state="([^"]+)"', svg))
    by_state = {v: k for k, v in states.items()}
    assert by_state["busy:guaranteed"].count("M") == 1  # GPUs 0-1: one rectangle
    assert by_state["busy:best_effort"].count("M") == 1
    assert by_state["free"].count("M") == 2  # GPUs 2-4 and 6-7 of n0
    assert by_state["unhealthy"].count("M") == 1  # all of n1
    assert "n1: unhealthy: drained: bad DIMM" in svg


def test_a_crowded_lane_costs_at_most_its_width():
    spans = tuple((float(i), float(i + 3600 + 7 * i), 1, "pool") for i in range(20000))
    lane = timeline.Lane("all", "all", capacity=20000)
    svg = str(
        timeline.draw([lane], [], start=0.0, end=86400.0, stacks=[timeline.Stack("all", spans)])
    )
    points = re.search(r'<path d="([^"]+)" fill="#d97706"', svg).group(1).count("H")
    assert 0 < points <= 2 * 1240
    assert len(svg) < 60_000


def test_a_node_reason_is_text_not_markup():
    """A backend's reason is free text (Slurm's ``scontrol update reason=...``, a Kubernetes
    condition's message): the heat map wrote it into its tooltip unescaped, so a reason with
    ``</title>`` ended the tooltip and put its own markup on the cluster page."""
    reason = '</title></rect></svg><a href="//evil.example">log in again</a>'
    svg = str(charts.heatmap([NodeView("n0", 8, False, reason, {})]))
    assert "<a " not in svg and "evil.example</a>" not in svg
    assert "n0: unhealthy: &lt;/title&gt;&lt;/rect&gt;&lt;/svg&gt;&lt;a href=" in svg


def _contrast(a: str, b: str) -> float:
    """WCAG 2's contrast ratio of two colours (#rgb or #rrggbb)."""

    def luminance(colour: str) -> float:
        if len(colour) == 4:
            colour = "#" + "".join(c * 2 for c in colour[1:])
        channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
        r, g, b = (c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_a_job_name_on_its_bar_is_readable_on_every_kind():
    """A running job's name is written on its bar in 11 px text: white on the pool's amber
    (#d97706) was 3.2:1, under the 4.5:1 WCAG asks of text that size."""
    css = (Path(charts.__file__).parent / "static" / "ui.css").read_text()
    for kind in ("guaranteed", "pool", "best_effort", "elastic"):
        bar = timeline.Bar("n", 0.0, 3600.0, kind, "tip", gpus=1, name="job-name")
        svg = str(timeline.draw([timeline.Lane("n", "n")], [bar], start=0.0, end=7200.0))
        text_class = re.search(r'<text [^>]*class="(on-[a-z]+)">job-name</text>', svg).group(1)
        fill = re.search(rf"svg\.timeline text\.{text_class} {{ fill: (#[0-9a-f]+);", css)
        assert _contrast(fill.group(1), timeline.COLOURS[kind]) >= 4.5, (kind, text_class)


def test_other_tenants_gpus_stand_apart_from_free_ones():
    """In a tenant's heat map, the GPUs other tenants hold were #cbd5e1 beside free GPUs'
    #e2e8f0 (1.2:1): busy looked free. WCAG 1.4.11 asks 3:1 of a graphic's parts."""
    free = charts.STATES["free"]
    node = NodeView("n0", 8, True, "", {0: "other", 1: "other"})
    svg = str(charts.heatmap([node]))
    fill = re.search(r'fill="([^"]+)" data-state="busy:other"', svg).group(1)
    if fill.startswith("url(#"):  # a pattern: its darkest part must stand apart from free
        pattern = re.search(rf'<pattern id="{fill[5:-1]}".*?</pattern>', svg).group(0)
        colours = re.findall(r'fill="(#[0-9a-f]{6})"', pattern)
        assert max(_contrast(c, free) for c in colours) >= 3, colours
        legend = str(timeline.legend(("other",)))
        assert f'id="{fill[5:-1]}"' in legend and f'fill="{fill}"' in legend
    else:
        assert _contrast(fill, free) >= 3, fill
