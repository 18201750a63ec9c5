"""The service database: schema versions, and what a transaction keeps."""

from __future__ import annotations

import sqlite3

import pytest

from chronus_py.errors import InputError
from chronus_py.service.db import SCHEMA_VERSION, Database


def test_a_new_file_gets_the_current_schema_in_wal_mode(tmp_path):
    db = Database(tmp_path / "c.db")
    assert db.meta("schema_version") == SCHEMA_VERSION
    assert db.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.close()


def test_a_newer_schema_is_refused_by_name(tmp_path):
    Database(tmp_path / "c.db").close()
    conn = sqlite3.connect(tmp_path / "c.db")
    conn.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(InputError, match="schema version 99 is newer"):
        Database(tmp_path / "c.db")


def test_a_failed_transaction_leaves_nothing(tmp_path):
    db = Database(tmp_path / "c.db")
    with pytest.raises(RuntimeError):
        with db.transaction():
            db.add_job(
                job_id="a",
                seq=0,
                tenant="t",
                spec={"gpus": 1},
                submit=0.0,
                estimate=1.0,
                first_deadline=None,
                admission={"decision": "not_guaranteed"},
                guaranteed=None,
            )
            raise RuntimeError("crash between the job and its promise")
    assert db.job("a") is None


def test_not_a_database_is_one_line(tmp_path):
    (tmp_path / "c.db").write_text("hello, this is not SQLite" * 100)
    with pytest.raises(InputError, match="cannot open the service database"):
        Database(tmp_path / "c.db")
