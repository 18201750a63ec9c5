"""chronus-py's side of the one safe loading path (:mod:`placement.loading`).

``placement`` cannot import ``chronus_py``, so the loader raises its own ``LoadError``; this module
is the one place that turns it into :class:`~chronus_py.errors.InputError` (exit 2, one line naming
file, line and key). Every reader in chronus-py -- state files, scenarios, tenant maps, sweep grids,
host models, layer-jobs files, profiles, samples, traces, request bodies -- reads through here.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import zipfile
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


TAR_MAGIC_AT = 257  # a tar member header has "ustar" at this offset
ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")  # a member, or an empty archive's directory
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
# bzip2: "BZh", the block size digit, then a block's or the stream end's magic, so a text file that
# merely starts with "BZh" is still text.
BZIP2_BLOCKS = (b"1AY&SY", b"\x17rE8P\x90")


def read_text(path: str | Path, *, what: str = "file") -> str:
    """The file as UTF-8 text. A compressed file (``trace.csv.gz``, ``.bz2``, ``.xz``, or a
    ``.zip`` of one file, as traces are published) is read through, whatever its name: each
    format's magic bytes can never start a CSV or YAML file."""
    with _converted(path):
        data = loading.read_bytes(path, what=what)
        if (codec := _codec(data)) is not None:
            data = decompress(data, codec, path, what=what)
        return loading.decode(data, str(path))


def _codec(data: bytes) -> str | None:
    if data.startswith(b"\x1f\x8b"):
        return "gzip"
    if data.startswith(b"BZh") and data[3:4].isdigit() and data[4:10] in BZIP2_BLOCKS:
        return "bzip2"
    if data.startswith(b"\xfd7zXZ\x00"):
        return "xz"
    if data.startswith(ZIP_MAGIC):
        return "zip"
    if data.startswith(ZSTD_MAGIC):
        return "zstd"
    return None


_OPEN = {"gzip": gzip.open, "bzip2": bz2.open, "xz": lzma.open}
# What the decompressors raise on a damaged file; zipfile's RuntimeError and NotImplementedError
# are an encrypted member and a compression method it cannot read.
UNREADABLE = (
    OSError,
    EOFError,
    ValueError,
    zlib.error,
    lzma.LZMAError,
    zipfile.BadZipFile,
    RuntimeError,
    NotImplementedError,
)


def decompress(data: bytes, codec: str, path: str | Path, *, what: str = "file") -> bytes:
    """``data`` decompressed, to at most the loader's size limit: a small file that expands past
    it (a compression bomb) is refused as a huge file is, without inflating the rest. A tar
    archive inside (``.tar.gz``) is refused too: its member headers would read as columns."""
    if codec == "zstd":  # the standard library reads it from Python 3.14 only
        raise InputError(path, "zstd-compressed: decompress it first (zstd -d), or use gzip or xz")
    try:
        if codec == "zip":
            out = _unzip(data, path, what)
        else:
            with _OPEN[codec](io.BytesIO(data)) as fh:
                out = fh.read(loading.MAX_BYTES + 1)
    except UNREADABLE as exc:
        raise InputError(path, f"not a readable {codec} file: {exc}") from None
    if len(out) > loading.MAX_BYTES:
        raise InputError(
            path, f"{what} is larger than the limit of {loading.MAX_BYTES:,} bytes uncompressed"
        )
    if out[TAR_MAGIC_AT : TAR_MAGIC_AT + 5] == b"ustar":
        raise InputError(path, "a tar archive: extract the CSV from it first")
    return out


def _unzip(data: bytes, path: str | Path, what: str) -> bytes:
    """The archive's one file. Folders and the ``__MACOSX/`` resource forks macOS's Finder adds
    are not files of the trace; two or more files are refused by name, since which one is meant
    would be a guess."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        members = [
            info
            for info in archive.infolist()
            if not info.is_dir() and not info.filename.startswith("__MACOSX/")
        ]
        if len(members) != 1:
            names = ", ".join(show(m.filename) for m in members[:5])
            more = f" and {len(members) - 5} more" if len(members) > 5 else ""
            got = f"{len(members)} files ({names}{more})" if members else "no file"
            raise InputError(path, f"a zip archive with {got}: it must hold one {what}")
        with archive.open(members[0]) as fh:
            return fh.read(loading.MAX_BYTES + 1)


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
