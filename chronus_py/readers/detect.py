"""Which format a trace's header is in -- said out loud, and near-misses refused.

A Chronus trace whose header had ``Iterations`` capitalised used to fall back silently to the plain
format: minutes read as seconds and every SLO job turned best-effort. Detection therefore refuses a
header that is one small edit away from a format it would prefer (a column differing only in case,
or by up to two characters), naming the column it expected, instead of settling for a poorer one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from chronus_py.errors import InputError
from chronus_py.readers.table import HEADER_LINE


@dataclass(frozen=True)
class Detected:
    name: str
    why: str


def detect_format(path: Path, header: list[str], formats: Mapping[str, Any]) -> Detected:
    """The first format (in ``formats`` order) whose columns the header has; refuses when a format
    earlier in that order is a near-miss."""
    present = set(header)
    for name, fmt in formats.items():
        columns = fmt.COLUMNS
        missing = [c for c in columns if c not in present]
        if not missing:
            return Detected(name, f"the header has all {len(columns)} {name} columns")
        near = _near_miss(missing, present - set(columns))
        if near is not None:
            got, want = near
            raise InputError(
                path,
                f"looks like a {name} trace, which needs column {want!r}: "
                f"rename it, or pass --format / --columns",
                line=HEADER_LINE,
                field=f"column {got}",
            )
    best = max(
        formats,
        key=lambda n: (
            len(present & set(formats[n].COLUMNS)) / len(formats[n].COLUMNS),
            n == "plain",
        ),
    )
    missing = [c for c in formats[best].COLUMNS if c not in present]
    raise InputError(
        path,
        f"missing from header (closest format: {best}, which also needs "
        f"{', '.join(missing)}; or map columns with --columns)",
        line=HEADER_LINE,
        field=f"column {missing[0]}",
    )


def _near_miss(missing: list[str], spare: set[str]) -> tuple[str, str] | None:
    """(header column, expected column) if every missing column (at most two) has a spare header
    column within two edits of it (case ignored)."""
    if len(missing) > 2:
        return None
    found = None
    for want in missing:
        match = next(
            (h for h in sorted(spare) if _distance(h.lower(), want.lower()) <= 2 and len(want) > 3),
            None,
        )
        if match is None:
            return None
        found = found or (match, want)
    return found


def _distance(a: str, b: str, limit: int = 3) -> int:
    """Levenshtein distance, cut off at ``limit`` (names are short; this stays cheap)."""
    if abs(len(a) - len(b)) >= limit:
        return limit
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        if min(current) >= limit:
            return limit
        previous = current
    return min(previous[-1], limit)
