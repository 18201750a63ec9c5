"""Shaping the results table for the report and plots: the base point, sweeps, reference rows.

The *base point* is the grid point every per-trace picture is drawn at: for each parameter, its
default (20 min lease, 120 nodes, load 1, no estimation error) if the grid has it, else the
smallest value swept. Runs that differ only by seed are averaged.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

PARAMS = ("lease_min", "nodes", "gpus_per_node", "load", "sigma", "resize_scale")
DEFAULTS = {
    "lease_min": 20.0,
    "nodes": 120,
    "gpus_per_node": 8,
    "load": 1.0,
    "sigma": 0.0,
    "resize_scale": 1.0,
}
ARTIFACT_SETTING = {"nodes": 120, "gpus_per_node": 8, "load": 1.0, "sigma": 0.0}
REFERENCE_FILE = Path(__file__).with_name("reference_artifact.csv")
REFERENCE_SOURCE = (
    "Chronus (SoCC'21) released artifact and hand-written FIFO/SRTF/EDF baselines, full "
    "Philly traces, 120 x 8 GPUs, 20 min lease, CBC instead of Gurobi "
    "(project notes on the Chronus artifact, 'Results')"
)


def label(policy: str, options: str) -> str:
    """The policy as shown in tables and legends: its name, plus options when any."""
    return policy if options in ("{}", "", None) else f"{policy} {options}"


def with_labels(df: pd.DataFrame) -> pd.DataFrame:
    out = df.copy()
    out["label"] = [label(p, o) for p, o in zip(out["policy"], out["options"].fillna("{}"))]
    return out


def ok_rows(df: pd.DataFrame) -> pd.DataFrame:
    return with_labels(df[df["error"].isna()])


def base_values(df: pd.DataFrame) -> dict[str, float]:
    base = {}
    for param in PARAMS:
        values = sorted(v for v in df[param].dropna().unique())
        if values:
            base[param] = DEFAULTS[param] if DEFAULTS[param] in values else values[0]
    return base


def varied(df: pd.DataFrame) -> list[str]:
    return [p for p in PARAMS if df[p].dropna().nunique() > 1]


def at(df: pd.DataFrame, fixed: dict[str, float]) -> pd.DataFrame:
    """Rows whose parameters equal ``fixed`` (a lease-less run matches any lease)."""
    mask = pd.Series(True, index=df.index)
    for param, value in fixed.items():
        column = df[param]
        mask &= (column == value) | (column.isna() if param == "lease_min" else False)
    return df[mask]


def seed_mean(df: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Average numeric metrics over seeds (and only seeds) within each group of ``by``."""
    numeric = [c for c in df.columns if c not in by and pd.api.types.is_numeric_dtype(df[c])]
    return df.groupby(by, dropna=False, sort=False)[numeric].mean().reset_index()


def base_table(df: pd.DataFrame) -> pd.DataFrame:
    rows = at(ok_rows(df), base_values(df))
    return seed_mean(rows, ["trace", "label", "policy"])


def sweep_table(df: pd.DataFrame, param: str) -> pd.DataFrame:
    """One row per (trace, policy label, value of ``param``), others at the base point; a
    lease-less policy is repeated for every lease value so it can be read across."""
    rows = ok_rows(df)
    fixed = {k: v for k, v in base_values(df).items() if k != param}
    rows = at(rows, fixed)
    if param == "lease_min":
        leases = sorted(rows["lease_min"].dropna().unique())
        leaseless = rows[rows["lease_min"].isna()]
        rows = pd.concat(
            [rows[rows["lease_min"].notna()], *[leaseless.assign(lease_min=v) for v in leases]],
            ignore_index=True,
        )
    return seed_mean(rows, ["trace", "label", "policy", param]).sort_values(
        ["trace", param, "label"]
    )


def reference() -> pd.DataFrame:
    """The artifact's published rows, in seconds like ours, labelled as reference."""
    ref = pd.read_csv(REFERENCE_FILE, keep_default_na=False, na_values=[""])
    for column in [c for c in ref.columns if c.endswith("_min")]:
        ref[column.removesuffix("_min")] = ref.pop(column) * 60.0
    ref["label"] = [
        f"{p} (artifact ref.)" if pd.isna(v) else f"{p} {v} (artifact ref.)"
        for p, v in zip(ref["policy"], ref["variant"])
    ]
    return ref


def reference_applies(df: pd.DataFrame) -> bool:
    """The artifact's rows are comparable only at its own setting."""
    base = base_values(df)
    return (
        all(base.get(k) == v for k, v in ARTIFACT_SETTING.items())
        and base.get("lease_min", 20.0) == 20.0
    )
