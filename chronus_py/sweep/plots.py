"""PNG figures of a sweep (matplotlib, the optional ``plots`` extra), drawn at the base point.

Our runs are solid; the Chronus artifact's published numbers, where drawn, are hatched or hollow
markers and say "artifact ref." in the legend, so they can never be mistaken for our runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from chronus_py.policies import POLICIES
from chronus_py.sweep import table

MINUTE = 60.0
TITLES = {
    "lease_min": "lease (min)",
    "nodes": "nodes (x GPUs per node)",
    "gpus_per_node": "GPUs per node",
    "load": "load (x arrival rate)",
    "sigma": "runtime estimation error sigma",
    "resize_scale": "resize overhead (x the pause model)",
}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 8, "figure.dpi": 90})
    return plt


def palette(df: pd.DataFrame) -> dict[str, str]:
    """One colour per policy label, the same in every figure and every sweep (built-in policies keep
    their registry position); labels with options take the next free colours. A reference row
    takes its policy's colour."""
    fixed = {name: f"C{i}" for i, name in enumerate(POLICIES)}
    extra = [name for name in dict.fromkeys(table.ok_rows(df)["label"]) if name not in fixed]
    return {**fixed, **{name: f"C{(len(fixed) + i) % 10}" for i, name in enumerate(extra)}}


def draw_all(df: pd.DataFrame, series: dict[str, Any], out: Path) -> list[Path]:
    """Every figure for this results table; returns the files written."""
    plt = _pyplot()
    colors = palette(df)
    base = table.base_table(df)
    ref = table.reference() if table.reference_applies(df) else None
    runs = table.at(table.ok_rows(df), table.base_values(df))
    paths = [
        _bars(
            plt,
            colors,
            base,
            ref,
            "slo_deadline_ratio",
            "first-deadline ratio (SLO jobs)",
            out / "deadline_ratio.png",
        ),
        _bars(
            plt,
            colors,
            base,
            ref,
            "preemptions_per_job",
            "preemptions per job",
            out / "preemptions.png",
        ),
        _be_cdf(plt, colors, runs, series, ref, out / "be_jct_cdf.png"),
        _per_trace_lines(
            plt,
            colors,
            runs,
            series,
            "daily_deadline_ratio",
            "first-deadline ratio by submit day",
            "day",
            out / "daily_deadline_ratio.png",
        ),
        _per_trace_lines(
            plt,
            colors,
            runs,
            series,
            "hourly_utilization",
            "GPU utilisation (busy GPU-time / capacity)",
            "hour",
            out / "gpu_utilization.png",
        ),
    ]
    for param in table.varied(table.ok_rows(df)):
        paths.append(
            _sweep(plt, colors, table.sweep_table(df, param), param, out / f"sweep_{param}.png")
        )
    return [p for p in paths if p is not None]


def _traces(df: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(df["trace"]))


