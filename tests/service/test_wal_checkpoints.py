"""WAL checkpoints off the requests' commits (``chronus_py/service/wal.py``): a commit never
copies the log into the file, which held every request of its batch for an fsync (issue 27);
``chronus serve`` copies it beside them, and loses nothing. Real SQLite files and a real
server."""

from __future__ import annotations

import sqlite3
import time

from serving import A, running

from chronus_py.service.db import Database
from chronus_py.service.wal import WRITER_PAGES

PAGE = 4096


def write(db: Database, first: int, rows: int) -> None:
    """``rows`` rows of a page each, in commits of 50."""
    for start in range(first, first + rows, 50):
        with db.transaction():
            for i in range(start, start + 50):
                db.set_meta(f"k{i}", "x" * PAGE)


def test_commits_leave_the_copy_to_the_checkpoints_and_lose_nothing(tmp_path):
    db = Database(tmp_path / "c.db")
    wal = tmp_path / "c.db-wal"
    checkpoints = db.checkpoints()
    write(db, 0, 2000)
    grown = wal.stat().st_size
    # SQLite's own checkpoint would have come at 1,000 pages and started the log again
    assert grown > 2000 * PAGE
    assert (tmp_path / "c.db").stat().st_size < 100 * PAGE  # nothing copied yet
    checkpoints.run()
    assert (tmp_path / "c.db").stat().st_size > 2000 * PAGE
    write(db, 2000, 1000)
    assert wal.stat().st_size == grown  # the log starts again from its beginning
    checkpoints.close()
    db.close()
    reread = sqlite3.connect(tmp_path / "c.db")
    assert reread.execute("SELECT count(*) FROM meta WHERE key LIKE 'k%'").fetchone() == (3000,)
    reread.close()


def test_the_log_is_started_again_by_the_writers_past_their_own_limit(tmp_path):
    """Copies beside the writers cannot start the log again while writes go on (a minute of
    churn grew it to 155 MB): a writer's commit still does, at ``WRITER_PAGES``."""
    db = Database(tmp_path / "c.db")
    checkpoints = db.checkpoints()
    write(db, 0, WRITER_PAGES + 2000)
    assert (tmp_path / "c.db-wal").stat().st_size < (WRITER_PAGES + 200) * PAGE
    checkpoints.close()
    db.close()


def test_chronus_serve_copies_the_log_into_its_files_beside_the_requests(tmp_path):
    """The database and the sim's world grow by checkpoints only: both grow within seconds of
    a few submissions, though the log is far from SQLite's own 1,000 pages."""
    files = (tmp_path / "chronus.db", tmp_path / "chronus.db.sim")
    with running(tmp_path, "--nodes", "2") as server:
        before = [f.stat().st_size for f in files]
        for i in range(20):
            job = {"id": f"j{i}", "gpus": 1, "estimate_seconds": 600.0}
            assert server.http.post("/v1/jobs", headers=A, json=job).status_code == 201
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if all(f.stat().st_size > b for f, b in zip(files, before)):
                break
            time.sleep(0.2)
        assert [f.stat().st_size > b for f, b in zip(files, before)] == [True, True]
        assert "checkpoint_failed" not in server.log.read_text()
