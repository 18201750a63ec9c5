"""Row-checked CSV tables: the shared edge where every trace format meets bad input.

A reader loads the file as strings, declares its checks column by column, and gets back the rows
that passed plus a count of what was dropped and why. Without ``skip_bad_rows`` the first bad row
(in file order) raises ``InputError`` as ``FILE:LINE: column X: why``; with it, bad rows are dropped
and counted per reason, never silently.

pandas is imported where a table is read, not when this module is: every `chronus` command and
each `chronus serve` start imports the readers, and most never read a table (measured side by
side, `import chronus_py.cli.serve`: 0.73 s before, 0.67 s after, median of 5, quiet machine).
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from pathlib import Path

import numpy as np

from chronus_py.errors import InputError
from chronus_py.inputs import read_text, show
from placement.limits import MAX_SECONDS, too_large

HEADER_LINE = 1
DELIMITERS = ",\t;|"


def delimiter(text: str) -> str:
    """The field separator: a comma if the header line has one, else the first of tab, ``;`` and
    ``|`` it has (TSV dumps, and spreadsheets where the comma is the decimal mark). The header
    alone decides, so a quoted comma in some later row cannot change how the file splits."""
    end = text.find("\n")
    first = text if end < 0 else text[:end]
    return next((d for d in DELIMITERS if d in first), ",")


def read_header(path: Path, text: str | None = None) -> list[str]:
    """The header's column names, or a one-line error for an empty or unreadable file."""
    text = read_text(path, what="trace") if text is None else text
    try:
        header = next(csv.reader(io.StringIO(text), delimiter=delimiter(text)), None)
    except csv.Error as exc:
        raise InputError(path, f"not a CSV table: {exc}", line=HEADER_LINE) from None
    if not header or not any(h.strip() for h in header):
        raise InputError(path, "empty file: no header row", line=HEADER_LINE)
    return [h.strip() for h in header]


def check_row_widths(path: Path, width: int, text: str) -> None:
    """Every non-blank row must have the header's number of fields: a longer row would otherwise
    shift its values into the wrong columns without a word."""
    reader = csv.reader(io.StringIO(text), delimiter=delimiter(text))
    try:
        next(reader, None)
        for row in reader:
            if row and any(cell.strip() for cell in row) and len(row) != width:
                raise InputError(
                    path, f"{len(row)} fields, the header has {width}", line=reader.line_num
                )
    except csv.Error as exc:
        raise InputError(path, f"not a CSV table: {exc}", line=reader.line_num) from None