def _bars(
    plt,
    colors: dict[str, str],
    base: pd.DataFrame,
    ref: pd.DataFrame | None,
    metric: str,
    title: str,
    path: Path,
) -> Path:
    traces = _traces(base)
    labels = list(dict.fromkeys(base["label"]))
    refs = (
        []
        if ref is None
        else [
            r
            for r in dict.fromkeys(ref["label"])
            if ref.loc[ref["label"] == r, "trace"].isin(traces).any()
        ]
    )
    bars = [(name, base, False) for name in labels] + [(name, ref, True) for name in refs]
    width = 0.8 / max(len(bars), 1)
    fig, ax = plt.subplots(figsize=(max(4.0, 1.6 * len(traces) + 0.15 * len(bars)), 3.0))
    for i, (name, data, is_ref) in enumerate(bars):
        policy = data.loc[data["label"] == name, "policy"].iloc[0]
        color = colors.get(policy if is_ref else name, "grey")
        values = [
            data.loc[(data["trace"] == t) & (data["label"] == name), metric].mean() for t in traces
        ]
        ax.bar(
            np.arange(len(traces)) + (i - (len(bars) - 1) / 2) * width,
            values,
            width,
            label=name,
            color="white" if is_ref else color,
            edgecolor=color,
            hatch="///" if is_ref else None,
        )
    ax.set_xticks(range(len(traces)), [Path(t).name for t in traces])
    ax.set_title(title)
    ax.legend(fontsize=6, ncol=2, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _panels(plt, traces: list[str], height: float = 2.6):
    fig, axes = plt.subplots(
        1, len(traces), figsize=(3.4 * len(traces) + 0.8, height), squeeze=False
    )
    return fig, dict(zip(traces, axes[0]))


def _finish(fig, ax, path: Path) -> Path:
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path


def _one_per_label(runs: pd.DataFrame):
    """At the base point with several seeds, the lowest seed's series stands for its label."""
    ordered = runs.sort_values("seed", na_position="first")
    return ordered.drop_duplicates(["trace", "label"])


def _be_cdf(
    plt,
    colors: dict[str, str],
    runs: pd.DataFrame,
    series: dict,
    ref: pd.DataFrame | None,
    path: Path,
) -> Path | None:
    runs = _one_per_label(runs)
    traces = [
        t
        for t in _traces(runs)
        if any(
            series.get(r, {}).get("be_jct_percentiles") for r in runs.loc[runs["trace"] == t, "run"]
        )
    ]
    if not traces:
        return None
    fig, axes = _panels(plt, traces)
    for _, row in runs.iterrows():
        pct = series.get(row["run"], {}).get("be_jct_percentiles")
        if row["trace"] in axes and pct:
            axes[row["trace"]].plot(
                np.asarray(pct) / MINUTE,
                np.linspace(0, 1, len(pct)),
                label=row["label"],
                color=colors[row["label"]],
            )
    if ref is not None:
        for _, row in ref[ref["trace"].isin(traces) & ref["be_p50_jct"].notna()].iterrows():
            axes[row["trace"]].plot(
                [row["be_p50_jct"] / MINUTE, row["be_p95_jct"] / MINUTE],
                [0.5, 0.95],
                "o",
                mfc="none",
                color=colors.get(row["policy"], "grey"),
                label=f"{row['label']} p50/p95",
            )
    for trace, ax in axes.items():
        ax.set_xscale("log")
        ax.set_title(f"{Path(trace).name}: best-effort JCT CDF")
        ax.set_xlabel("JCT (min, log)")
    axes[traces[0]].set_ylabel("share of BE jobs")
    return _finish(fig, axes[traces[-1]], path)


def _per_trace_lines(
    plt,
    colors: dict[str, str],
    runs: pd.DataFrame,
    series: dict,
    key: str,
    title: str,
    unit: str,
    path: Path,
) -> Path | None:
    runs = _one_per_label(runs)
    traces = _traces(runs)
    if not traces:
        return None
    fig, axes = _panels(plt, traces)
    drawn = False
    for _, row in runs.iterrows():
        data = series.get(row["run"], {}).get(key)
        if not data:
            continue
        drawn = True
        if key == "daily_deadline_ratio":
            x, y = [d[0] for d in data], [d[1] for d in data]
        else:
            y = (
                np.convolve(data, np.ones(6) / 6, mode="valid")
                if len(data) >= 6
                else np.asarray(data)
            )
            x = np.arange(len(y)) / 24
        axes[row["trace"]].plot(x, y, label=row["label"], lw=1, color=colors[row["label"]])
    if not drawn:  # no run has this series (an elastic run keeps no daily ratios): no figure
        plt.close(fig)
        return None
    for trace, ax in axes.items():
        ax.set_title(f"{Path(trace).name}: {title}", fontsize=7)
        ax.set_xlabel(
            "day of trace" + (" (6 h moving mean)" if unit == "hour" else " (by submit day)")
        )
    return _finish(fig, axes[traces[-1]], path)


def _sweep(plt, colors: dict[str, str], sweep: pd.DataFrame, param: str, path: Path) -> Path:
    traces = _traces(sweep)
    has_be = sweep["be_avg_jct"].notna().any()
    rows = 2 if has_be else 1
    fig, axes = plt.subplots(
        rows, len(traces), figsize=(3.4 * len(traces) + 0.8, 2.5 * rows), squeeze=False
    )
    for col, trace in enumerate(traces):
        part = sweep[sweep["trace"] == trace]
        for name in dict.fromkeys(part["label"]):
            line = part[part["label"] == name].sort_values(param)
            axes[0][col].plot(
                line[param], line["slo_deadline_ratio"], "o-", ms=3, label=name, color=colors[name]
            )
            if has_be:
                axes[1][col].plot(
                    line[param],
                    line["be_avg_jct"] / MINUTE,
                    "o-",
                    ms=3,
                    label=name,
                    color=colors[name],
                )
        axes[0][col].set_title(f"{Path(trace).name}: first-deadline ratio", fontsize=7)
        axes[-1][col].set_xlabel(TITLES[param])
        if has_be and part["be_avg_jct"].isna().all():
            axes[1][col].set_visible(False)
            axes[0][col].set_xlabel(TITLES[param])
        elif has_be:
            axes[1][col].set_title(f"{Path(trace).name}: BE avg JCT (min)", fontsize=7)
            axes[1][col].set_yscale("log")
    return _finish(fig, axes[0][-1], path)
