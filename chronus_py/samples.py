"""Per-iteration timing samples: the profiler's only input, read and checked at the edge.

A :class:`Sample` is one profiling run of one model on one placement (GPUs used on each node):
an array of steady-state per-iteration seconds. Readers drop the warm-up iterations, reject
empty arrays, NaN, infinite and non-positive times with a one-line :class:`InputError` naming the
file and the iteration index, so :class:`~chronus_py.profiler.Profile` only ever sees clean data.

Inputs understood here:

* ``.npy`` — a 1-D array of seconds, as in the Chronus artifact's ``training_trace/`` files
  named ``<task>_arch_<model>_gpu_<N>.npy``. The model and ``N`` come from the name.
* ``.json`` — a bare list of seconds, or ``{"model": ..., "samples": [{"gpus": N, "nodes": K,
  "placement": [..], "seconds": [..]}, ...]}`` (``nodes`` and ``placement`` optional).
* ``.csv`` — a header with a ``seconds`` column and optional ``model``, ``gpus``, ``nodes``
  columns, one row per iteration; rows with equal (model, gpus, nodes) form one sample.
* ``model_info.json`` tables (``model → G → k → throughput relative to one node``), through
  :func:`from_relative_throughput`; see there.

Node counts: a run on ``N`` GPUs without an explicit node count is assumed *packed* on
``ceil(N / gpus_per_node)`` nodes (default 8 GPUs per node), so for the artifact N ≤ 8 is a
one-node sample and 9..16 a two-node sample. The artifact does not record placements; packing is
what a scheduler does by default and what its 16-GPU runs most plausibly used.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from chronus_py.errors import InputError
from chronus_py.inputs import load_json, load_npy
from placement.limits import MAX_GPUS

ARTIFACT_NAME = re.compile(r"^(?P<task>.+?)_arch_(?P<model>.+)_gpu_(?P<gpus>\d+)$")
GPU_SUFFIX = re.compile(r"^(?P<model>.+?)_gpu_(?P<gpus>\d+)$")


@dataclass(frozen=True, slots=True, eq=False)
class Sample:
    """Steady-state per-iteration seconds of one model on one placement."""

    model: str
    placement: tuple[int, ...]  # GPUs used on each node, largest first
    seconds: np.ndarray  # warm-up already dropped; finite and positive
    source: str  # file (and entry) it came from, for messages

    @property
    def gpus(self) -> int:
        return sum(self.placement)

    @property
    def nodes(self) -> int:
        return len(self.placement)


@dataclass(frozen=True, slots=True)
class Samples:
    """The samples of one model; the unit :meth:`Profile.fit` learns from."""

    items: tuple[Sample, ...]

    def __post_init__(self) -> None:
        models = {s.model for s in self.items}
        if len(models) > 1:
            first = self.items[0]
            other = next(s for s in self.items if s.model != first.model)
            raise InputError(
                other.source,
                f"model {other.model!r} differs from {first.model!r} "
                f"in {first.source}; fit one model at a time",
            )

    def __iter__(self) -> Iterator[Sample]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    @property
    def model(self) -> str:
        return self.items[0].model if self.items else ""

    @property
    def source(self) -> str:
        """All sources, for messages about the set as a whole."""
        return ", ".join(dict.fromkeys(s.source for s in self.items)) or "<no samples>"


def packed(gpus: int, gpus_per_node: int) -> tuple[int, ...]:
    """Fill whole nodes first: 20 GPUs at 8 per node → (8, 8, 4)."""
    _check_counts(gpus, None, gpus_per_node)
    full, rest = divmod(gpus, gpus_per_node)
    return (gpus_per_node,) * full + ((rest,) if rest else ())


def spread(gpus: int, nodes: int, gpus_per_node: int) -> tuple[int, ...]:
    """Spread ``gpus`` as evenly as possible over ``nodes``: 10 over 4 → (3, 3, 2, 2)."""
    _check_counts(gpus, nodes, gpus_per_node)
    base, extra = divmod(gpus, nodes)
    return (base + 1,) * extra + (base,) * (nodes - extra)


def placement_counts(placement: Mapping | Sequence[int], gpus_per_node: int) -> tuple[int, ...]:
    """Normalise a placement to GPUs per node, largest first.

    Accepts a mapping node → GPU indices (or a GPU count), or a sequence of per-node counts.
    Raises ``ValueError`` for an empty placement, an empty node or a node over capacity.
    """
    values = placement.values() if isinstance(placement, Mapping) else placement
    counts = []
    for v in values:
        n = v if isinstance(v, (int, np.integer)) else len(set(v))
        if n < 1 or n > gpus_per_node:
            raise ValueError(f"a node holds {n} GPUs; expected 1..{gpus_per_node}")
        counts.append(int(n))
    if not counts:
        raise ValueError("placement uses no node")
    if sum(counts) > MAX_GPUS:
        raise ValueError(f"placement holds more than {MAX_GPUS:,} GPUs")
    return tuple(sorted(counts, reverse=True))


def _check_counts(gpus: int, nodes: int | None, gpus_per_node: int) -> None:
    if gpus_per_node < 1:
        raise ValueError(f"gpus_per_node must be >= 1, got {gpus_per_node}")
    if gpus < 1:
        raise ValueError(f"gpus must be >= 1, got {gpus}")
    if gpus > MAX_GPUS:  # 1e8 GPUs built a 12.5-million-node tuple and stalled the fit
        raise ValueError(f"gpus must be <= {MAX_GPUS:,}, got {gpus:,}")
    if nodes is not None and not 1 <= nodes <= gpus:
        raise ValueError(f"nodes must be in 1..{gpus} for {gpus} GPUs, got {nodes}")
    if nodes is not None and gpus > nodes * gpus_per_node:
        raise ValueError(f"{gpus} GPUs do not fit on {nodes} nodes of {gpus_per_node}")


# An iteration shorter than a nanosecond or longer than a year is not a measurement; such values
# (subnormals, 1e300) also made the least-squares fit fail to converge or overflow.
MIN_SECONDS = 1e-9
MAX_SECONDS = 365 * 86400.0


def clean_seconds(
    values: object, source: str, *, warmup: int = 0, first_index: int = 0
) -> np.ndarray:
    """Drop ``warmup`` leading iterations and check the rest: a non-empty 1-D array of finite,
    positive seconds. ``first_index`` shifts reported indices (CSV rows, JSON entries)."""
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise InputError(source, "per-iteration seconds are not numbers") from None
    if arr.ndim != 1:
        raise InputError(source, f"expected a 1-D array of seconds, got shape {arr.shape}")
    steady = arr[warmup:]
    if steady.size == 0:
        raise InputError(
            source, f"no iterations left after dropping {warmup} warm-up iteration(s) of {arr.size}"
        )
    bad = np.flatnonzero(~np.isfinite(steady) | (steady < MIN_SECONDS) | (steady > MAX_SECONDS))
    if bad.size:
        i = int(bad[0])
        value = steady[i]
        what = (
            "NaN"
            if np.isnan(value)
            else "infinite"
            if np.isinf(value)
            else "not positive"
            if value <= 0
            else f"outside [{MIN_SECONDS:g}, {MAX_SECONDS:g}] seconds"
        )
        raise InputError(
            source,
            f"iteration time {float(value)!r} is {what}",
            field=f"index {i + warmup + first_index}",
        )
    return steady


def _counts_for(
    gpus: int, nodes: int | None, gpus_per_node: int, source: str, field: str | None = None
) -> tuple[int, ...]:
    try:
        return packed(gpus, gpus_per_node) if nodes is None else spread(gpus, nodes, gpus_per_node)
    except ValueError as exc:
        raise InputError(source, str(exc), field=field) from None


def name_fields(path: Path) -> tuple[str, int | None]:
    """(model, GPUs) from a file name: ``<task>_arch_<model>_gpu_<N>``, ``<model>_gpu_<N>``, or
    just ``<model>`` (GPU count then unknown)."""
    for pattern in (ARTIFACT_NAME, GPU_SUFFIX):
        m = pattern.match(path.stem)
        if m:
            return m["model"], int(m["gpus"])
    return path.stem, None


def read_samples(
    paths: Iterable[str | Path],
    *,
    gpus: Sequence[int] | int | None = None,
    gpus_per_node: int = 8,
    warmup: int = 1,
    model: str | None = None,
) -> Samples:
    """Read the sample files of one model.

    ``gpus`` overrides the GPU count of every file (an int) or of each file in order (a
    sequence); otherwise it comes from the name (``..._gpu_<N>``) or the file's own fields.
    ``model`` selects one model from a ``model_info.json`` table or a multi-model CSV.
    """
    paths = [Path(p) for p in paths]
    if not isinstance(gpus, (int, type(None))) and len(gpus) != len(paths):
        raise InputError("--gpus", f"{len(gpus)} GPU counts for {len(paths)} files")
    per_file = [gpus if isinstance(gpus, (int, type(None))) else gpus[i] for i in range(len(paths))]
    items: list[Sample] = []
    for path, g in zip(paths, per_file):
        items.extend(
            read_file(path, gpus=g, gpus_per_node=gpus_per_node, warmup=warmup, model=model)
        )
    return Samples(tuple(items))


def read_file(
    path: str | Path,
    *,
    gpus: int | None = None,
    gpus_per_node: int = 8,
    warmup: int = 1,
    model: str | None = None,
) -> list[Sample]:
    """The samples in one file, by suffix (``.npy``, ``.json``, ``.csv``)."""
    path = Path(path)
    source = str(path)
    readers = {".npy": _read_npy, ".json": _read_json, ".csv": _read_csv}
    reader = readers.get(path.suffix.lower())
    if reader is None:
        raise InputError(
            source, f"unknown sample format {path.suffix!r}; expected .npy, .json or .csv"
        )
    if not path.is_file():
        raise InputError(source, "no such file")
    return reader(path, gpus, gpus_per_node, warmup, model)


def _gpus_from_name(path: Path, gpus: int | None) -> tuple[str, int]:
    name_model, name_gpus = name_fields(path)
    g = gpus if gpus is not None else name_gpus
    if g is None:
        raise InputError(str(path), "GPU count unknown: name the file ..._gpu_<N> or pass --gpus")
    return name_model, g


def _read_npy(
    path: Path, gpus: int | None, gpus_per_node: int, warmup: int, model: str | None
) -> list[Sample]:
    source = str(path)
    name_model, g = _gpus_from_name(path, gpus)
    arr = load_npy(path)
    seconds = clean_seconds(arr, source, warmup=warmup)
    return [
        Sample(model or name_model, _counts_for(g, None, gpus_per_node, source), seconds, source)
    ]


def _read_json(
    path: Path, gpus: int | None, gpus_per_node: int, warmup: int, model: str | None
) -> list[Sample]:
    source = str(path)
    data = load_json(path, what="samples file")
    if isinstance(data, list):
        name_model, g = _gpus_from_name(path, gpus)
        seconds = clean_seconds(data, source, warmup=warmup)
        return [
            Sample(
                model or name_model, _counts_for(g, None, gpus_per_node, source), seconds, source
            )
        ]
    if isinstance(data, dict) and "samples" in data:
        return _json_samples(data, path, gpus, gpus_per_node, warmup, model)
    if isinstance(data, dict):
        if model is None:
            raise InputError(
                source,
                f"a relative-throughput table holds models {sorted(data)}; choose one with --model",
            )
        return list(
            from_relative_throughput(data, model, gpus_per_node=gpus_per_node, source=source)
        )
    raise InputError(source, 'expected a list of seconds or an object with "samples"')


def _json_samples(
    data: dict, path: Path, gpus: int | None, gpus_per_node: int, warmup: int, model: str | None
) -> list[Sample]:
    source = str(path)
    entries = data["samples"]
    if not isinstance(entries, list) or not entries:
        raise InputError(source, "must be a non-empty list", field="samples")
    name_model = data.get("model", name_fields(path)[0])
    items = []
    for i, entry in enumerate(entries):
        field = f"samples[{i}]"
        if not isinstance(entry, dict) or "seconds" not in entry:
            raise InputError(source, 'must be an object with "seconds"', field=field)
        where = f"{source}: {field}"
        if "placement" in entry:
            try:
                counts = placement_counts(entry["placement"], gpus_per_node)
            except (TypeError, ValueError) as exc:
                raise InputError(source, str(exc), field=f"{field}.placement") from None
        else:
            g = entry.get("gpus", gpus)
            if not isinstance(g, int) or isinstance(g, bool):
                raise InputError(source, 'needs an integer "gpus" (or "placement")', field=field)
            nodes = entry.get("nodes")
            if nodes is not None and (not isinstance(nodes, int) or isinstance(nodes, bool)):
                raise InputError(source, "must be an integer", field=f"{field}.nodes")
            counts = _counts_for(g, nodes, gpus_per_node, source, field)
        seconds = clean_seconds(entry["seconds"], where, warmup=warmup)
        items.append(Sample(model or str(entry.get("model", name_model)), counts, seconds, where))
    return items


def _read_csv(
    path: Path, gpus: int | None, gpus_per_node: int, warmup: int, model: str | None
) -> list[Sample]:
    source = str(path)
    name_model, name_gpus = name_fields(path)
    groups: dict[tuple[str, int, int | None], list[tuple[int, float]]] = {}
    try:
        with path.open(newline="") as fh:
            reader = csv.DictReader(fh)
            if reader.fieldnames is None or "seconds" not in reader.fieldnames:
                raise InputError(source, 'needs a header with a "seconds" column', line=1)
            for row in reader:
                line = reader.line_num
                m = row.get("model") or name_model
                if model is not None and m != model:
                    continue
                g = _csv_int(
                    row.get("gpus"), gpus if gpus is not None else name_gpus, source, line, "gpus"
                )
                if g is None:
                    raise InputError(
                        source,
                        "GPU count unknown: add a gpus column, name the "
                        "file ..._gpu_<N> or pass --gpus",
                        line=line,
                    )
                k = _csv_int(row.get("nodes"), None, source, line, "nodes")
                try:
                    value = float(row["seconds"])
                except (TypeError, ValueError):
                    raise InputError(
                        source, f"not a number: {row['seconds']!r}", line=line, field="seconds"
                    ) from None
                groups.setdefault((m, g, k), []).append((line, value))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(source, f"unreadable CSV ({exc})") from None
    if not groups:
        raise InputError(source, "no iteration rows" + (f" for model {model!r}" if model else ""))
    items = []
    for (m, g, k), rows in groups.items():
        where = f"{source}:{rows[0][0]}"
        counts = _counts_for(g, k, gpus_per_node, where)
        steady = rows[warmup:]
        if not steady:
            raise InputError(
                source,
                f"no iterations left after dropping {warmup} warm-up iteration(s) of {len(rows)}",
                line=rows[0][0],
            )
        for line, value in steady:
            if not math.isfinite(value) or value <= 0:
                raise InputError(
                    source,
                    f"iteration time {value!r} is not a finite positive number",
                    line=line,
                    field="seconds",
                )
        items.append(Sample(m, counts, np.array([v for _, v in steady]), where))
    return items


def _csv_int(
    text: str | None, default: int | None, source: str, line: int, field: str
) -> int | None:
    if text is None or text.strip() == "":
        return default
    try:
        return int(text)
    except ValueError:
        raise InputError(source, f"not an integer: {text!r}", line=line, field=field) from None


def read_relative_throughput(path: str | Path) -> dict:
    """A whole ``model_info.json``-style table, every entry checked (see
    :func:`from_relative_throughput`): bad JSON or a bad entry is one :class:`InputError`."""
    table = load_json(path, what="relative-throughput table")
    if not isinstance(table, dict) or not table:
        raise InputError(str(path), "expected an object: model -> GPUs -> nodes -> throughput")
    for model in table:
        from_relative_throughput(table, model, source=str(path))
    return table


def from_relative_throughput(
    table: Mapping,
    model: str,
    *,
    base_seconds: float | Mapping[int, float] = 1.0,
    gpus_per_node: int = 8,
    source: str = "model_info.json",
) -> Samples:
    """Pseudo-samples from a ``model_info.json`` table: ``model → G → k → r``, the throughput
    of a G-GPU job spread evenly over k nodes relative to the same job on one node.

    Weak scaling keeps the work per iteration fixed, so relative throughput is the inverse of
    relative iteration time: each entry becomes a one-iteration sample of ``base / r`` seconds,
    where ``base`` is the G-GPU single-node iteration time. With the default ``base_seconds=1.0``
    a Profile fitted on these predicts times *in units of the single-node time*, i.e. the
    multi-node slowdown factor; pass measured single-node seconds (one number, or one per G) to
    get seconds.
    """
    rows = table.get(model) if isinstance(table, Mapping) else None
    if not isinstance(rows, Mapping):
        known = sorted(table) if isinstance(table, Mapping) else []
        raise InputError(source, f"no model {model!r} (have {known})")
    items = []
    for g_key, by_nodes in rows.items():
        field = f"{model}.{g_key}"
        try:
            g = int(g_key)
        except ValueError:
            raise InputError(source, "GPU count is not an integer", field=field) from None
        if not isinstance(by_nodes, Mapping):
            raise InputError(source, "must map node counts to relative throughput", field=field)
        base = base_seconds.get(g) if isinstance(base_seconds, Mapping) else base_seconds
        if base is None:
            raise InputError(source, f"no single-node seconds given for {g} GPUs", field=field)
        for k_key, r in by_nodes.items():
            where = f"{field}.{k_key}"
            try:
                k = int(k_key)
            except ValueError:
                raise InputError(source, "node count is not an integer", field=where) from None
            if (
                isinstance(r, bool)
                or not isinstance(r, (int, float))
                or not math.isfinite(r)
                or r <= 0
            ):
                raise InputError(
                    source, f"relative throughput {r!r} is not a positive number", field=where
                )
            counts = _counts_for(g, k, gpus_per_node, source, where)
            items.append(Sample(model, counts, np.array([base / r]), f"{source}: {where}"))
    if not items:
        raise InputError(source, "no entries", field=model)
    return Samples(tuple(items))
