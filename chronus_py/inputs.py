"""chronus-py's side of the one safe loading path (:mod:`placement.loading`).

``placement`` cannot import ``chronus_py``, so the loader raises its own ``LoadError``; this module
is the one place that turns it into :class:`~chronus_py.errors.InputError` (exit 2, one line naming
file, line and key). Every reader in chronus-py -- state files, scenarios, tenant maps, sweep grids,
host models, layer-jobs files, profiles, samples, traces, request bodies -- reads through here.
"""

from __future__ import annotations

import gzip
import io
import zlib
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


GZIP_MAGIC = b"\x1f\x8b"
TAR_MAGIC_AT = 257  # a tar member header has "ustar" at this offset


def read_text(path: str | Path, *, what: str = "file") -> str:
    """The file as UTF-8 text. A gzip-compressed file (``trace.csv.gz``, as traces are often
    published) is read through, whatever its name: its magic bytes can never start UTF-8 text."""
    with _converted(path):
        data = loading.read_bytes(path, what=what)
        if data.startswith(GZIP_MAGIC):
            data = gunzip(data, path, what=what)
        return loading.decode(data, str(path))


def gunzip(data: bytes, path: str | Path, *, what: str = "file") -> bytes:
    """``data`` decompressed, to at most the loader's size limit: a small file that expands past
    it (a compression bomb) is refused as a huge file is, without inflating the rest. A tar
    archive inside (``.tar.gz``) is refused too: its member headers would read as columns."""
    try:
        with gzip.open(io.BytesIO(data)) as fh:
            out = fh.read(loading.MAX_BYTES + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(path, f"not a readable gzip file: {exc}") from None
    if len(out) > loading.MAX_BYTES:
        raise InputError(
            path, f"{what} is larger than the limit of {loading.MAX_BYTES:,} bytes uncompressed"
        )
    if out[TAR_MAGIC_AT : TAR_MAGIC_AT + 5] == b"ustar":
        raise InputError(path, "a tar archive: extract the CSV from it first")
    return out


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
