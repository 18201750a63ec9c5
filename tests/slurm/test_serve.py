"""``chronus serve --backend slurm`` end to end, as a child process against real daemons.

What is checked comes from Slurm's own record: each run of a job prints the node and GPUs Slurm
gave it (``SLURMD_NODENAME``, ``CUDA_VISIBLE_DEVICES``) into its output file, and Slurm counts
its requeues (``restart_cnt``); chronus's decisions come from its decision log.
"""

from __future__ import annotations

import json
import re
import time

import pytest
from polling import wait_for

from chronus_py.backends.slurm.backend import chronus_id
from chronus_py.backends.slurm.harness import ServeProcess
from chronus_py.backends.slurm.lab import workload
from chronus_py.backends.slurm.rest import SlurmRest


def decisions(serve: ServeProcess, kinds=("start", "preempt")) -> list[dict]:
    out = []
    for line in serve.log.read_text().splitlines():
        m = re.search(r"(\{.*\})\s*$", line)
        if m:
            event = json.loads(m.group(1))
            if event.get("event") in kinds:
                out.append(event)
    return out


def runs(lab, slurm_id: int) -> list[tuple[str, int]]:
    """(node, GPU count) of every run of a job, as the job itself saw them."""
    text = (lab.root / "jobs" / f"{slurm_id}.out").read_text()
    return [
        (node, len(gpus.split(",")))
        for node, gpus in re.findall(r"^run \d* on (\S+) gpus (\S+) from", text, re.M)
    ]


def submit(lab, gpus: int, seconds: int, extra: str = "") -> int:
    return lab.sbatch(
        "--hold",
        f"--gres=gpu:{gpus}",
        "--comment",
        f"chronus: estimate={seconds} {extra}".strip(),
        script=workload(seconds),
    )


def named(lab, slurm_id: int) -> str:
    """A marked Slurm job's id in chronus."""
    return chronus_id(SlurmRest(f"unix:{lab.socket}").job(slurm_id))


def names(lab) -> list[str]:
    """The names of the jobs Slurm lists (an API job's is its id in chronus)."""
    return [j.name for j in SlurmRest(f"unix:{lab.socket}").jobs()]


def running(lab, serve, ids) -> bool:
    jobs = serve.jobs()
    return all(jobs.get(named(lab, i), {}).get("state") == "running" for i in ids)


def watch(lab, serve, ids, timeout, seen=None, during=None):
    """Wait until chronus reports every job finished; record each job's Slurm states."""
    rest = SlurmRest(f"unix:{lab.socket}", retries=0)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if during is not None:
            during()
        if seen is not None:
            try:
                for j in rest.jobs():
                    seen.setdefault(j.id, []).append((j.state, j.reason, j.restart_cnt))
            except Exception:  # noqa: BLE001 - slurmrestd may be down on purpose
                pass
        try:
            jobs = serve.jobs()
            if all(jobs.get(named(lab, i), {}).get("state") == "finished" for i in ids):
                return jobs
        except Exception:  # noqa: BLE001 - the daemon may be restarting on purpose
            pass
        time.sleep(0.5)
    raise AssertionError(f"not all finished in {timeout}s: {serve.jobs()}")


def check_runs_match_decisions(lab, serve, ids) -> None:
    """Every run Slurm made of a job is one chronus start, on the node and GPU count planned.
    A start Slurm did not take (the job still pending: a node not back yet after slurmctld
    restarted) is no run: the service's next look says so (``resync``, the backend pending)
    and plans it again."""
    starts: dict[str, list[tuple[str, int]]] = {}
    for d in decisions(serve, ("start", "resync")):
        if d["event"] == "start":
            ((node, gpus),) = d["placement"].items()
            starts.setdefault(d["job"], []).append((node, len(gpus)))
        elif d["backend"] == "pending" and starts.get(d["job"]):
            starts[d["job"]].pop()
    for i in ids:
        assert runs(lab, i) == starts[named(lab, i)], f"job {i}"


