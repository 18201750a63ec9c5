"""A SQLite file's WAL checkpoints, taken off its writer's commits (``chronus serve``: the
service's database and the sim backend's world).

Why: in WAL mode the connection whose commit fills the log past ``wal_autocheckpoint`` pages
(1,000 by default) copies the log into the database file and fsyncs both, inside that commit.
The service commits a batch of requests under the request lock, so each such commit held every
request for the fsyncs: under issue 27's churn, such commits (a median of 22 ms) came every
~0.5 s on the service's file and every ~1.2 s on the sim's, and one took 141 ms (session 32),
where a commit otherwise takes well under a millisecond.

So the copy is made beside the writers: a PASSIVE checkpoint on a connection of its own every
``INTERVAL``, while writers go on appending (SQLite lets one checkpointer run beside them).
That alone does not bound the log: it is started again from its beginning only by a writer that
finds every frame copied, and under steady writes some frame always came after the last copy
(the service's log grew to 155 MB in a minute of churn). The writers' own checkpoint stays, at
``WRITER_PAGES``: it then finds nearly everything copied and synced already, and it starts the
log again. A commit's durability is unchanged: it is in the log when the commit returns,
whoever copies it later.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

INTERVAL = 0.5
"""Seconds between two copies beside the writers (``chronus serve``). What a writer's own
checkpoint has left to copy and sync is what came since the last copy: in 40 s of the churn
(session 32) its commits took 16-35 ms every ~2.5-3 s with copies every 0.5 s, and the commits
over 5 ms took 5-17 ms with copies every 0.1 s; but copies every 0.1 s cost more CPU a request
(0.800-0.814 ms against 0.790-0.796) and their p99 was lower than 0.5 s's in one of four
alternated runs."""

WRITER_PAGES = 10_000
"""Pages of log (40 MB) at which a writer's commit checkpoints, copying what the last copy
beside it left, and starts the log again. A writer committing 30 rows every 20 ms for 15 s,
with copies every 0.5 s (session 32): SQLite's 1,000 pages alone gave 21 commits over 5 ms
(436 ms in all); 4,000 pages 8 (103 ms); 10,000 pages 1 (18 ms), the log at most 41 MB."""


class Checkpoints:
    """Checkpoints of the file ``path`` that ``writer`` writes, copied by :meth:`run` (from any
    thread, one call at a time) and by ``writer``'s commits only at ``WRITER_PAGES``."""

    def __init__(self, writer: sqlite3.Connection, path: Path):
        self._own = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        writer.execute(f"PRAGMA wal_autocheckpoint={WRITER_PAGES}")

    def run(self) -> None:
        """Copy what the log holds into the file, without waiting for readers or writers; what
        a reader still needs stays in the log for the next one."""
        self._own.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def close(self) -> None:
        self._own.close()
