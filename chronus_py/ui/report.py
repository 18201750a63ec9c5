"""The HTML report of a replay (``chronus replay --out DIR``) or a comparison (``chronus compare
--out DIR``): the schedule itself, drawn by the service view's timeline component over a window
of the replay, next to the metrics and the plots the command already wrote.

A replay's schedule is read back from its ``jobs.csv`` (first start, finish, GPUs, kind,
deadlines, guarantee of every job), so any window can be drawn again later without replaying::

    python -m chronus_py.ui.report DIR --from-hour 24 --hours 12

The page is one self-contained file (styles inline, no script): it opens from disk, offline.
A job is drawn from its first start to its finish (a preempted job's gaps are inside its bar;
``preemptions`` says how many).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from chronus_py.errors import InputError
from chronus_py.ui import timeline
from chronus_py.ui.pages import HERE, TEMPLATES

HOURS = 12.0
MAX_LANES = 40
PLOTS = (
    "deadline_ratio.png",
    "daily_deadline_ratio.png",
    "be_jct_cdf.png",
    "gpu_utilization.png",
    "preemptions.png",
)


@dataclass(frozen=True, slots=True)
class Run:
    """One replayed job, as ``jobs.csv`` has it."""

    id: str
    submit: float
    start: float
    finish: float
    gpus: int
    kind: str
    deadline: float | None
    guaranteed: bool
    preemptions: int


def read_jobs(path: Path) -> list[Run]:
    """A replay's ``jobs.csv``; a bad row is one line naming the row and field."""
    try:
        with open(path, newline="") as fh:
            rows = list(csv.DictReader(fh))
    except OSError as exc:
        raise InputError(path, f"cannot read the replay's jobs: {exc.strerror}") from None
    out = []
    for number, row in enumerate(rows, 2):
        if not row.get("first_start") or not row.get("finish"):
            continue  # an elastic job that was declined or dropped: it has no run to draw
        field = "job_id"
        try:
            field = "deadlines"
            deadlines = [float(d) for d in (row["deadlines"] or "").split("-") if d]
            field = "submit"
            submit = float(row["submit"])
            field = "first_start"
            start = float(row["first_start"])
            field = "finish"
            finish = float(row["finish"])
            field = "gpus"
            gpus = int(row["gpus"])
            field = "preemptions"
            preemptions = int(row["preemptions"])
            field = "kind"
            kind = row["kind"]
        except (KeyError, TypeError, ValueError):
            raise InputError(path, "expected a number", line=number, field=field) from None
        out.append(
            Run(
                id=row["job_id"],
                submit=submit,
                start=start,
                finish=finish,
                gpus=gpus,
                kind=kind,
                deadline=deadlines[0] if deadlines else None,
                guaranteed=row.get("guaranteed") == "True",
                preemptions=preemptions,
            )
        )
    return out


def draw_schedule(runs: Sequence[Run], gpus: int, start: float, end: float) -> tuple[str, int]:
    """The timeline of a replayed window: GPUs in use by kind, then each deadline job (packed
    into lanes) with its deadline mark. Returns the SVG and how many jobs did not fit."""
    kinds = {r.id: _kind(r) for r in runs}
    lanes = [timeline.Lane("busy", "GPUs in use", "the cluster", max(gpus, 1), rows=5)]
    stack = timeline.Stack("busy", tuple((r.start, r.finish, r.gpus, kinds[r.id]) for r in runs))
    slo = sorted(
        (r for r in runs if r.deadline is not None and r.finish > start and r.start < end),
        key=lambda r: (r.start, r.id),
    )
    lane_of = timeline.pack([(r.start, max(r.finish, r.deadline)) for r in slo])
    shown = [(r, i) for r, i in zip(slo, lane_of) if i < MAX_LANES]
    used = 1 + max((i for _, i in shown), default=-1)
    group = "deadline jobs (first start to finish)"
    lanes += [timeline.Lane(f"slo-{i}", f"lane {i + 1}", group) for i in range(used)]
    bars = [
        timeline.Bar(
            lane=f"slo-{i}",
            start=r.start,
            end=r.finish,
            kind=kinds[r.id],
            label=f"{r.id}: {r.gpus} GPUs, {kinds[r.id].replace('_', '-')}, "
            f"deadline {r.deadline:.0f}, finished {r.finish:.0f}, "
            f"{r.preemptions} preemption(s)",
            deadline=r.deadline,
        )
        for r, i in shown
    ]
    origin = min((r.submit for r in runs), default=0.0)
    svg = timeline.draw(
        lanes,
        bars,
        start=start,
        end=end,
        stacks=[stack],
        tick=lambda t: f"h {(t - origin) / 3600:g}",
        anchor=origin,
        title="replayed schedule",
    )
    return svg, len(slo) - len(shown)