def test_workload_placement_preemption_deadlines(lab, tmp_path):
    unmarked = lab.sbatch("--hold", "--gres=gpu:1", script=workload(1))
    foreign = lab.sbatch("--hold", "--gres=gpu:1", "--comment", "team note", script=workload(1))
    with ServeProcess(lab, tmp_path / "chronus.db") as serve:
        long = [submit(lab, 4, 12), submit(lab, 4, 12)]
        wait_for(lambda: running(lab, serve, long), 30, "both long jobs running", every=0.2)
        short = [submit(lab, 4, 4), submit(lab, 2, 3), submit(lab, 1, 3)]
        slo = [submit(lab, 2, 5, "deadline=+3h"), submit(lab, 2, 5, "deadline=+3h:1,+4h:0.5")]
        ids = long + short + slo
        seen: dict[int, list] = {}
        jobs = watch(lab, serve, ids, 120, seen)
        check_runs_match_decisions(lab, serve, ids)
        assert not serve.events("resync"), "every run was where chronus placed it"
        preempted = {d["job"] for d in decisions(serve) if d["event"] == "preempt"}
        assert preempted, "the short jobs should have displaced a long one"
        rest = SlurmRest(f"unix:{lab.socket}")
        for job_id in preempted:
            sid = int(job_id.split("-")[1])
            states = seen[sid]
            held_again = [s for s in states if s[0] == "PENDING" and s[2] >= 1]
            assert held_again, f"{job_id} was not seen requeued and held: {states}"
            assert rest.job(sid).restart_cnt >= 1 and jobs[job_id]["starts"] >= 2
        for i in slo:
            job = jobs[named(lab, i)]
            assert job["admission"]["decision"] == "guaranteed"
            assert job["met_first_deadline"] is True
        for sid, comment in ((unmarked, ""), (foreign, "team note")):
            j = rest.job(sid)
            assert j.held and j.comment == comment and j.restart_cnt == 0
            assert not [k for k in jobs if k.startswith(f"slurm-{sid}-")]


def test_kill9_restart_and_slurm_outages(lab, tmp_path):
    db = tmp_path / "chronus.db"
    serve = ServeProcess(lab, db).start()
    try:
        ids = [submit(lab, 4, 12), submit(lab, 4, 12), submit(lab, 2, 8), submit(lab, 2, 4)]
        wait_for(lambda: running(lab, serve, ids[:2]), 30, "the first two running", every=0.2)
        serve.kill9()
        late = submit(lab, 2, 4)  # arrives while the daemon is dead
        serve = ServeProcess(lab, db).start()
        time.sleep(2)
        lab.stop_slurmrestd()  # REST down for a while: the daemon must wait, not guess
        during_outage = submit(lab, 1, 3)
        time.sleep(4)
        assert serve.proc.poll() is None
        lab.start_slurmrestd()
        time.sleep(2)
        lab.stop_slurmctld()  # the controller restarts under running jobs
        time.sleep(3)
        lab.start_slurmctld()
        ids += [late, during_outage]
        jobs = watch(lab, serve, ids, 150)
        assert serve.proc.poll() is None
        check_runs_match_decisions(lab, serve, ids)
        rest = SlurmRest(f"unix:{lab.socket}")
        preempts = [d["job"] for d in decisions(serve) if d["event"] == "preempt"]
        for i in ids:
            assert rest.job(i).restart_cnt == preempts.count(named(lab, i))
            assert jobs[named(lab, i)]["state"] == "finished"
    finally:
        serve.stop()


