"""The sim backend: a cluster whose state outlives the process that drives it."""

from __future__ import annotations

import sqlite3
import time

import pytest

from chronus_py.backends.base import BackendUnavailable, RunState
from chronus_py.backends.sim import SimBackend
from chronus_py.jobs.model import Job, JobKind
from chronus_py.jobs.overhead import restart_overhead

NODES = [("n0", 4), ("n1", 4)]


def job(job_id: str, gpus: int, work: float) -> Job:
    return Job(job_id, "t", gpus, 0.0, JobKind.BEST_EFFORT, duration=work)


def test_a_reopened_world_knows_what_finished_while_nobody_watched(tmp_path):
    sim = SimBackend(tmp_path / "w.sim", NODES, speed=10_000)
    sim.submit(job("a", 4, 1000.0))
    sim.start("a", {"n0": (0, 1, 2, 3)})
    started = sim.commands()[-1][2]
    sim.close()
    end = started + 1000.0 + restart_overhead(4)
    time.sleep(max(end - started, 0) / 10_000 + 0.05)
    again = SimBackend(tmp_path / "w.sim", NODES, speed=10_000)
    (obs,) = again.jobs()
    assert obs.state is RunState.FINISHED
    assert obs.ended_at == pytest.approx(end, abs=1e-6)
    assert again.jobs() == []  # reported once
    assert again.now() > end


def test_progress_and_preemption_follow_the_replay_model(tmp_path):
    sim = SimBackend(tmp_path / "w.sim", NODES, speed=1.0)
    sim.submit(job("a", 1, 500.0))
    sim.start("a", {"n0": (0,)})
    sim.world.advance(sim.world.time + 100.0)  # 100 s in: 30 s overhead, 70 s of work
    (obs,) = [sim.world.observe(j) for j in sim.world.jobs.values()]
    assert obs.work_done == pytest.approx(100.0 - restart_overhead(1), abs=1.0)
    sim.preempt("a")
    (obs,) = sim.jobs()
    assert obs.state is RunState.PENDING and obs.placement == {}


def test_refuses_double_booking_and_unknown_placements(tmp_path):
    sim = SimBackend(tmp_path / "w.sim", NODES, speed=1.0)
    sim.submit(job("a", 2, 100.0))
    sim.submit(job("b", 2, 100.0))
    sim.start("a", {"n0": (0, 1)})
    sim.start("a", {"n0": (0, 1)})  # idempotent where it runs
    with pytest.raises(BackendUnavailable, match="held by job a"):
        sim.start("b", {"n0": (1, 2)})
    with pytest.raises(BackendUnavailable, match="no node"):
        sim.start("b", {"n9": (0, 1)})
    with pytest.raises(BackendUnavailable, match="needs 2 GPUs"):
        sim.start("b", {"n1": (0,)})
    with pytest.raises(BackendUnavailable, match="not running"):
        sim.preempt("b")
    assert [c[0] for c in sim.commands()] == ["submit", "submit", "start"]


def test_the_clock_is_anchored_and_a_new_speed_reanchors_it(tmp_path):
    sim = SimBackend(tmp_path / "w.sim", NODES, speed=1000.0)
    before = sim.now()
    sim.close()
    again = SimBackend(tmp_path / "w.sim", NODES, speed=1.0)
    assert again.now() >= before
    assert again.speed == 1.0
    assert again.wall_seconds_until(again.now() + 10.0) == pytest.approx(10.0, abs=0.1)


