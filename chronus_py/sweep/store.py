"""The results directory as a resumable log: ``results.csv`` (one row per run, appended as runs
finish) and ``series.jsonl`` (each run's plot series, keyed by the same run id).

A run already present without an error is skipped on the next invocation; a failed run is tried
again (its old row is dropped when the store opens). Rows are flushed one by one, so a sweep
stopped half-way keeps everything it finished.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pandas as pd

from chronus_py.errors import InputError
from chronus_py.sweep.grid import CONFIG_COLUMNS
from chronus_py.sweep.run import METRIC_COLUMNS, RunResult

COLUMNS = (*CONFIG_COLUMNS, *METRIC_COLUMNS, "error")


class ResultsStore:
    def __init__(self, out: Path):
        self.out = out
        self.csv_path = out / "results.csv"
        self.series_path = out / "series.jsonl"
        out.mkdir(parents=True, exist_ok=True)
        rows = self._read_rows()
        kept = [r for r in rows if not r["error"]]
        self.done = {r["run"] for r in kept}
        series = self._read_series()
        if len(kept) != len(rows) or not self.csv_path.exists():
            self._rewrite(kept)
        if set(series) - self.done:
            self._rewrite_series({k: v for k, v in series.items() if k in self.done})

    def _read_rows(self) -> list[dict[str, str]]:
        if not self.csv_path.exists():
            return []
        with open(self.csv_path, newline="") as fh:
            reader = csv.DictReader(fh)
            if tuple(reader.fieldnames or ()) != COLUMNS:
                raise InputError(
                    self.csv_path,
                    "was written with other columns (another version?); use a new --out directory",
                    line=1,
                )
            return list(reader)

    def _read_series(self) -> dict[str, Any]:
        if not self.series_path.exists():
            return {}
        out = {}
        for number, line in enumerate(self.series_path.read_text().splitlines(), 1):
            try:
                record = json.loads(line)
                out[record["run"]] = record["series"]
            except (ValueError, KeyError, TypeError):
                raise InputError(
                    self.series_path, "not a JSON record with run and series", line=number
                ) from None
        return out

    def _rewrite(self, rows: list[dict[str, str]]) -> None:
        with open(self.csv_path, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=COLUMNS)
            writer.writeheader()
            writer.writerows(rows)

    def _rewrite_series(self, series: dict[str, Any]) -> None:
        with open(self.series_path, "w") as fh:
            for run, data in series.items():
                fh.write(json.dumps({"run": run, "series": data}) + "\n")

    def add(self, result: RunResult) -> None:
        with open(self.csv_path, "a", newline="") as fh:
            csv.DictWriter(fh, fieldnames=COLUMNS).writerow(
                {k: "" if result.row.get(k) is None else result.row[k] for k in COLUMNS}
            )
        if not result.failed:
            self.done.add(result.config.key)
            with open(self.series_path, "a") as fh:
                fh.write(json.dumps({"run": result.config.key, "series": result.series}) + "\n")

    def table(self) -> pd.DataFrame:
        return pd.read_csv(self.csv_path, keep_default_na=False, na_values=[""])

    def series(self) -> dict[str, Any]:
        return self._read_series()

    def write_parquet(self) -> Path | None:
        """results.parquet beside the CSV when pyarrow is installed (else None)."""
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            return None
        path = self.out / "results.parquet"
        self.table().to_parquet(path, index=False)
        return path