def test_jobs_of_a_controller_that_lost_its_state_end_and_its_reused_ids_are_new_jobs(
    lab, tmp_path
):
    """slurmctld restarted with its StateSaveLocation wiped forgets every job and numbers new
    ones from 1 again. Named slurm-<jobid>, a new job took the place of the chronus job whose
    id it had (while chronus ran), or was refused as a taken id in every round (after chronus
    restarted: the id was in its database), and the lost job never ended in chronus."""
    db = tmp_path / "chronus.db"
    lab.lose_state()
    serve = ServeProcess(lab, db).start()
    try:
        done = submit(lab, 1, 1)
        watch(lab, serve, [done], 60)
        lost = submit(lab, 1, 60)
        wait_for(lambda: running(lab, serve, [lost]), 30, "the job to lose running", every=0.2)
        was = [named(lab, done), named(lab, lost)]
        lab.lose_state()  # under the running service
        again = [submit(lab, 1, 1), submit(lab, 1, 1)]
        assert again == [done, lost] and [named(lab, i) for i in again] != was
        watch(lab, serve, again, 60)
        wait_for(lambda: serve.jobs()[was[1]]["state"] == "failed", 30, "the lost job failed")
        serve.stop()
        lab.lose_state()  # while chronus is down: every id is one its database has
        third = [submit(lab, 1, 1), submit(lab, 1, 1)]
        assert third == again
        serve = ServeProcess(lab, db).start()
        watch(lab, serve, third, 60)
        assert "already" not in serve.log.read_text()
    finally:
        serve.stop()


def test_an_api_job_slurm_lost_while_chronus_was_down_failed_if_it_ran_else_submitted_again(
    lab, tmp_path
):
    """A job chronus started that Slurm no longer lists when chronus comes back ran, so Slurm
    had it: it ended, or the controller lost it. Submitted again (as one never submitted is,
    after a crash between its acceptance and its submission), its work ran a second time from
    the start, where the same loss while chronus runs fails it. One that never ran is
    submitted again: nothing of it ran, and its promise stands."""
    db = tmp_path / "chronus.db"
    serve = ServeProcess(lab, db).start()
    try:
        ran = ["ran-1", "ran-2"]
        for job_id in ran:
            serve.client.submit(
                {"id": job_id, "gpus": 4, "estimate_seconds": 60, "duration_seconds": 60}
            )
        wait_for(
            lambda: all(serve.jobs()[k]["state"] == "running" for k in ran), 30, "both running"
        )
        serve.client.submit(
            {"id": "waits", "gpus": 4, "estimate_seconds": 60, "duration_seconds": 2}
        )
        wait_for(lambda: "waits" in names(lab), 30, "waits held in Slurm", every=0.2)
        assert serve.jobs()["waits"]["state"] == "pending"
        serve.stop()
        lab.lose_state()
        # ids start from 1 again, and slurmd refuses a job whose id it killed moments ago
        # ("Job 1 already killed, do not launch batch job"): held jobs of no one take them
        for _ in ran:
            lab.sbatch("--hold", "--gres=gpu:1")
        serve = ServeProcess(lab, db).start()
        wait_for(lambda: serve.jobs()["waits"]["state"] == "finished", 60, "waits finished")
        jobs = serve.jobs()
        assert [jobs[k]["state"] for k in ran] == ["failed", "failed"]
        assert sorted(e["job"] for e in serve.events("gone")) == ran
        assert [n for n in names(lab) if n in ran + ["waits"]] == ["waits"]  # neither ran again
    finally:
        serve.stop()


def test_a_drained_node_gets_no_new_job_until_it_is_resumed(lab, tmp_path):
    """Node health follows Slurm while the service runs: with n2 drained, two 4-GPU jobs run
    one after the other on n1; resumed, n2 is used again."""
    with ServeProcess(lab, tmp_path / "chronus.db") as serve:
        lab.run("scontrol", "update", "nodename=n2", "state=drain", "reason=disk")
        try:
            wait_for(lambda: serve.events("node_unhealthy"), 30, "n2 seen drained", every=0.2)
            first = [submit(lab, 4, 3), submit(lab, 4, 3)]
            watch(lab, serve, first, 90)
            assert [node for i in first for node, _ in runs(lab, i)] == ["n1", "n1"]
            unhealthy = serve.events("node_unhealthy")
            assert unhealthy and unhealthy[0]["node"] == "n2" and "disk" in unhealthy[0]["reason"]
        finally:
            lab.run("scontrol", "update", "nodename=n2", "state=resume")
        wait_for(lambda: serve.events("node_healthy"), 30, "n2 seen resumed", every=0.2)
        second = [submit(lab, 4, 3), submit(lab, 4, 3)]
        watch(lab, serve, second, 90)
        assert sorted(node for i in second for node, _ in runs(lab, i)) == ["n1", "n2"]


