"""chronus-py's side of the one safe loading path (:mod:`placement.loading`).

``placement`` cannot import ``chronus_py``, so the loader raises its own ``LoadError``; this module
is the one place that turns it into :class:`~chronus_py.errors.InputError` (exit 2, one line naming
file, line and key). Every reader in chronus-py -- state files, scenarios, tenant maps, sweep grids,
host models, layer-jobs files, profiles, samples, traces, request bodies -- reads through here.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from chronus_py.errors import InputError
from placement import loading
from placement.errors import PlacementError
from placement.loading import show

__all__ = [
    "as_input_error",
    "load_json",
    "load_npy",
    "load_structured",
    "load_yaml",
    "parse_json",
    "parse_yaml",
    "read_text",
    "show",
]


def as_input_error(exc: PlacementError, source: str | Path | None = None) -> InputError:
    """The same failure as an ``InputError``: file, line and key carried over."""
    return InputError(
        exc.source or str(source or "<input>"), exc.why, line=exc.line, field=exc.key or None
    )


@contextmanager
def _converted(source: str | Path | None = None) -> Iterator[None]:
    try:
        yield
    except PlacementError as exc:
        raise as_input_error(exc, source) from None


def read_text(path: str | Path, *, what: str = "file") -> str:
    with _converted(path):
        return loading.read_text(path, what=what)


def load_yaml(path: str | Path, *, what: str = "file") -> Any:
    with _converted(path):
        return loading.load_yaml(path, what=what)


def load_json(path: str | Path, *, what: str = "file") -> Any:
    with _converted(path):
        return loading.load_json(path, what=what)


def load_structured(path: str | Path, *, what: str = "file") -> Any:
    with _converted(path):
        return loading.load_structured(path, what=what)


def load_npy(path: str | Path, *, what: str = "samples file"):
    with _converted(path):
        return loading.load_npy(path, what=what)


def parse_yaml(text: str, source: str = "<text>") -> Any:
    with _converted(source):
        return loading.parse_yaml(text, source)


def parse_json(text: str, source: str = "<text>") -> Any:
    with _converted(source):
        return loading.parse_json(text, source)
