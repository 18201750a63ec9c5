"""The service's database: jobs as accepted, promises and when they were made, estimates and
their errors, the latest lease plan, and an audit log of every decision.

stdlib ``sqlite3`` in WAL mode; ``synchronous=NORMAL`` makes every commit survive the daemon's
crash (SIGKILL: the WAL is in the OS's page cache) and ``--db-sync full`` also a power cut, at an
fsync per commit. The schema has a version and an ordered list of migrations: a newer daemon
upgrades an older file in place, an older daemon refuses a newer file.

The database is the service's memory, not the truth about the cluster: on start the service
believes the backend about what runs where, and takes from here only what the backend cannot
know (promises, estimates, history).
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any, Iterable, Mapping, TextIO

from chronus_py.errors import InputError
from chronus_py.service.json_codec import decode_row, encode_text
from chronus_py.service.wal import Checkpoints

MIGRATIONS = (
    """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE job (
        id TEXT PRIMARY KEY, seq INTEGER NOT NULL, tenant TEXT NOT NULL, spec TEXT NOT NULL,
        submit REAL NOT NULL, estimate REAL NOT NULL, state TEXT NOT NULL, first_deadline REAL,
        admission TEXT NOT NULL, guaranteed_at REAL, guaranteed_value REAL,
        first_start REAL, finished_at REAL, starts INTEGER NOT NULL DEFAULT 0,
        placement TEXT);
    CREATE INDEX job_tenant_state ON job (tenant, state);
    CREATE INDEX job_state ON job (state);
    CREATE TABLE promise (seq INTEGER PRIMARY KEY, job TEXT NOT NULL, event TEXT NOT NULL,
        deadline REAL, value REAL, at REAL NOT NULL);
    CREATE INDEX promise_job ON promise (job);
    CREATE TABLE decision (seq INTEGER PRIMARY KEY, at REAL NOT NULL, job TEXT NOT NULL,
        action TEXT NOT NULL, placement TEXT, reason TEXT NOT NULL);
    CREATE TABLE estimate (seq INTEGER PRIMARY KEY, job TEXT NOT NULL, at REAL NOT NULL,
        old REAL NOT NULL, new REAL NOT NULL);
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)
TERMINAL = ("finished", "cancelled", "failed")


STORAGE_ERRORS = {
    sqlite3.SQLITE_FULL: (507, "the service's disk is full"),
    sqlite3.SQLITE_IOERR: (503, "the service's database cannot be written"),
    sqlite3.SQLITE_READONLY: (503, "the service's database is read-only"),
}


NOT_KEPT = "nothing of this request was kept; retry once that is fixed"
"""What a refusal for a ``storage_error`` adds: the client may send the request again."""


def storage_error(exc: BaseException) -> tuple[int, str] | None:
    """The HTTP status and words for what stops the database from keeping anything (a full
    disk: 507, RFC 4918; an I/O error or a file made read-only under the daemon: 503), or None
    for any other error: a condition of the machine, to be answered and logged in a line
    (``api._failure``), not a bug with its traceback."""
    if not isinstance(exc, sqlite3.Error):
        return None
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else STORAGE_ERRORS.get(code & 0xFF)