def test_gpus_held_by_a_job_chronus_does_not_run_get_no_start_until_it_ends(lab, tmp_path):
    """A job without the marker, started by hand, holds n1's 4 GPUs. Chronus counted them
    free: a start it planned there pended (Resources), waited out the start timeout (30 s of
    the round) and was held again, round after round. Now n1 is unhealthy, naming the job:
    chronus's jobs run on n2, none waits for a start, and n1 is used again once the job ends."""
    foreign = lab.sbatch("--gres=gpu:4", "-w", "n1", script="#!/bin/sh\nsleep 300\n")
    with ServeProcess(lab, tmp_path / "chronus.db") as serve:
        try:

            def held() -> list[dict]:
                return [e for e in serve.events("node_unhealthy") if e["node"] == "n1"]

            wait_for(held, 30, "n1 seen held", every=0.2)
            assert held()[0]["reason"] == f"GPUs held by Slurm job {foreign}, not chronus's"
            (n1,) = [n for n in serve.client.cluster()["nodes"] if n["name"] == "n1"]
            assert not n1["healthy"] and n1["reason"] == held()[0]["reason"]
            first = [submit(lab, 2, 3) for _ in range(3)]
            watch(lab, serve, first, 90)
            assert [node for i in first for node, _ in runs(lab, i)] == ["n2"] * 3
            check_runs_match_decisions(lab, serve, first)
            log = serve.log.read_text()
            assert "slurm_start_timeout" not in log and "slurm_not_started" not in log, log
        finally:
            lab.run("scancel", str(foreign))
        wait_for(lambda: serve.events("node_healthy"), 30, "n1 seen free", every=0.2)
        assert serve.events("node_healthy")[0]["node"] == "n1"
        second = [submit(lab, 4, 3), submit(lab, 4, 3)]
        watch(lab, serve, second, 90)
        assert sorted(node for i in second for node, _ in runs(lab, i)) == ["n1", "n2"]
        assert "resync" not in serve.log.read_text()


def test_a_job_no_node_holds_runs_split_evenly_over_nodes(lab, tmp_path):
    """With 1 GPU free on each node, a 2-GPU job runs as 1 + 1 on both, as Slurm can run it
    (the same count on every node), and starts at once: no failed start, no resync."""
    with ServeProcess(lab, tmp_path / "chronus.db") as serve:
        big = [submit(lab, 3, 10), submit(lab, 3, 10)]
        wait_for(lambda: running(lab, serve, big), 30, "both 3-GPU jobs running", every=0.2)
        split = submit(lab, 2, 3)
        watch(lab, serve, [split], 60)
        assert serve.jobs()[named(lab, split)]["starts"] == 1
        (start,) = [d for d in decisions(serve) if d["job"] == named(lab, split)]
        assert sorted(len(g) for g in start["placement"].values()) == [1, 1]
        log = serve.log.read_text()
        assert "backend_error" not in log and "resync" not in log, log
        watch(lab, serve, big, 60)


