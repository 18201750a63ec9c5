"""The SVG drawn in Python: what the heat map says of a node, and that a crowded timeline lane
stays small however many jobs it holds."""

from __future__ import annotations

import re

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