def test_a_jobs_spec_is_read_from_the_file_not_kept_in_memory(tmp_path):
    """The world keeps no spec per job (issue 27: memory at 100,000 jobs); what it observes still
    shows the fields the job was submitted with, read from its file, also after a reopen."""
    spec = {"id": "a", "gpus": 2, "tenant": "t", "cgroup": "/slurm/a", "duration_seconds": 50.0}
    sim = SimBackend(tmp_path / "w.sim", NODES, speed=1.0)
    sim.submit(job("a", 2, 50.0), spec)
    sim.submit(job("b", 1, 10.0))
    assert not hasattr(sim.world.jobs["a"], "spec")  # the record holds none
    observed = {o.id: o.spec for o in sim.jobs()}
    assert dict(observed["a"]) == spec and observed["a"]["cgroup"] == "/slurm/a"
    assert dict(observed["b"]) == {"id": "b", "gpus": 1, "tenant": "t"}
    sim.close()
    again = SimBackend(tmp_path / "w.sim", NODES, speed=1.0)
    assert {o.id: dict(o.spec) for o in again.jobs()}["a"] == spec


def stored_commands(path) -> list[tuple[str, str]]:
    """The commands another connection to the world's file reads: what a restart would fold."""
    with sqlite3.connect(path) as conn:
        return list(conn.execute("SELECT kind, job FROM command ORDER BY seq"))


def test_commands_issued_together_are_committed_once_when_the_block_ends(tmp_path):
    sim = SimBackend(tmp_path / "w.sim", NODES, speed=1.0)
    with sim.together():
        sim.submit(job("a", 1, 100.0))
        with sim.together():  # nested: the outermost block commits
            sim.submit(job("b", 1, 100.0))
        sim.cancel("a")
        assert stored_commands(sim.path) == []  # not in the file yet
        assert sim.world.jobs["a"].state is RunState.CANCELLED  # but in effect
    assert stored_commands(sim.path) == [("submit", "a"), ("submit", "b"), ("cancel", "a")]
    sim.submit(job("c", 1, 100.0))  # outside a block: committed at once, as before
    assert stored_commands(sim.path)[-1] == ("submit", "c")


def test_a_failed_commit_rolls_back_and_the_world_forgets_what_it_held(tmp_path):
    sim = SimBackend(tmp_path / "w.sim", NODES, speed=1.0)
    sim.submit(job("a", 1, 100.0))
    sim.jobs()
    # a commit that fails: a deferred foreign key, checked at COMMIT, left broken in the block
    sim.db.execute("PRAGMA foreign_keys=ON")
    sim.db.execute("CREATE TABLE parent (id TEXT PRIMARY KEY)")
    sim.db.execute(
        "CREATE TABLE child (p TEXT REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)"
    )
    with pytest.raises(BackendUnavailable, match="cannot commit"):
        with sim.together():
            sim.submit(job("b", 1, 100.0))
            sim.start("a", {"n0": (0,)})
            sim.db.execute("INSERT INTO child VALUES ('missing')")
    assert not sim.db.in_transaction
    assert stored_commands(sim.path) == [("submit", "a")]
    assert set(sim.world.jobs) == {"a"} and sim.world.owner == {}  # as a restart would fold it
    assert {o.id: o.state for o in sim.jobs()} == {"a": RunState.PENDING}
    sim.start("a", {"n0": (0,)})  # and the next command is kept
    assert stored_commands(sim.path)[-1] == ("start", "a")


def test_the_changes_shown_are_all_but_the_services_own_submits(tmp_path):
    # Under churn the service submits 500 jobs a second; each waits, as it knows, so observing
    # them every round was work for nothing (issue 27, session 18). A cancel is shown: the sim
    # cannot tell the service's own from one made outside chronus.
    sim = SimBackend(tmp_path / "w.sim", NODES, speed=10_000)
    for name in "abc":
        sim.submit(job(name, 4, 1000.0))
    assert sim.jobs_changed() == []
    sim.cancel("c")
    sim.start("a", {"n0": (0, 1, 2, 3)})
    sim.start("b", {"n1": (0, 1, 2, 3)})
    sim.preempt("b")
    assert {(o.id, o.state) for o in sim.jobs_changed()} == {
        ("a", RunState.RUNNING),
        ("b", RunState.PENDING),
        ("c", RunState.CANCELLED),
    }
    time.sleep((1000.0 + restart_overhead(4)) / 10_000 + 0.05)
    assert [(o.id, o.state) for o in sim.jobs_changed()] == [("a", RunState.FINISHED)]