def hold(path: Path) -> TextIO | None:
    """Hold ``path`` (the service's database) for this process, by a lock on ``PATH.lock``
    that the kernel drops when the process ends however it ends (``kill -9`` included); the
    open lock file is returned, to be kept. A second ``chronus serve`` on the same database
    is refused in one line naming the first's pid.

    Why: two daemons on one database (a second started on another port) both admitted,
    promised and started jobs, each unaware of the other's. A POSIX lock (``lockf``), not
    ``flock``: it is not inherited by forked children (the lease re-plan's), so none of them
    keeps it past the process's end."""
    try:
        import fcntl
    except ImportError:  # Windows has no fcntl: no lock
        return None
    name = Path(f"{path}.lock")
    try:
        handle = open(name, "a+")
    except OSError as exc:
        raise InputError(name, f"cannot open the database's lock file: {exc.strerror}") from None
    try:
        fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        holder = handle.read().strip()[:20] or "unknown"
        handle.close()
        raise InputError(
            path, f"in use by another chronus serve (pid {holder}); stop it or give another --db"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


class Database:
    def __init__(self, path: Path | str, *, sync: str = "normal"):
        self.path = Path(path)
        try:
            self.conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute(f"PRAGMA synchronous={'FULL' if sync == 'full' else 'NORMAL'}")
            self._migrate()
            query = "SELECT * FROM job LIMIT 0"
            self._job_columns = tuple(c[0] for c in self.conn.execute(query).description)
        except sqlite3.DatabaseError as exc:
            raise InputError(self.path, f"cannot open the service database: {exc}") from None

    def _migrate(self) -> None:
        have = self.conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name='meta'"
        ).fetchone()
        version = 0
        if have:
            row = self.conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            text = "0" if row is None else str(row[0])
            if not (text.isascii() and text.isdigit()):
                raise InputError(
                    self.path, f"schema version {text[:40]!r} is not a number: not this service's"
                )
            version = int(text)
        if version > SCHEMA_VERSION:
            raise InputError(
                self.path,
                f"schema version {version} is newer than this chronus "
                f"({SCHEMA_VERSION}); upgrade chronus-py",
            )
        for number in range(version, SCHEMA_VERSION):
            with self.transaction():
                for statement in MIGRATIONS[number].split(";"):
                    if statement.strip():
                        self.conn.execute(statement)
                self.conn.execute(
                    "INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(number + 1),)
                )

    def transaction(self):
        return _Transaction(self.conn)

    def checkpoints(self) -> Checkpoints:
        """This file's WAL checkpoints, taken by the caller from now on instead of by the
        commits (``chronus serve``: ``wal.py`` says why)."""
        return Checkpoints(self.conn, self.path)

    def close(self) -> None:
        self.conn.close()

    # -- writes (callers group them in a transaction) ---------------------------------------------
    def add_job(
        self,
        *,
        job_id: str,
        seq: int,
        tenant: str,
        spec: Mapping[str, Any],
        submit: float,
        estimate: float,
        first_deadline: float | None,
        admission: Mapping[str, Any],
        guaranteed: tuple[float, float] | None,
    ) -> None:
        self.conn.execute(
            "INSERT INTO job (id, seq, tenant, spec, submit, estimate, first_deadline, state,"
            " admission, guaranteed_at, guaranteed_value)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?)",
            (
                job_id,
                seq,
                tenant,
                encode_text(spec),
                submit,
                estimate,
                first_deadline,
                encode_text(admission),
                *(guaranteed or (None, None)),
            ),
        )

    def promise(
        self,
        job_id: str,
        event: str,
        deadline: tuple[float, float] | None,
        at: float,
        *,
        update_job: bool = True,
    ) -> None:
        """Record a promise made (``promised``) or withdrawn (``demoted``), and the job's current
        guarantee (unless ``update_job`` is False: ``add_job`` just wrote it)."""
        at_value = deadline or (None, None)
        self.conn.execute(
            "INSERT INTO promise (job, event, deadline, value, at) VALUES (?, ?, ?, ?, ?)",
            (job_id, event, *at_value, at),
        )
        if update_job:
            self.conn.execute(
                "UPDATE job SET guaranteed_at=?, guaranteed_value=? WHERE id=?",
                (*(deadline if event == "promised" else (None, None)), job_id),
            )

    def set_state(
        self,
        job_id: str,
        state: str,
        *,
        placement: Mapping | None = None,
        started: float | None = None,
        finished: float | None = None,
        starts: int | None = None,
    ) -> None:
        self.conn.execute(
            "UPDATE job SET state=?, placement=?, first_start=COALESCE(first_start, ?),"
            " finished_at=COALESCE(?, finished_at), starts=COALESCE(?, starts) WHERE id=?",
            (
                state,
                None if not placement else json.dumps({n: list(g) for n, g in placement.items()}),
                started,
                finished,
                starts,
                job_id,
            ),
        )

    def decision(
        self, at: float, job_id: str, action: str, placement: Mapping | None, reason: str
    ) -> None:
        self.conn.execute(
            "INSERT INTO decision (at, job, action, placement, reason) VALUES (?, ?, ?, ?, ?)",
            (
                at,
                job_id,
                action,
                None if not placement else json.dumps({n: list(g) for n, g in placement.items()}),
                reason,
            ),
        )

    def reestimated(self, job_id: str, at: float, old: float, new: float) -> None:
        self.conn.execute(
            "INSERT INTO estimate (job, at, old, new) VALUES (?, ?, ?, ?)", (job_id, at, old, new)
        )
        self.conn.execute("UPDATE job SET estimate=? WHERE id=?", (new, job_id))

    def respec(self, job_id: str, spec: Mapping[str, Any], estimate: float) -> None:
        """A waiting job's spec and planned work as its backend now runs it (issue 24: Kueue
        reserved a preempted Workload again at another pod count)."""
        self.conn.execute(
            "UPDATE job SET spec=?, estimate=? WHERE id=?", (json.dumps(spec), estimate, job_id)
        )

    def set_meta(self, key: str, value: Any) -> None:
        self.conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))

    # -- reads -------------------------------------------------------------------------------------
    def meta(self, key: str, default: Any = None) -> Any:
        row = self.conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return default if row is None else json.loads(row[0])

    def job(self, job_id: str) -> dict[str, Any] | None:
        row = self.conn.execute("SELECT * FROM job WHERE id=?", (job_id,)).fetchone()
        return None if row is None else self._job_row(row)

    def _job_row(self, row: tuple) -> dict[str, Any]:
        """A ``job`` row as a dict, by the table's column names read once: the cursor's
        ``description``, walked for every row, and the loop over three keys were ~3% of the
        server's GIL time under churn (py-spy, issue 27 session 18), where a job's row is read
        for every cancellation and status read."""
        out = dict(zip(self._job_columns, row))
        out["spec"] = decode_row(out["spec"])  # both NOT NULL
        out["admission"] = decode_row(out["admission"])
        if out["placement"] is not None:
            out["placement"] = decode_row(out["placement"])
        return out

    def jobs(
        self,
        *,
        tenant: str | None = None,
        state: str | None = None,
        active_only: bool = False,
        limit: int | None = None,
        after: str | None = None,
    ) -> list[dict[str, Any]]:
        where, args = [], []
        if tenant is not None:
            where.append("tenant=?")
            args.append(tenant)
        if state is not None:
            where.append("state=?")
            args.append(state)
        if active_only:
            where.append("state IN ('pending', 'running')")
        if after is not None:
            where.append("seq > (SELECT seq FROM job WHERE id=?)")
            args.append(after)
        sql = "SELECT * FROM job" + (" WHERE " + " AND ".join(where) if where else "")
        sql += " ORDER BY seq" + (f" LIMIT {int(limit)}" if limit else "")
        return [self._job_row(r) for r in self.conn.execute(sql, args).fetchall()]

    def promises(self, job_id: str | None = None) -> list[dict[str, Any]]:
        sql = "SELECT job, event, deadline, value, at FROM promise"
        cur = self.conn.execute(
            sql + (" WHERE job=? ORDER BY seq" if job_id else " ORDER BY seq"),
            (job_id,) if job_id else (),
        )
        return [_row(cur, r) for r in cur.fetchall()]

    def decisions(self, job_id: str) -> list[dict[str, Any]]:
        """What the rounds decided for one job, in order (to explain an outcome)."""
        cur = self.conn.execute(
            "SELECT at, action, placement, reason FROM decision WHERE job=? ORDER BY seq",
            (job_id,),
        )
        return [_row(cur, r) for r in cur.fetchall()]

    def tenants(self) -> list[str]:
        """Every tenant that has a job (read from the ``job_tenant_state`` index)."""
        return [t for (t,) in self.conn.execute("SELECT DISTINCT tenant FROM job ORDER BY tenant")]

    def has_job(self, job_id: str) -> bool:
        """Whether a job of this id was ever accepted (ids are never reused): a lookup of the
        primary key, where a set of every id ever accepted grew by ~100 B per job (issue 27)."""
        return self.conn.execute("SELECT 1 FROM job WHERE id=?", (job_id,)).fetchone() is not None

    def was_reestimated(self, job_id: str) -> bool:
        """Whether the job's estimate ever changed (for a job without a runtime: measured)."""
        query = "SELECT 1 FROM estimate WHERE job=? LIMIT 1"
        return self.conn.execute(query, (job_id,)).fetchone() is not None

    def reestimated_ids(self) -> set[str]:
        """Jobs with a recorded estimate change: for a job submitted without a runtime, the
        first one is its measurement, so after a restart it is known, not measured again."""
        return {row[0] for row in self.conn.execute("SELECT DISTINCT job FROM estimate")}

    def next_seq(self) -> int:
        return int(self.conn.execute("SELECT COALESCE(MAX(seq), -1) + 1 FROM job").fetchone()[0])

    def counts(self) -> dict[str, int]:
        return dict(self.conn.execute("SELECT state, COUNT(*) FROM job GROUP BY state").fetchall())

    def slo_outcomes(self) -> tuple[int, int]:
        """(finished SLO jobs, of which met their first deadline)."""
        slo, met = self.conn.execute(
            "SELECT COUNT(*), COALESCE(SUM(finished_at <= first_deadline), 0) FROM job"
            " WHERE state='finished' AND first_deadline IS NOT NULL"
        ).fetchone()
        return int(slo), int(met)


def _row(cursor: sqlite3.Cursor, row: Iterable) -> dict[str, Any]:
    out = dict(zip((c[0] for c in cursor.description), row))
    for key in ("spec", "admission", "placement"):
        if out.get(key) is not None:
            out[key] = decode_row(out[key])
    return out


class _Transaction:
    """``with db.transaction():`` BEGIN IMMEDIATE ... COMMIT, rolled back on an exception. Inside
    a transaction already open (a batch of requests' one commit, ``Service.batch``) it is a
    savepoint of it instead: its writes are undone alone on an exception, and kept only if the
    outer transaction commits."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn
        self.nested = False

    def __enter__(self) -> sqlite3.Connection:
        self.nested = self.conn.in_transaction
        self.conn.execute("SAVEPOINT part" if self.nested else "BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, kind, exc, tb) -> None:
        if not self.nested:
            try:
                self.conn.execute("ROLLBACK" if kind else "COMMIT")
            except sqlite3.Error:  # a failed COMMIT may leave the transaction open
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise
            return
        if kind:
            self.conn.execute("ROLLBACK TO part")
        self.conn.execute("RELEASE part")