class Table:
    """A CSV file's rows as strings, with per-row problems collected as checks run."""

    def __init__(self, path: Path, required: tuple[str, ...], text: str | None = None):
        self.path = path
        text = read_text(path, what="trace") if text is None else text
        header = read_header(path, text)
        for column in required:
            if column not in header:
                raise InputError(
                    path, "missing from header", line=HEADER_LINE, field=f"column {column}"
                )
        if len(set(header)) != len(header):
            twice = next(h for h in header if header.count(h) > 1)
            raise InputError(
                path, "appears twice in the header", line=HEADER_LINE, field=f"column {twice}"
            )
        check_row_widths(path, len(header), text)
        import pandas as pd  # here, not at import: see the module docstring

        self.delimiter = delimiter(text)
        try:
            self.df = pd.read_csv(
                io.StringIO(text),
                sep=self.delimiter,
                dtype=str,
                keep_default_na=False,
                skipinitialspace=True,
                index_col=False,
            )
        except (pd.errors.ParserError, ValueError, csv.Error) as exc:
            raise InputError(path, f"not a CSV table: {str(exc).splitlines()[0]}") from None
        self.df.columns = [c.strip() for c in self.df.columns]
        if self.df.empty:
            raise InputError(path, "no job rows after the header", line=HEADER_LINE + 1)
        self.problems: dict[int, tuple[str, str, str]] = {}
        self.dropped: Counter[str] = Counter()
        self.origin = 0.0  # seconds subtracted from every time (field traces: the first submit)

    def __len__(self) -> int:
        return len(self.df)

    def line(self, row: int) -> int:
        return row + HEADER_LINE + 1

    def has(self, column: str) -> bool:
        return column in self.df.columns

    def text(self, column: str) -> np.ndarray:
        """The column's cells, stripped. A list comprehension, not pandas' ``str.strip``: a
        Philly trace's 11 columns took 0.27 s that way (issue 27, session 16)."""
        cells = np.empty(len(self.df), dtype=object)
        cells[:] = [cell.strip() for cell in self.df[column].tolist()]
        return cells

    def flag(self, mask: np.ndarray, column: str, reason: str, detail=None) -> None:
        """Record ``reason`` for every row in ``mask`` that has no problem yet (first one wins).

        ``detail(row)`` may add row-specific text to the error message; the dropped-row count is
        kept per ``column: reason`` so that it stays a short list.
        """
        for row in np.flatnonzero(mask):
            self.flag_row(int(row), column, reason, None if detail is None else detail(row))

    def flag_row(self, row: int, column: str, reason: str, detail: str | None = None) -> None:
        if row not in self.problems:
            why = reason if detail is None else f"{reason} {detail}"
            self.problems[row] = (column, why, reason)

    def number(
        self,
        column: str,
        *,
        integer: bool = False,
        minimum: float | None = None,
        optional: bool = False,
        scale: float = 1.0,
        maximum: float = MAX_SECONDS,
    ) -> np.ndarray:
        """The column as floats times ``scale`` (a unit); non-numbers, non-integers and values
        outside ``[minimum, maximum]`` are flagged. The bound is checked after scaling: 1e308
        minutes used to overflow to infinity and the job vanished.

        With ``optional``, empty cells are allowed and come back as NaN.
        """
        import pandas as pd

        raw = self.text(column)
        values = pd.to_numeric(pd.Series(raw), errors="coerce").to_numpy(dtype=float)
        empty = raw == ""
        bad = np.isnan(values) & ~(empty & optional)
        self.flag(bad, f"column {column}", "not a number:", lambda row: show(raw[row]))
        self.flag(np.isinf(values), f"column {column}", "must be finite")
        with np.errstate(over="ignore", invalid="ignore"):
            scaled = values * scale
        self.flag(np.abs(scaled) > maximum, f"column {column}", too_large(0, maximum))
        if integer:
            self.flag(
                ~bad & ~np.isnan(values) & (values != np.round(values)),
                f"column {column}",
                "not a whole number",
            )
        if minimum is not None:
            below = ~np.isnan(values) & (values < minimum)
            self.flag(below, f"column {column}", f"must be >= {minimum:g}")
        return scaled

    def unique(self, column: str) -> np.ndarray:
        """The column as stripped strings; empty cells and repeats of earlier values are flagged."""
        ids = self.text(column)
        self.flag(ids == "", f"column {column}", "empty")
        first_seen: dict[str, int] = {}
        for row, value in enumerate(ids):
            if value in first_seen:
                self.flag_row(
                    row,
                    f"column {column}",
                    "duplicate id",
                    f"{show(value)} (first on line {self.line(first_seen[value])})",
                )
            else:
                first_seen[value] = row
        return ids

    def drop(self, mask: np.ndarray, reason: str) -> None:
        """Rows that are valid but cannot run (e.g. 0 GPUs): always dropped and counted."""
        for row in np.flatnonzero(mask):
            self.problems.setdefault(int(row), ("", reason, reason))

    def keep(self, skip_bad_rows: bool) -> np.ndarray:
        """Indices of the rows to turn into jobs; raises on the first bad row unless skipping."""
        bad_rows = sorted(r for r, (column, _, _) in self.problems.items() if column)
        if bad_rows and not skip_bad_rows:
            row = bad_rows[0]
            column, why, _ = self.problems[row]
            raise InputError(self.path, why, line=self.line(row), field=column)
        for column, _, reason in self.problems.values():
            self.dropped[f"{column}: {reason}" if column else reason] += 1
        return np.array([r for r in range(len(self.df)) if r not in self.problems], dtype=int)
