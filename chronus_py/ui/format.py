"""How the pages write times, durations and placements (Jinja2 filters)."""

from __future__ import annotations

import math
from typing import Mapping, Sequence
from urllib.parse import quote


def duration(seconds: float | None) -> str:
    """``1h 20m``, ``45m``, ``2d 3h``; whole minutes (the pages refresh every few seconds, so
    a finer figure would only make every poll differ)."""
    if seconds is None or not math.isfinite(seconds):
        return "—"
    sign = "−" if seconds < 0 else ""
    minutes = int(round(abs(seconds) / 60))
    days, rest = divmod(minutes, 1440)
    hours, mins = divmod(rest, 60)
    if days:
        return f"{sign}{days}d {hours}h"
    if hours:
        return f"{sign}{hours}h {mins:02d}m"
    return f"{sign}{mins}m"


def relative(t: float | None, now: float) -> str:
    """A time on the backend's clock, as seen from now: ``in 1h 20m`` or ``12m ago``."""
    if t is None or not math.isfinite(t):
        return "—"
    delta = t - now
    if abs(delta) < 30:
        return "now"
    return f"in {duration(delta)}" if delta > 0 else f"{duration(-delta)} ago"


def figure(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "ratio":
        return f"{100 * value:.1f} %"
    if unit == "seconds":
        return f"{value * 1000:.1f} ms" if value < 1 else duration(value)
    return f"{value:,.0f}"


def placement(value: Mapping[str, Sequence[int]] | None) -> str:
    """``node-3: 0-3, node-4: 0-3``."""
    if not value:
        return "—"
    return ", ".join(f"{node}: {_ranges(sorted(gpus))}" for node, gpus in sorted(value.items()))


def _ranges(indices: Sequence[int]) -> str:
    out: list[list[int]] = []
    for g in indices:
        if out and out[-1][1] + 1 == g:
            out[-1][1] = g
        else:
            out.append([g, g])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in out)


def seconds(t: float | None) -> str:
    """A raw time for data attributes (whole seconds; empty when unknown)."""
    return "" if t is None or not math.isfinite(t) else f"{t:.0f}"


def job_url(job_id: str, then: str = "") -> str:
    """A job's page (``then="/cancel"``: its cancel form's target), its id quoted whole (ids
    hold ``:``; the service refuses ``.`` and ``..``, which a browser resolves away)."""
    return f"/ui/jobs/{quote(job_id, safe='')}{then}"


FILTERS = {
    "job_url": job_url,
    "duration": duration,
    "relative": relative,
    "figure": figure,
    "placement": placement,
    "seconds": seconds,
}
