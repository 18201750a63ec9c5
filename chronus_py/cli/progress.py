"""A one-line progress bar on stderr, drawn only when stderr is a terminal."""

from __future__ import annotations

import sys
import time


class ProgressBar:
    """``bar(done, total)`` redraws at most ten times a second; ``bar.finish()`` draws 100% and
    ends the line, so whatever is printed next (e.g. the dropped-rows line) starts on its own."""

    def __init__(self, label: str):
        self.label = label
        self.last = 0.0
        self.total = 0
        self.closed = False

    def __call__(self, done: int, total: int) -> None:
        self.total = total
        now = time.monotonic()
        if self.closed or (now - self.last < 0.1 and done < total):
            return
        self.last = now
        width = 30
        filled = int(width * min(done, total) / max(total, 1))
        sys.stderr.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        if done >= total:
            sys.stderr.write("\n")
            self.closed = True
        sys.stderr.flush()

    def finish(self, total: int | None = None) -> None:
        if not self.closed:
            total = self.total if total is None else total
            self(total, total)


def progress_bar(label: str) -> ProgressBar | None:
    return ProgressBar(label) if sys.stderr.isatty() else None