def _kind(run: Run) -> str:
    if run.deadline is None:
        return "best_effort"
    return "guaranteed" if run.guaranteed else "pool"


def write(
    out: Path,
    *,
    runs: Sequence[Run],
    gpus: int,
    title: str,
    metrics: Sequence[tuple[str, str]],
    from_hour: float | None = None,
    hours: float = HOURS,
    note: str = "",
) -> Path:
    """``out/report.html``: the schedule from ``from_hour`` (hours after the first submission;
    default the start) for ``hours``, the metrics, and the plots already in ``out``."""
    origin = min((r.submit for r in runs), default=0.0)
    begin = origin + 3600 * (from_hour or 0.0)
    end = begin + 3600 * hours
    svg, hidden = draw_schedule(runs, gpus, begin, end)
    plots = [p for p in PLOTS if (out / p).exists()]
    plots += sorted(p.name for p in out.glob("sweep_*.png"))
    html = TEMPLATES.get_template("report.html").render(
        title=title,
        style=(HERE / "static" / "ui.css").read_text(),
        timeline=svg,
        legend=timeline.legend(("guaranteed", "pool", "best_effort"), reserved=False),
        hidden=hidden,
        from_hour=(begin - origin) / 3600,
        hours=hours,
        jobs=sum(1 for r in runs if r.finish > begin and r.start < end),
        metrics=metrics,
        plots=plots,
        note=note,
    )
    path = out / "report.html"
    path.write_text(html)
    return path


def _shown(metrics: dict) -> list[tuple[str, str]]:
    out = []
    for key, value in metrics.items():
        if isinstance(value, dict) or value is None:
            continue
        if isinstance(value, float):
            value = f"{value:.4f}" if abs(value) < 10 else f"{value:,.1f}"
        out.append((key, str(value)))
    return out


def write_replay(out: Path, *, from_hour: float | None = None, hours: float = HOURS) -> Path:
    """The report of ``chronus replay --out DIR``, from its jobs.csv and metrics.json."""
    metrics = _read_json(out / "metrics.json")
    runs = read_jobs(out / "jobs.csv")
    title = f"{metrics.get('policy', '?')} on {metrics.get('trace', '?')}"
    return write(
        out,
        runs=runs,
        gpus=int(metrics.get("gpus") or 0),
        title=title,
        metrics=_shown(metrics),
        from_hour=from_hour,
        hours=hours,
    )


def write_comparison(out: Path, grid, *, hours: float = HOURS) -> Path:
    """The report of ``chronus compare --out DIR``: the first run of the grid, replayed again in
    this process for its schedule (a run is a pure function of its configuration, so this is the
    schedule the sweep measured), with the comparison's plots."""
    from chronus_py.engine import summarize, write_jobs_csv
    from chronus_py.engine.setup import run_setup

    configs = [c for c in grid.runs() if not c.elastic]
    if not configs:
        return write(
            out,
            runs=[],
            gpus=0,
            title="comparison",
            metrics=[],
            hours=hours,
            note="No timeline: the grid has elastic runs only (their schedule is not a replay's); "
            "results.csv and report.md have every run.",
        )
    config = configs[0]
    result, trace = run_setup(config.setup())
    folder = out / "timeline"
    folder.mkdir(exist_ok=True)
    write_jobs_csv(result.jobs, folder / "jobs.csv")
    metrics = summarize(result, trace=trace.name, dropped=trace.dropped)
    return write(
        out,
        runs=read_jobs(folder / "jobs.csv"),
        gpus=result.cluster.gpus,
        title=f"comparison: timeline of {config.key}",
        metrics=_shown(metrics),
        hours=hours,
        note=f"The timeline and metrics are of the grid's first run, {config.key}; "
        "results.csv and report.md have every run.",
    )


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror}") from None
    except ValueError as exc:
        raise InputError(path, f"not JSON: {exc}") from None


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m chronus_py.ui.report",
        description="Draw a replay's report.html again for another window.",
    )
    parser.add_argument("out", type=Path, help="the --out directory of chronus replay")
    parser.add_argument(
        "--from-hour", type=float, default=0.0, help="hours after the first submission"
    )
    parser.add_argument(
        "--hours", type=float, default=HOURS, help=f"window length (default {HOURS:g})"
    )
    args = parser.parse_args(list(argv) if argv is not None else None)
    if not math.isfinite(args.hours) or args.hours <= 0:
        print("--hours: must be a positive number", file=sys.stderr)
        return 2
    try:
        print(write_replay(args.out, from_hour=args.from_hour, hours=args.hours))
    except InputError as exc:
        print(exc, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
