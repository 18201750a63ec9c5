"""A SQLite file's WAL checkpoints, taken off its writer's commits (``chronus serve``: the
service's database and the sim backend's world).

Why: in WAL mode the connection whose commit fills the log past ``wal_autocheckpoint`` pages
copies the log into the database file and fsyncs it, inside that commit. The service commits a
batch of requests under the request lock, so each such commit held every request for the fsync:
under issue 27's churn, commits of 17-28 ms came every ~0.5 s on the service's file and every
~1-1.5 s on the sim's, and one took 141 ms (session 32), where a commit otherwise takes ~0.1 ms.
With automatic checkpoints off, a PASSIVE checkpoint on a connection of its own copies the log
while writers go on appending to it (SQLite's WAL lets one checkpointer run beside them), and
the next writer after a complete one starts the log again from its beginning, so the log stays
as large as the writes of one interval. A commit's durability is unchanged: it is in the log
when the commit returns, whoever later copies it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

INTERVAL = 1.0
"""Seconds between two checkpoints (``chronus serve``): at the churn's ~1,100 requests a second
the log grows a few MB in that time."""


class Checkpoints:
    """Checkpoints of the file ``path`` that ``writer`` writes, taken by :meth:`run` (from any
    thread, one call at a time) instead of by ``writer``'s commits."""

    def __init__(self, writer: sqlite3.Connection, path: Path):
        self._own = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        writer.execute("PRAGMA wal_autocheckpoint=0")

    def run(self) -> None:
        """Copy what the log holds into the file, without waiting for readers or writers; what
        a reader still needs stays in the log for the next one."""
        self._own.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def close(self) -> None:
        self._own.close()
