"""A one-line progress bar on stderr, drawn only when stderr is a terminal."""
from __future__ import annotations

import sys
import time
from typing import Callable


def progress_bar(label: str) -> Callable[[int, int], None] | None:
    if not sys.stderr.isatty():
        return None
    last = [0.0]

    def draw(done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] < 0.1 and done < total:
            return
        last[0] = now
        width = 30
        filled = int(width * done / max(total, 1))
        sys.stderr.write(f"\r{label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return draw
