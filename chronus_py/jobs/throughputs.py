"""Throughput tables: iterations per second of a model at a fixed global batch on 1..64 GPUs.

A directory holds one ``<model>.csv`` per model with the header ``global_batch_size,1,2,4,...``
and one row per global batch size (the format of ElasticFlow's ``throughputs_A100``). An empty
cell means "not measured": that size is not offered to the job. Anything else malformed is an
``InputError`` naming the file, line and column.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

from chronus_py.errors import InputError

BATCH_COLUMN = "global_batch_size"


@dataclass(frozen=True)
class ThroughputTable:
    """``rates[(model, batch)]`` maps a GPU count to iterations per second."""

    source: str
    rates: dict[tuple[str, int], dict[int, float]]

    def curve(self, model: str, batch: int) -> dict[int, float] | None:
        return self.rates.get((model, batch))


def read_throughputs(directory: str | Path | None = None) -> ThroughputTable:
    """Every ``*.csv`` of ``directory`` as one table; the file's stem is the model name. None:
    the bundled tables (ElasticFlow's A100 ones, ``traces/elasticflow/throughputs_A100``)."""
    if directory is None:
        from chronus_py.readers import traces_dir

        directory = traces_dir() / "elasticflow" / "throughputs_A100"
    path = Path(directory)
    if not path.is_dir():
        raise InputError(path, "no such throughput directory")
    files = sorted(path.glob("*.csv"))
    if not files:
        raise InputError(path, "no <model>.csv throughput table in this directory")
    rates: dict[tuple[str, int], dict[int, float]] = {}
    for file in files:
        for batch, curve in _read_model(file).items():
            rates[(file.stem, batch)] = curve
    return ThroughputTable(source=str(path), rates=rates)


def _read_model(file: Path) -> dict[int, dict[int, float]]:
    try:
        with open(file, newline="", encoding="utf-8-sig") as fh:
            rows = list(csv.reader(fh))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(file, f"cannot read: {exc}") from None
    if not rows or not rows[0]:
        raise InputError(file, "empty file: no header row", line=1)
    header = [h.strip() for h in rows[0]]
    if header[0] != BATCH_COLUMN:
        raise InputError(
            file, f"first column must be {BATCH_COLUMN}", line=1, field=f"column {header[0]}"
        )
    sizes = []
    for name in header[1:]:
        if not name.isdigit() or int(name) <= 0:
            raise InputError(
                file,
                "GPU-count columns must be positive whole numbers",
                line=1,
                field=f"column {name!r}",
            )
        sizes.append(int(name))
    out: dict[int, dict[int, float]] = {}
    for line, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise InputError(file, f"{len(row)} fields, the header has {len(header)}", line=line)
        batch_text = row[0].strip()
        if not batch_text.isdigit() or int(batch_text) <= 0:
            raise InputError(
                file,
                f"not a positive whole number: {batch_text!r}",
                line=line,
                field=f"column {BATCH_COLUMN}",
            )
        batch = int(batch_text)
        if batch in out:
            raise InputError(
                file, f"batch size {batch} listed twice", line=line, field=f"column {BATCH_COLUMN}"
            )
        curve: dict[int, float] = {}
        for size, cell in zip(sizes, row[1:]):
            cell = cell.strip()
            if not cell:
                continue
            try:
                value = float(cell)
            except ValueError:
                raise InputError(
                    file, f"not a number: {cell!r}", line=line, field=f"column {size}"
                ) from None
            if not math.isfinite(value) or value <= 0:
                raise InputError(
                    file,
                    f"throughput must be positive and finite, got {cell}",
                    line=line,
                    field=f"column {size}",
                )
            curve[size] = value
        if not curve:
            raise InputError(file, "no measured size in this row", line=line)
        out[batch] = curve
    if not out:
        raise InputError(file, "no batch-size rows after the header", line=2)
    return out
