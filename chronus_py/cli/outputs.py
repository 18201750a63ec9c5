"""Where a command writes its results: the ``--out`` directory, made before any work, so that a
path that cannot be one is one line at once rather than a traceback after a long run."""

from __future__ import annotations

from pathlib import Path

from chronus_py.errors import InputError


def make_out_dir(out: Path) -> None:
    """Create ``out`` (and its parents); a file there, a file's child or no permission is one
    line naming it."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise InputError(out, "exists and is not a directory") from None
    except OSError as exc:
        why = exc.strerror or exc
        raise InputError(out, f"cannot create the output directory: {why}") from None
