"""report.md: the base-point table (with the artifact's reference rows), one table per swept
parameter, Chronus' margin over each other policy, failed runs, and the figures."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pandas as pd

from chronus_py.sweep import table

MINUTE = 60.0
BASE_COLUMNS = (
    ("slo_deadline_ratio", "DSR", "{:.4f}", 1),
    ("slo_value_ratio", "value", "{:.4f}", 1),
    ("slo_last_deadline_ratio", "≤last", "{:.4f}", 1),
    ("slo_avg_jct", "SLO avg JCT (min)", "{:,.1f}", MINUTE),
    ("be_avg_jct", "BE avg JCT (min)", "{:,.1f}", MINUTE),
    ("be_p50_jct", "BE p50 (min)", "{:,.1f}", MINUTE),
    ("be_p95_jct", "BE p95 (min)", "{:,.1f}", MINUTE),
    ("makespan", "makespan (min)", "{:,.0f}", MINUTE),
    ("preemptions_per_job", "preempts/job", "{:.3f}", 1),
    ("gpu_utilization", "GPU util.", "{:.3f}", 1),
    ("wall_seconds", "wall s", "{:.1f}", 1),
)
ELASTIC_COLUMNS = (
    ("elastic_ceiling", "elastic ceiling", "{:.4f}", 1),
    ("resizes_per_job", "resizes/job", "{:.2f}", 1),
    ("resize_overhead_share", "resize overhead", "{:.4f}", 1),
)
"""Shown when the table has elastic runs: the trace's ceiling and what resizing cost."""


def _cell(value, fmt: str, scale: float) -> str:
    return "–" if value is None or pd.isna(value) else fmt.format(value / scale)


def _markdown(header: Sequence[str], rows: list[Sequence[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *["| " + " | ".join(r) + " |" for r in rows],
    ]


def base_section(df: pd.DataFrame) -> list[str]:
    base = table.base_table(df)
    ref = table.reference() if table.reference_applies(df) else None
    point = ", ".join(f"{k} {v:g}" for k, v in table.base_values(df).items())
    lines = [f"## All policies at the base point ({point})", ""]
    columns = BASE_COLUMNS + (
        ELASTIC_COLUMNS
        if "elastic_ceiling" in base and base["elastic_ceiling"].notna().any()
        else ()
    )
    rows = []
    for trace in dict.fromkeys(base["trace"]):
        parts = [base[base["trace"] == trace]]
        if ref is not None:
            parts.append(ref[ref["trace"] == trace])
        for part in parts:
            for _, row in part.iterrows():
                rows.append(
                    [trace, row["label"], *(_cell(row.get(c), f, s) for c, _, f, s in columns)]
                )
    lines += _markdown(["trace", "policy", *(h for _, h, _, _ in columns)], rows)
    lines.append("")
    if ref is not None:
        lines += [
            f"Rows marked *artifact ref.* are not our runs: they are the published numbers of the "
            f"{table.REFERENCE_SOURCE}. Their wall time is not comparable and is left out.",
            "",
        ]
    else:
        lines += [
            "The Chronus artifact's reference rows apply only at its own setting (120 x 8 GPUs, "
            "load 1, no estimation error, 20 min lease) and are not shown.",
            "",
        ]
    return lines


def sweep_section(df: pd.DataFrame, param: str) -> list[str]:
    sweep = table.sweep_table(df, param)
    lines = [f"## Sweep over {param}", ""]
    metrics = [("slo_deadline_ratio", "first-deadline ratio", "{:.4f}", 1)]
    if sweep["be_avg_jct"].notna().any():
        metrics.append(("be_avg_jct", "BE avg JCT (min)", "{:,.1f}", MINUTE))
    for metric, title, fmt, scale in metrics:
        for trace in dict.fromkeys(sweep["trace"]):
            part = sweep[sweep["trace"] == trace]
            if part[metric].isna().all():
                continue
            wide = part.pivot_table(index=param, columns="label", values=metric, dropna=False)
            labels = list(dict.fromkeys(part["label"]))
            lines += [f"**{trace}: {title}**", ""]
            lines += _markdown(
                [param, *labels],
                [
                    [f"{v:g}", *(_cell(wide.at[v, lab], fmt, scale) for lab in labels)]
                    for v in wide.index
                ],
            )
            lines.append("")
    margin = margins(sweep, param)
    if margin:
        lines += [
            "**Chronus' first-deadline ratio minus each other policy's** (positive: Chronus meets "
            "more first deadlines)",
            "",
            *margin,
            "",
        ]
    return lines


def margins(sweep: pd.DataFrame, param: str) -> list[str]:
    chronus = [
        lab
        for lab in dict.fromkeys(sweep["label"])
        if sweep.loc[sweep["label"] == lab, "policy"].iloc[0] == "chronus"
    ]
    others = [lab for lab in dict.fromkeys(sweep["label"]) if lab not in chronus]
    if not chronus or not others:
        return []
    header, rows = ["trace", param], []
    pairs = [(c, o) for c in chronus for o in others]
    header += [f"{c} − {o}" for c, o in pairs]
    for trace in dict.fromkeys(sweep["trace"]):
        part = sweep[sweep["trace"] == trace]
        wide = part.pivot_table(
            index=param, columns="label", values="slo_deadline_ratio", dropna=False
        )
        for v in wide.index:
            rows.append(
                [
                    trace,
                    f"{v:g}",
                    *(
                        _cell(wide.at[v, c] - wide.at[v, o], "{:+.4f}", 1)
                        if c in wide and o in wide
                        else "–"
                        for c, o in pairs
                    ),
                ]
            )
    return _markdown(header, rows)


def failures_section(df: pd.DataFrame) -> list[str]:
    bad = df[df["error"].notna()]
    if bad.empty:
        return []
    return [
        "## Failed runs",
        "",
        *_markdown(["run", "error"], [[r["run"], str(r["error"])] for _, r in bad.iterrows()]),
        "",
    ]


def write_report(
    df: pd.DataFrame, out: Path, *, command: str, figures: Sequence[Path], note: str = ""
) -> Path:
    ok = df["error"].isna().sum()
    lines = [
        "# Policy comparison",
        "",
        f"Generated by `{command}`: {ok} run(s) succeeded, {len(df) - ok} failed. "
        "One row per run is in `results.csv`. Times are in minutes here and in seconds in the CSV. "
        "The first-deadline ratio (DSR) is the share of SLO jobs that finish by their tightest "
        "deadline.",
        "",
    ]
    if note:
        lines += [note, ""]
    if ok:
        lines += base_section(df)
        for param in table.varied(df[df["error"].isna()]):
            lines += sweep_section(df, param)
    lines += failures_section(df)
    if figures:
        lines += ["## Figures", "", *[f"![{p.stem}]({p.name})" for p in figures], ""]
    path = out / "report.md"
    path.write_text("\n".join(lines))
    return path