def test_the_trace_harness_reads_back_what_happened(lab, tmp_path):
    """``replay.run`` (the demo's and benchmarks/slurm_trace.py's harness): three jobs through
    ``chronus serve`` in compressed time, each outcome read back from Slurm and chronus."""
    from chronus_py.backends.slurm.replay import TraceJob, run, summary

    jobs = [
        TraceJob(at=0.0, gpus=1, work=120.0, deadline=7200.0),
        TraceJob(at=60.0, gpus=2, work=180.0, deadline=None),
        TraceJob(at=120.0, gpus=4, work=120.0, deadline=9000.0),
    ]
    outcomes = run(lab, jobs, chronus=True, scale=60.0, workdir=tmp_path, timeout=120)
    assert [o.state for o in outcomes] == ["COMPLETED"] * 3
    assert all(o.submit < o.end for o in outcomes)
    assert [o.met for o in outcomes] == [True, None, True]
    assert outcomes[0].guaranteed and outcomes[2].guaranteed and not outcomes[1].guaranteed
    assert outcomes[0].chronus["decisions"][0]["action"] == "admit:guaranteed"
    assert outcomes[0].chronus["promises"][0]["event"] == "promised"
    s = summary(outcomes)
    assert (s["jobs"], s["completed"], s["slo_jobs"], s["guaranteed"]) == (3, 3, 2, 2)
    assert s["deadline_ratio"] == 1.0 and s["guarantees_kept"] == 2 and s["broken"] == []


HIVED = """physicalCluster:
  cellTypes:
    PAIR: {childCellType: GPU, childCellNumber: 2}
    NODE: {childCellType: PAIR, childCellNumber: 2, isNodeLevel: true}
    ROW: {childCellType: NODE, childCellNumber: 2}
  physicalCells:
  - cellType: ROW
    cellAddress: row0
    cellChildren: [{cellAddress: n1}, {cellAddress: n2}]
virtualClusters:
  root:
    virtualCells: [{cellType: ROW, cellNumber: 1}]
"""


def test_a_hived_cell_tree_places_jobs_on_slurms_nodes(lab, tmp_path):
    """``--cluster hived.yaml`` naming Slurm's nodes: the cell allocator places every gang in a
    cell (a 2-GPU job in a GPU pair, a 4-GPU job in a whole node), and Slurm runs each where
    chronus placed it. The tenant of a Slurm job is its account or user (root here), so the
    virtual cluster is named after it.

    The jobs are submitted before chronus starts, so its first round sees all four: submitted
    while it runs, the 4-GPU job could start alone and then be preempted by the shorter 2-GPU
    ones (remaining GPU-time first), which is right but makes the count of starts a race.

    A job of another account has no virtual cluster: refused, saying so in its comment (it was
    accepted and waited for ever, and the service's reason never reached the job)."""
    config = tmp_path / "hived.yaml"
    config.write_text(HIVED)
    ids = [submit(lab, 4, 3), submit(lab, 2, 3), submit(lab, 2, 3), submit(lab, 2, 3)]
    stray = lab.sbatch(
        "--hold", "--account=elsewhere", "--gres=gpu:1", "--comment", "chronus: estimate=3"
    )
    with ServeProcess(lab, tmp_path / "chronus.db", "--cluster", str(config)) as serve:
        watch(lab, serve, ids, 90)
        refused = SlurmRest(f"unix:{lab.socket}", retries=0).job(stray)
        assert refused.state == "CANCELLED" and refused.comment.startswith(
            "chronus refused: account: 'elsewhere' is no virtual cluster of the cell allocator "
            "(have: root) ["
        ), refused.comment
        assert not [k for k in serve.jobs() if k.startswith(f"slurm-{stray}-")]
        check_runs_match_decisions(lab, serve, ids)
        events = decisions(serve)
        starts = [d for d in events if d["event"] == "start"]
        preempts = [d for d in events if d["event"] == "preempt"]
        assert sorted(d["job"] for d in starts) == sorted(named(lab, i) for i in ids)
        assert not preempts
        for d in starts:
            ((node, gpus),) = d["placement"].items()
            assert node in ("n1", "n2")
            assert tuple(gpus) in ((0, 1), (2, 3), (0, 1, 2, 3)), d  # whole cells


def test_a_daemon_that_does_not_answer_in_time_is_stopped(lab, tmp_path):
    """A start that times out stops the daemon: left running, it took later tests' jobs."""
    serve = ServeProcess(lab, tmp_path / "chronus.db")
    with pytest.raises(RuntimeError, match="did not answer"):
        serve.start(timeout=0)
    assert serve.proc is not None and serve.proc.poll() is not None
