"""Errors raised by ``placement`` for bad input.

``placement`` cannot import ``chronus_py``, so it has its own small tree; the CLI turns these into
``chronus_py.errors.InputError``. Every message is one line and names the key it is about, so a
user can fix a config or scenario without reading a traceback.
"""

from __future__ import annotations


class PlacementError(Exception):
    """Bad input to the placement package; ``key`` is the config or scenario key at fault."""

    def __init__(self, key: str, why: str, *, source: str | None = None, line: int | None = None):
        self.key = key
        self.why = why
        self.source = source
        self.line = line
        super().__init__(f"{key}: {why}" if key else why)


class ConfigError(PlacementError):
    """A HiveD cluster config that cannot be loaded."""


class ScenarioError(PlacementError):
    """A malformed cell scenario (docs/cell-scenarios.md)."""
