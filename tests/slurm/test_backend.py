"""The Slurm backend against real daemons: adoption, placement, preemption, cancel, health."""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta, timezone

import pytest
from polling import wait_for

from chronus_py.backends.base import RunState
from chronus_py.backends.slurm.backend import SlurmBackend, chronus_id
from chronus_py.backends.slurm.lab import workload
from chronus_py.backends.slurm.rest import SlurmRest


def backend(lab, **kw) -> SlurmBackend:
    kw.setdefault("grace", 0.5)
    kw.setdefault("start_timeout", 15)
    return SlurmBackend(SlurmRest(f"unix:{lab.socket}"), partition=lab.partition, env=lab.env, **kw)


def accept_all(b: SlurmBackend) -> list[dict]:
    """What the service does with arrivals it admits: submit() them back."""
    from chronus_py.service.jobspec import parse_job

    out = []
    for fields in b.arrivals():
        spec = parse_job(
            dict(fields),
            now=b.now(),
            tenant=fields["tenant"],
            may_set_tenant=True,
            submit=fields["submit"],
        )
        b.submit(spec.job, spec.fields)
        out.append(dict(fields))
    return out


def named(b: SlurmBackend, slurm_id: int) -> str:
    """A marked Slurm job's id in chronus."""
    return chronus_id(b.rest.job(slurm_id))


def observed(b: SlurmBackend, job_id: str):
    return {o.id: o for o in b.jobs()}[job_id]


def settled(check):
    """``check()``'s first true value, asked of Slurm every 0.2 s for up to 20 s."""
    return wait_for(check, 20.0, every=0.2)


def test_nodes_and_health(lab):
    b = backend(lab)
    nodes = {n.name: n for n in b.nodes()}
    assert set(nodes) == {"n1", "n2"}
    assert all(n.gpus == (0, 1, 2, 3) and n.healthy for n in nodes.values())
    lab.run("scontrol", "update", "nodename=n2", "state=drain", "reason=disk")
    n2 = {n.name: n for n in b.nodes()}["n2"]
    assert not n2.healthy and "disk" in n2.reason and "DRAIN" in n2.reason.upper()
    # the lab's undrain waits out NOT_RESPONDING (Slurm starts nothing there until its ping):
    # without the wait, the next test's start on n2 was held again (ReqNodeNotAvail)
    lab.resume_nodes()
    assert {n.name: n.reason for n in b.nodes() if not n.healthy} == {}


def test_a_node_taken_out_of_the_partition_is_unhealthy_not_forgotten(lab):
    # Left out of the listing, the service kept the node as it was, healthy, and a start
    # there never ran (BadConstraints): each round that planned one waited out the start
    # timeout, then held the job again.
    b = backend(lab)
    assert {n.name for n in b.nodes()} == {"n1", "n2"}
    lab.run("scontrol", "update", f"partitionname={lab.partition}", "nodes=n1")
    try:
        n2 = {n.name: n for n in b.nodes()}["n2"]
        assert not n2.healthy and n2.reason == f"no longer in partition {lab.partition}"
        assert n2.gpus == (0, 1, 2, 3)
    finally:
        lab.run("scontrol", "update", f"partitionname={lab.partition}", "nodes=n1,n2")
    assert not any("no longer" in n.reason for n in b.nodes())


def test_adopts_marked_held_jobs_only(lab):
    b = backend(lab)
    mine = lab.sbatch(
        "--hold",
        "--gres=gpu:2",
        "--comment",
        "chronus: estimate=30s deadline=+10m:1,+20m:0.5 model=bert",
    )
    plain = lab.sbatch("--hold", "--gres=gpu:1")
    other = lab.sbatch("--hold", "--gres=gpu:1", "--comment", "not for chronus")
    arrivals = {a["id"]: a for a in b.arrivals()}
    assert set(arrivals) == {named(b, mine)}
    a = arrivals[named(b, mine)]
    assert a["gpus"] == 2 and a["estimate_seconds"] == 30 and a["model"] == "bert"
    assert [d["value"] for d in a["deadlines"]] == [1.0, 0.5]
    assert a["deadlines"][0]["at"] == pytest.approx(a["submit"] + 600)
    accept_all(b)
    assert b.arrivals() == []
    assert observed(b, named(b, mine)).state is RunState.PENDING
    for untouched in (plain, other):
        job = b.rest.job(untouched)
        assert job.held and "accepted" not in job.comment


def test_bad_marker_is_refused_with_a_reason(lab):
    b = backend(lab)
    bad = lab.sbatch("--hold", "--gres=gpu:1", "--comment", "chronus: deadline=+1h")
    assert b.arrivals() == []
    job = b.rest.job(bad)
    assert job.state == "CANCELLED"
    assert job.comment.startswith("chronus refused: estimate: required")


def test_a_long_comment_is_refused_within_slurms_limit_and_blocks_no_other_job(lab):
    # Slurm keeps at most 1024 bytes of comment, on update too: the refusal of a bad marker
    # quoted its whole comment after the reason, Slurm refused that update, and every round's
    # arrivals failed for as long as the job waited (no job was taken in); a good marker that
    # left no room for "| accepted" failed every round at its acceptance.
    b = backend(lab)
    good = lab.sbatch("--hold", "--gres=gpu:1", "--comment", "chronus: estimate=60")
    noted = lab.sbatch(
        "--hold", "--gres=gpu:1", "--comment", "chronus: estimate=60 note=" + "x" * 950
    )
    full = lab.sbatch(
        "--hold", "--gres=gpu:1", "--comment", "chronus: estimate=" + "0" * 990 + "60"
    )
    assert [a["id"] for a in accept_all(b)] == [named(b, good)]
    assert "accepted" in b.rest.job(good).comment
    for sid, why in (
        (noted, "chronus refused: note: unknown key"),
        (full, "chronus refused: comment: 1010 bytes; chronus appends up to 59"),
    ):
        job = b.rest.job(sid)
        assert job.state == "CANCELLED" and job.comment.startswith(why), job.comment
        assert len(job.comment.encode()) <= 1024


def test_values_the_service_would_refuse_are_refused_naming_the_marker_key(lab):
    # The service refused these too, but the job's comment then said only "refused by the
    # chronus service (see its decision log)"; and 400 nines were a float's infinity.
    b = backend(lab)
    nines = "9" * 400
    cases = {
        f"chronus: estimate={nines}": "estimate: more than 366 days, got '999",
        f"chronus: estimate=60 deadline=+{nines}": "deadline: more than 366 days",
        "chronus: estimate=60 deadline=+1h:" + nines: "deadline: the value after ':' must be",
        "chronus: estimate=60 deadline=2020-01-01T00:00:00Z": (
            "deadline: 2020-01-01T00:00:00Z is not after the job's submission ("
        ),
        "chronus: estimate=60 deadline=" + ",".join(f"+{h}h" for h in range(1, 18)): (
            "deadline: at most 16 options, got 17"
        ),
        "chronus: estimate=60 model=" + "m" * 200: "model: at most 128 characters, got 200",
        "chronus: estimate=60 | done=nan@0": "'done=nan@0': chronus's own field is damaged",
        "chronus: estimate=60 Estimate=70": "Estimate: unknown key",
    }
    sids = {lab.sbatch("--hold", "--gres=gpu:1", "--comment", c): why for c, why in cases.items()}
    assert b.arrivals() == []
    for sid, why in sids.items():
        job = b.rest.job(sid)
        assert job.state == "CANCELLED", job.comment
        assert job.comment.startswith(f"chronus refused: {why}"), job.comment
    # a deadline that passed before chronus saw the job (here: time runs a million times fast)
    fast = backend(lab, time_scale=1e6, time_origin=time.time())
    late = lab.sbatch("--hold", "--gres=gpu:1", "--comment", "chronus: estimate=60 deadline=+1m")
    assert fast.arrivals() == []
    assert re.match(
        r"chronus refused: deadline: \S+Z has passed \(it is ", b.rest.job(late).comment
    )


def test_an_iso_deadline_is_read_whole_zone_offset_and_all(lab):
    # Split at its last ':', 08:00:00+05:30 read as value 30 at +05 (half an hour off, and a
    # soft deadline), and a zoneless 08:00:00 as value 0 (refused: "value must be > 0").
    b = backend(lab)
    at = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(hours=3)
    zone = timezone(timedelta(hours=5, minutes=30))
    india, later = (t.astimezone(zone).isoformat() for t in (at, at + timedelta(hours=1)))
    naive = at.replace(tzinfo=None).isoformat()
    sids = [
        lab.sbatch("--hold", "--gres=gpu:1", "--comment", f"chronus: estimate=60 deadline={d}")
        for d in (india, naive, f"{india}:1,{later}:0.5")
    ]
    got = {a["id"]: a["deadlines"] for a in b.arrivals()}
    one = {"at": at.timestamp(), "value": 1.0}
    assert got[named(b, sids[0])] == [one] and got[named(b, sids[1])] == [one]
    assert got[named(b, sids[2])] == [one, {"at": at.timestamp() + 3600, "value": 0.5}]


def test_a_marker_edited_after_acceptance_fails_no_round(lab):
    # An owner's `scontrol update comment=...` on a job chronus took: an unreadable marker, or
    # none, hid the job from every listing, so each round that planned to start it failed
    # ("job slurm-N is not in Slurm"), everyone's, and its owner was told nothing.
    b = backend(lab)
    typo, gone, fine = (
        lab.sbatch("--hold", "--gres=gpu:1", "--comment", "chronus: estimate=60") for _ in range(3)
    )
    accept_all(b)
    ids = {sid: named(b, sid) for sid in (typo, gone, fine)}
    lab.run("scontrol", "update", f"jobid={typo}", "comment=chronus: estimate=2 hours | accepted")
    lab.run("scontrol", "update", f"jobid={gone}", "comment=my notes")
    for sid in (typo, gone, fine):
        b.start(ids[sid], {"n1": (0,)} if sid != fine else {"n2": (0,)})
    seen = {o.id: o.state for o in b.jobs()}
    assert seen[ids[typo]] is RunState.CANCELLED
    assert seen[ids[gone]] is RunState.FAILED
    assert seen[ids[fine]] is RunState.RUNNING
    job = b.rest.job(typo)
    assert job.state == "CANCELLED" and job.comment.startswith(
        "chronus refused: 'hours': expected key=value (the marker was changed after chronus "
        "accepted the job)"
    )
    assert b.rest.job(gone).comment == "my notes"  # no marker: not chronus's to touch


def test_chronus_fields_an_owner_drops_from_an_accepted_job_are_written_back(lab):
    # Rewritten without "| accepted", the job arrived again: refused as a taken id in every
    # round while held, and once released never seen running or ending by the service.
    b = backend(lab)
    sid = lab.sbatch(
        "--hold", "--gres=gpu:1", "--comment", "chronus: estimate=4s", script=workload(4)
    )
    jid = named(b, sid)
    accept_all(b)
    b.start(jid, {"n1": (0,)})
    b.preempt(jid)
    assert observed(b, jid).state is RunState.PENDING
    done = b.rest.job(sid).comment.split("| ")[1]  # "accepted done=...@..."
    lab.run("scontrol", "update", f"jobid={sid}", "comment=chronus: estimate=5s")
    assert b.arrivals() == []
    assert b.rest.job(sid).comment == f"chronus: estimate=5s | {done}"
    b.start(jid, {"n2": (0,)})
    assert observed(b, jid).state is RunState.RUNNING


def test_array_and_exclusive_jobs_are_refused_and_block_no_other_job(lab):
    # Slurm lists a pending array as one job: on 22.05 (v0.0.38) its acceptance, an update of
    # an array, failed every round; on 24.11 its release started every task on GPUs chronus
    # counted once.
    b = backend(lab)
    array = lab.sbatch("--hold", "--array=0-2", "--gres=gpu:1", "--comment", "chronus: estimate=60")
    good = lab.sbatch("--hold", "--gres=gpu:1", "--comment", "chronus: estimate=60")
    # --exclusive keeps the node's other GPUs, which chronus counted free: a job it started
    # beside one waited out the start timeout (30 s of the round) and was held again, each round
    alone = lab.sbatch(
        "--hold", "--exclusive=user", "--gres=gpu:1", "--comment", "chronus: estimate=6"
    )
    assert [a["id"] for a in accept_all(b)] == [named(b, good)]
    for sid, flag in ((array, "--array"), (alone, "--exclusive")):
        job = b.rest.job(sid)
        assert job.state == "CANCELLED" and job.comment.startswith(f"chronus refused: {flag}:")


def test_a_comment_copied_with_chronus_fields_is_read_as_a_new_job(lab):
    # "| accepted done=..." copied from an old job's comment: the job never arrived, so it sat
    # held, unknown to the service and told nothing, with another job's work counted done.
    b = backend(lab)
    b.arrivals()  # chronus is listing: jobs accepted before were accepted before a restart
    sid = lab.sbatch(
        "--hold", "--gres=gpu:1", "--comment", "chronus: estimate=60 | accepted done=50.0@17"
    )
    assert [a["id"] for a in accept_all(b)] == [named(b, sid)]
    job = b.rest.job(sid)
    assert job.comment == f"chronus: estimate=60 | accepted submit={job.submit_time:.0f}"
    assert observed(b, named(b, sid)).work_done == 0


def test_user_may_not_pick_an_id(lab):
    b = backend(lab)
    sid = lab.sbatch("--hold", "--gres=gpu:1", "--comment", "chronus: estimate=60 id=mine")
    assert b.arrivals() == []
    assert b.rest.job(sid).comment.startswith("chronus refused: id: set by chronus")


def test_a_forgotten_user_job_is_over_not_recreated(lab):
    from chronus_py.jobs.model import Job, JobKind

    b = backend(lab)
    before = len(b.rest.jobs())
    b.submit(Job("slurm-99999", "t", 1, 0.0, JobKind.BEST_EFFORT, duration=60))
    assert len(b.rest.jobs()) == before
    assert observed(b, "slurm-99999").state is RunState.FAILED


def test_a_controller_that_lost_its_state_ends_chronus_jobs_and_its_ids_name_new_jobs(lab):
    # slurmctld restarted with its StateSaveLocation wiped numbers jobs from 1 again. Named
    # slurm-<jobid>, the new job 1 took the old one's place (chronus wrote the old job's
    # fields back into its comment) or, through the service, was refused as a taken id every
    # round; the old job was never seen to end.
    lab.lose_state()
    b = backend(lab)
    old = lab.sbatch(
        "--hold", "--gres=gpu:1", "--comment", "chronus: estimate=60s", script=workload(60)
    )
    was = named(b, old)
    assert was == f"slurm-{old}-{b.rest.job(old).submit_time:.0f}"
    accept_all(b)
    b.start(was, {"n1": (0,)})
    b.preempt(was)  # a requeue: Slurm stamps a new submit time, chronus keeps its id
    assert observed(b, was).state is RunState.PENDING
    b.start(was, {"n1": (0,)})
    assert observed(b, was).state is RunState.RUNNING
    assert observed(backend(lab), was).state is RunState.RUNNING  # chronus restarted: same id
    lab.lose_state()
    new = lab.sbatch("--hold", "--gres=gpu:1", "--comment", "chronus: estimate=60s")
    assert new == old
    now = named(b, new)
    assert now != was and [a["id"] for a in accept_all(b)] == [now]
    seen = {o.id: o for o in b.jobs()}
    assert seen[was].state is RunState.FAILED and seen[now].state is RunState.PENDING
    assert b.rest.job(new).comment == (
        f"chronus: estimate=60s | accepted submit={b.rest.job(new).submit_time:.0f}"
    )
    b.start(now, {"n2": (0,)})
    assert observed(b, now).state is RunState.RUNNING


def test_start_preempt_resume_and_finish(lab):
    b = backend(lab)
    sid = lab.sbatch(
        "--hold", "--gres=gpu:2", "--comment", "chronus: estimate=4s", script=workload(4)
    )
    jid = named(b, sid)
    accept_all(b)
    b.start(jid, {"n2": (0, 1)})
    o = observed(b, jid)
    assert o.state is RunState.RUNNING and o.starts == 1
    assert list(o.placement) == ["n2"] and len(o.placement["n2"]) == 2
    assert len(b._latencies) == 1 and b._latencies[0] < 15  # measured, and the grace on top
    assert b.start_latency() == pytest.approx((b._latencies[0] + b.grace) * b.scale)
    b.start(jid, {"n2": (0, 1)})  # idempotent: already running
    assert b.rest.job(sid).restart_cnt == 0
    time.sleep(1.5)
    b.preempt(jid)
    o = observed(b, jid)  # the stop is finished before anything is observed
    job = b.rest.job(sid)
    assert job.held and job.restart_cnt == 1
    assert o.state is RunState.PENDING and o.starts == 1 and o.work_done >= 1.5
    b.start(jid, {"n1": (2, 3)})
    o = observed(b, jid)
    assert o.state is RunState.RUNNING and list(o.placement) == ["n1"] and o.starts == 2
    o = settled(lambda: (x := observed(b, jid)).state is RunState.FINISHED and x)
    assert o.starts == 2 and o.work_done >= 4  # its 4 s of work, over two runs


def test_a_started_job_is_reported_on_the_gpus_chronus_chose(lab):
    # Slurm honours a start's node and GPU count but picks the GPUs (the lowest free here):
    # reported by Slurm's indices, the run looked moved to the service, which then rebuilt
    # its scheduler and re-planned mid-lease (issue 26: a guarantee broken that way).
    b = backend(lab)
    sid = lab.sbatch(
        "--hold", "--gres=gpu:2", "--comment", "chronus: estimate=30s", script=workload(30)
    )
    jid = named(b, sid)
    accept_all(b)
    released = time.time()
    b.start(jid, {"n1": (2, 3)})
    o = observed(b, jid)
    assert dict(o.placement) == {"n1": (2, 3)}
    assert o.run_since >= released  # though Slurm stamps its start in whole seconds
    assert dict(b.rest.job(sid).placement) == {"n1": (0, 1)}  # Slurm's own choice
    b.preempt(jid)
    assert observed(b, jid).state is RunState.PENDING
    b.start(jid, {"n2": (0, 1)})
    assert dict(observed(b, jid).placement) == {"n2": (0, 1)}


def test_a_job_runs_on_as_many_nodes_as_its_placement_spans(lab):
    # Slurm fixes a job's node count at submission; a start on another count must change it
    # (v0.0.38 refused the "maximum_nodes" key this once sent, so every such start failed).
    b = backend(lab)
    sid = lab.sbatch(
        "--hold", "--gres=gpu:4", "--comment", "chronus: estimate=30s", script=workload(30)
    )
    jid = named(b, sid)
    accept_all(b)
    b.start(jid, {"n1": (2, 3), "n2": (0, 1)})
    o = observed(b, jid)
    assert o.state is RunState.RUNNING
    assert {n: len(g) for n, g in o.placement.items()} == {"n1": 2, "n2": 2}
    b.preempt(jid)
    b.start(jid, {"n2": (0, 1, 2, 3)})
    o = observed(b, jid)
    assert o.state is RunState.RUNNING and dict(o.placement) == {"n2": (0, 1, 2, 3)}


def test_a_job_whose_work_ends_within_its_grace_is_finished_not_requeued(lab):
    # It keeps working through the signal and its last step ends before the grace does: Slurm
    # says COMPLETED, its work is done, and there is no run to requeue.
    b = backend(lab, grace=8.0)
    sid = lab.sbatch(
        "--hold", "--gres=gpu:1", "--comment", "chronus: estimate=2s", script=workload(2)
    )
    jid = named(b, sid)
    accept_all(b)
    b.start(jid, {"n1": (0,)})
    out = lab.root / "jobs" / f"{sid}.out"
    settled(lambda: out.exists() and " from 0" in out.read_text())  # its trap is set
    began = time.monotonic()
    b.preempt(jid)
    o = observed(b, jid)
    assert time.monotonic() - began < 8.0  # it ended; the grace was not waited out
    assert o.state is RunState.FINISHED and o.starts == 1 and o.work_done >= 2
    assert b.rest.job(sid).restart_cnt == 0 and "done=" not in b.rest.job(sid).comment


def test_the_jobs_one_round_preempts_share_one_grace(lab):
    # Each job keeps running through the checkpoint signal (it only logs it), so each stop
    # takes the whole grace: one after the other, three would take three graces.
    b = backend(lab, grace=3.0)
    sids = [
        lab.sbatch(
            "--hold", "--gres=gpu:2", "--comment", "chronus: estimate=60s", script=workload(60)
        )
        for _ in range(3)
    ]
    accept_all(b)
    for sid, placement in zip(sids, ({"n1": (0, 1)}, {"n1": (2, 3)}, {"n2": (0, 1)})):
        b.start(named(b, sid), placement)
    ids = {named(b, sid) for sid in sids}
    assert all(o.state is RunState.RUNNING for o in b.jobs() if o.id in ids)
    began = time.monotonic()
    for sid in sids:
        b.preempt(named(b, sid))
    seen = {o.id: o for o in b.jobs()}  # the next observation finishes the stops
    took = time.monotonic() - began
    assert all(seen[named(b, sid)].state is RunState.PENDING for sid in sids)
    assert all(b.rest.job(sid).held and b.rest.job(sid).restart_cnt == 1 for sid in sids)
    assert 3.0 <= took < 9.0, took  # one after the other, three graces would take 9 s


def test_a_start_waits_out_the_grace_of_the_job_it_displaces_and_is_charged_it_once(lab):
    # The plan charges the grace on every start (``start_latency``); the sample of a start
    # that waited it out leaves it out. Before, the grace was in such a sample only: charged
    # while one was among the last 20 starts, and not at all after 20 that displaced nothing.
    b = backend(lab, grace=3.0)
    first, second = (
        lab.sbatch(
            "--hold", "--gres=gpu:4", "--comment", "chronus: estimate=60s", script=workload(60)
        )
        for _ in range(2)
    )
    accept_all(b)
    b.start(named(b, first), {"n1": (0, 1, 2, 3)})
    assert observed(b, named(b, first)).state is RunState.RUNNING
    b.jobs()  # a round's look, from which its start counts
    began = time.monotonic()
    b.preempt(named(b, first))  # one round: the first's GPUs go to the second
    b.start(named(b, second), {"n1": (0, 1, 2, 3)})
    assert observed(b, named(b, second)).state is RunState.RUNNING
    assert time.monotonic() - began >= 3.0  # it waited out the grace
    assert len(b._latencies) == 2 and b._latencies[-1] < 3.0, list(b._latencies)
    assert b.start_latency() == pytest.approx((max(b._latencies) + 3.0) * b.scale)


def test_cancel_and_scancel(lab):
    b = backend(lab)
    a = lab.sbatch("--hold", "--gres=gpu:1", "--comment", "chronus: estimate=60")
    c = lab.sbatch("--hold", "--gres=gpu:1", "--comment", "chronus: estimate=60")
    accept_all(b)
    b.start(named(b, a), {"n1": (0,)})
    b.cancel(named(b, a))
    b.cancel(named(b, a))  # idempotent
    lab.run("scancel", str(c))
    states = {o.id: o.state for o in b.jobs()}
    assert states[named(b, a)] is RunState.CANCELLED
    assert settled(lambda: observed(b, named(b, c)).state is RunState.CANCELLED)


def test_a_job_submitted_with_begin_starts_when_chronus_starts_it(lab):
    # chronus decides when a job starts: released with its --begin an hour away, it did not
    # start, and each round that started it waited out the start timeout and held it again.
    b = backend(lab)
    sid = lab.sbatch(
        "--hold", "--begin=now+1hour", "--gres=gpu:1", "--comment", "chronus: estimate=60"
    )
    accept_all(b)
    b.start(named(b, sid), {"n1": (0,)})
    assert observed(b, named(b, sid)).state is RunState.RUNNING


def test_what_a_job_asks_of_its_nodes_is_refused_naming_the_option_unless_all_give_it(lab):
    # chronus may start a job on any node of the partition and names the nodes in its start:
    # Slurm replaced a --nodelist with them, and never started a job whose --exclude,
    # --constraint, --reservation or --mem ruled the planned node out (BadConstraints,
    # Reservation): every round that started it waited out the start timeout (30 s), then held
    # it again. The lab's n1 has features gpu and fast, n2 only gpu, both 64000 MB.
    b = backend(lab)
    lab.run(
        "scontrol", "create", "reservation", "reservationname=maint", "nodes=n2",
        "starttime=now+1hour", "duration=10", "users=root",
    )  # fmt: skip
    try:
        refused = {
            "--nodelist=n2": "--nodelist: chronus chooses the nodes of the jobs it starts (it "
            "would replace n2)",
            "--exclude=n1": "--exclude: chronus may start the job on any node of partition gpu, "
            "n1 among them",
            "--constraint=fast": "--constraint: 'fast': chronus may start the job on any node of "
            "partition gpu, and n2 would not do",
            "--reservation=maint": "--reservation: chronus starts jobs on the nodes of "
            "partition gpu, not in reservation maint",
            "--mem=100000": "--mem: 100000 MB per node, more than n1 of partition gpu has "
            "(64000 MB)",
        }
        sids = {
            option: lab.sbatch("--hold", "--gres=gpu:1", option, "--comment", "chronus: estimate=6")
            for option in [*refused, "--constraint=gpu", "--mem=1000"]
        }
        taken = [a["id"] for a in accept_all(b)]
        assert sorted(taken) == sorted(
            named(b, sids[o]) for o in ("--constraint=gpu", "--mem=1000")
        )
        for option, why in refused.items():
            job = b.rest.job(sids[option])
            assert job.state == "CANCELLED", option
            assert job.comment.startswith(f"chronus refused: {why}"), job.comment
    finally:
        lab.cancel_all()  # a job in the reservation keeps it
        lab.run("scontrol", "delete", "reservationname=maint")


_OVER = ("COMPLETED", "FAILED")


def test_a_job_with_a_dependency_is_taken_once_the_jobs_it_waits_for_are_over(lab):
    # Released before its dependency was met, it pended (Dependency) and each round that
    # started it waited out the start timeout. Slurm never judges a held job's dependency (it
    # stays "afterok:N(unfulfilled)"); released, it does: one never to be met is refused.
    b = backend(lab)
    first = lab.sbatch("--gres=gpu:1", script=workload(2))
    bad = lab.sbatch("--gres=gpu:1", script="#!/bin/sh\nsleep 2\nexit 3\n")
    then, never = (
        lab.sbatch(
            "--hold",
            f"--dependency=afterok:{dep}",
            "--gres=gpu:1",
            "--comment",
            "chronus: estimate=6",
        )  # fmt: skip
        for dep in (first, bad)
    )
    assert b.arrivals() == [] and b.rest.job(then).held and b.rest.job(never).held
    assert settled(lambda: (b.rest.job(first).state, b.rest.job(bad).state) == _OVER)
    assert sorted(a["id"] for a in accept_all(b)) == sorted(named(b, s) for s in (then, never))
    began = time.monotonic()
    b.start(named(b, then), {"n1": (0,)})
    b.start(named(b, never), {"n2": (0,)})
    seen = {o.id: o.state for o in b.jobs()}
    assert time.monotonic() - began < 5.0  # the start timeout is 15 s
    assert seen[named(b, then)] is RunState.RUNNING
    job = b.rest.job(never)
    assert job.state == "CANCELLED" and job.comment.startswith(
        "chronus refused: --dependency: Slurm will not run the job in partition gpu "
        "(DependencyNeverSatisfied)"
    ), job.comment


def test_a_start_slurm_will_not_make_now_is_held_again_at_once_or_refused(lab):
    # Slurm says why a released job pends: a dependency its owner added after chronus took
    # it, a limit of its partition. Each round that started it waited out the start timeout;
    # a --time beyond the partition's MaxTime never runs at all, so it is refused.
    b = backend(lab)
    busy = lab.sbatch("--gres=gpu:1", script=workload(30))
    waits, long = (
        lab.sbatch("--hold", "--gres=gpu:1", *args, "--comment", "chronus: estimate=6")
        for args in ((), ("--time=10",))
    )
    accept_all(b)
    lab.run("scontrol", "update", f"jobid={waits}", f"dependency=afterok:{busy}")
    lab.run("scontrol", "update", f"partitionname={lab.partition}", "maxtime=5")
    try:
        began = time.monotonic()
        b.start(named(b, waits), {"n1": (0,)})
        b.start(named(b, long), {"n2": (0,)})
        seen = {o.id: o.state for o in b.jobs()}
        assert time.monotonic() - began < 5.0  # the start timeout is 15 s
    finally:
        lab.run("scontrol", "update", f"partitionname={lab.partition}", "maxtime=infinite")
    assert seen[named(b, waits)] is RunState.PENDING and b.rest.job(waits).held
    job = b.rest.job(long)
    assert seen[f"slurm-{long}-{job.submit_time:.0f}"] is RunState.CANCELLED
    assert job.state == "CANCELLED" and job.comment.startswith(
        "chronus refused: --time: Slurm will not run the job in partition gpu "
        "(PartitionTimeLimit) [chronus: estimate=6 | accepted submit="
    )


def test_a_node_in_a_reservation_is_unhealthy_while_the_reservation_holds_it(lab):
    # Slurm starts no job submitted outside a reservation on its nodes (ReqNodeNotAvail), so
    # every round that planned a job there started it in vain. Nor, before it starts, any job
    # whose time limit reaches into it: with an INFINITE MaxTime every start there was held
    # again and resynced, round after round, from the moment the reservation was made.
    b = backend(lab)
    lab.run(
        "scontrol", "create", "reservation", "reservationname=now", "nodes=n2",
        "starttime=now", "duration=10", "users=root",
    )  # fmt: skip
    lab.run(
        "scontrol", "create", "reservation", "reservationname=later", "nodes=n1",
        "starttime=now+1hour", "duration=10", "users=root",
    )  # fmt: skip
    try:
        # (a node just put back in the partition is NOT_RESPONDING until Slurm pings it)
        nodes = settled(lambda: "NOT_RESPONDING" not in str(ns := b.nodes()) and ns)
        n1, n2 = sorted(nodes, key=lambda n: n.name)
        assert not n2.healthy and re.fullmatch(r"in reservation now until \S+Z", n2.reason)
        assert not n1.healthy and re.fullmatch(
            r"reservation later from \S+Z until \S+Z: a job started now may run into it",
            n1.reason,
        )
        time.sleep(1.1)
        assert [n.reason for n in b.nodes()] == [n1.reason, n2.reason]  # the same every round
        # no job of the partition runs 30 minutes: one started now is over before it
        lab.run("scontrol", "update", f"partitionname={lab.partition}", "maxtime=30")
        assert [n.healthy for n in b.nodes()] == [True, False]
        lab.run("scontrol", "update", f"partitionname={lab.partition}", "maxtime=90")
        assert [n.reason for n in b.nodes()] == [n1.reason, n2.reason]
    finally:
        lab.run("scontrol", "update", f"partitionname={lab.partition}", "maxtime=infinite")
        for name in ("now", "later"):
            lab.run("scontrol", "delete", f"reservationname={name}")
    assert all(n.healthy for n in b.nodes())


def test_a_node_where_jobs_chronus_does_not_run_hold_gpus_is_unhealthy_until_they_end(lab):
    # Chronus counted their GPUs free: a start it planned there pended (Resources), waited out
    # the start timeout and was held again, round after round. The holders come from the
    # listing the round takes anyway: no request of their own.
    rest = CountingRest(f"unix:{lab.socket}")
    b = SlurmBackend(rest, partition=lab.partition, env=lab.env, grace=0.5, start_timeout=15)
    sleep = "#!/bin/sh\nsleep 60\n"
    plain = lab.sbatch("--gres=gpu:1", "-w", "n1", script=sleep)
    noted = lab.sbatch("--gres=gpu:1", "-w", "n1", "--comment", "team note", script=sleep)
    # marked, but Slurm ran it before chronus saw it held: chronus never took it in
    unheld = lab.sbatch(
        "--gres=gpu:1", "-w", "n1", "--comment", "chronus: estimate=60", script=sleep
    )
    cpu = lab.sbatch("-w", "n2", script=sleep)  # no GPU: holds none
    mine, by_hand = (
        lab.sbatch("--hold", "--gres=gpu:1", "--comment", "chronus: estimate=60s", script=sleep)
        for _ in range(2)
    )
    settled(lambda: all(b.rest.job(i).state == "RUNNING" for i in (plain, noted, unheld, cpu)))
    accept_all(b)
    b.start(named(b, mine), {"n2": (0,)})
    # chronus's own job, started by an admin where chronus did not put it: the service's
    # (it resyncs), not a stranger's
    lab.run("scontrol", "update", f"jobid={by_hand}", "nodelist=n2")
    lab.run("scontrol", "release", str(by_hand))
    settled(lambda: b.rest.job(by_hand).state == "RUNNING")
    assert observed(b, named(b, by_hand)).state is RunState.RUNNING
    listed = rest.listings
    nodes = {n.name: n for n in b.nodes()}
    assert rest.listings == listed
    assert not nodes["n1"].healthy
    assert (
        nodes["n1"].reason == f"GPUs held by Slurm jobs {plain}, {noted}, {unheld}, not chronus's"
    )
    assert nodes["n2"].healthy and nodes["n2"].reason == ""
    for sid in (noted, unheld):
        lab.run("scancel", str(sid))

    def n1():
        b.jobs()  # the round's listing, which ``nodes`` reads
        return {n.name: n for n in b.nodes()}["n1"]

    settled(lambda: n1().reason == f"GPUs held by Slurm job {plain}, not chronus's")
    lab.run("scancel", str(plain))
    settled(lambda: n1().healthy)
    assert n1().reason == ""


def test_a_marked_job_submitted_without_hold_is_held_and_arrives_and_some_options_refused(lab):
    # Left alone, Slurm started it, outside chronus's plan, on GPUs chronus had freed for
    # another job, whose start then waited out the start timeout. --gpus (per job) read as
    # no GPU at all: "the job requests no GPU".
    b = backend(lab)
    for node in ("n1", "n2"):
        lab.sbatch("--gres=gpu:4", "-w", node, script="#!/bin/sh\nsleep 30\n")
    sid = lab.sbatch("--gres=gpu:2", "--comment", "chronus: estimate=60")
    per_job = lab.sbatch("--hold", "--gpus=2", "--comment", "chronus: estimate=60")
    # requeuehold refuses it ("Requested operation is presently disabled"): every round that
    # preempted it failed
    stays = lab.sbatch("--hold", "--no-requeue", "--gres=gpu:1", "--comment", "chronus: estimate=6")
    assert b.arrivals() == []
    b.jobs()  # the round's observation holds it
    assert b.rest.job(sid).held
    assert [a["id"] for a in accept_all(b)] == [named(b, sid)]
    job = b.rest.job(per_job)
    assert job.state == "CANCELLED" and job.comment.startswith(
        "chronus refused: --gpus: chronus reads a job's GPUs per node; ask for 2 with "
        "--gres=gpu:2 (or --gpus-per-node)"
    ), job.comment
    job = b.rest.job(stays)
    assert job.state == "CANCELLED" and job.comment.startswith(
        "chronus refused: --no-requeue: chronus preempts a job by requeueing it"
    ), job.comment


def test_a_job_made_non_requeueable_after_acceptance_is_still_preempted(lab):
    # scontrol requeuehold refuses a job that is not requeueable: every round that preempted
    # it failed ("Requested operation is presently disabled").
    b = backend(lab)
    sid = lab.sbatch(
        "--hold", "--gres=gpu:1", "--comment", "chronus: estimate=60s", script=workload(60)
    )
    jid = named(b, sid)
    accept_all(b)
    lab.run("scontrol", "update", f"jobid={sid}", "requeue=0")
    assert not b.rest.job(sid).requeue
    b.start(jid, {"n1": (0,)})
    assert observed(b, jid).state is RunState.RUNNING
    b.preempt(jid)
    assert observed(b, jid).state is RunState.PENDING
    assert b.rest.job(sid).held and b.rest.job(sid).restart_cnt == 1


def test_released_by_hand_is_held_again(lab):
    b = backend(lab)
    # plain jobs fill both nodes, so the released job cannot start before chronus sees it
    busy, other = (
        lab.sbatch("--gres=gpu:4", "-w", node, script="#!/bin/sh\nsleep 30\n")
        for node in ("n1", "n2")
    )
    settled(lambda: b.rest.job(busy).state == b.rest.job(other).state == "RUNNING")
    sid = lab.sbatch("--hold", "--gres=gpu:4", "--comment", "chronus: estimate=60")
    accept_all(b)
    lab.run("scontrol", "release", str(sid))
    b.arrivals()  # the next round's look, which its observation shares
    assert observed(b, named(b, sid)).state is RunState.PENDING
    assert b.rest.job(sid).held
    assert b.rest.job(busy).state == "RUNNING" and "chronus" not in b.rest.job(busy).comment


def test_api_submission_is_a_held_marked_job(lab):
    from chronus_py.service.jobspec import parse_job

    b = backend(lab, workdir=str(lab.root / "jobs"))
    spec = parse_job(
        {
            "id": "api-1",
            "gpus": 2,
            "estimate_seconds": 2,
            "duration_seconds": 1,
            "deadlines": [{"at": b.now() + 600}],
        },
        now=b.now(),
        tenant="t",
    )
    b.submit(spec.job, spec.fields)
    b.submit(spec.job, spec.fields)  # idempotent
    found = [j for j in b.rest.jobs() if "id=api-1" in j.comment]
    assert len(found) == 1 and found[0].held and "accepted" in found[0].comment
    assert b.arrivals() == []
    b.start("api-1", {"n1": (0, 1)})
    assert settled(lambda: observed(b, "api-1").state is RunState.FINISHED)


def test_jwt_over_tcp(lab):
    from chronus_py.backends.slurm.rest import SlurmError, SlurmUnreachable

    token = lab.token()
    rest = SlurmRest(f"http://127.0.0.1:{lab.rest_port}", token=token, user="root", retries=1)
    assert {n.name for n in rest.nodes()} == {"n1", "n2"}
    assert token not in repr(rest)
    bad = SlurmRest(
        f"http://127.0.0.1:{lab.rest_port}", token="x.y.z", user="root", retries=1, backoff=0.01
    )
    with pytest.raises((SlurmError, SlurmUnreachable)) as err:  # slurmrestd answers 500
        bad.nodes()
    assert "x.y.z" not in str(err.value)
    # a site renews JWTs (they expire): the token file is read again when it changes, where
    # the token read once at start-up failed every request until chronus was restarted
    path = lab.root / "etc" / "chronus.jwt"
    path.write_text("x.y.z\n")
    renewed = SlurmRest(
        f"http://127.0.0.1:{lab.rest_port}",
        user="root",
        retries=1,
        backoff=0.01,
        token_file=str(path),
    )
    with pytest.raises((SlurmError, SlurmUnreachable)):
        renewed.nodes()
    path.write_text(token + "\n")
    assert {n.name for n in renewed.nodes()} == {"n1", "n2"}


def untrapped(seconds: int) -> str:
    """A checkpointing script that does NOT trap the checkpoint signal: USR1 kills it."""
    return workload(seconds).replace("trap ", "# no trap: ")


def test_a_script_that_does_not_trap_the_signal_is_requeued_not_failed(lab):
    # Slurm's default action for USR1 ends the job FAILED (RaisedSignal:10) within the grace;
    # chronus stopped it, so it is requeued held and resumes from its last checkpoint.
    b = backend(lab, grace=5.0)
    sid = lab.sbatch(
        "--hold", "--gres=gpu:1", "--comment", "chronus: estimate=4s", script=untrapped(4)
    )
    jid = named(b, sid)
    accept_all(b)
    b.start(jid, {"n1": (0,)})
    assert observed(b, jid).state is RunState.RUNNING
    time.sleep(1.5)
    began = time.monotonic()
    b.preempt(jid)
    o = observed(b, jid)
    assert time.monotonic() - began < 4.0  # requeued once it died, not after the whole grace
    job = b.rest.job(sid)
    assert job.held and job.restart_cnt == 1
    assert o.state is RunState.PENDING and o.work_done >= 1.0
    b.start(jid, {"n2": (1,)})
    o = settled(lambda: (x := observed(b, jid)).state is RunState.FINISHED and x)
    assert o.starts == 2
    text = (lab.root / "jobs" / f"{sid}.out").read_text()
    assert "run 1 on n2" in text and "from 0" not in text.split("run 1 on n2")[1]


def test_the_default_script_survives_preemption(lab):
    from chronus_py.service.jobspec import parse_job

    b = backend(lab, workdir=str(lab.root / "jobs"), grace=1.0)
    spec = parse_job(
        {"id": "api-ckpt", "gpus": 1, "estimate_seconds": 4, "duration_seconds": 4},
        now=b.now(),
        tenant="t",
    )
    b.submit(spec.job, spec.fields)
    b.start("api-ckpt", {"n1": (0,)})
    assert observed(b, "api-ckpt").state is RunState.RUNNING
    time.sleep(2.2)
    b.preempt("api-ckpt")
    assert observed(b, "api-ckpt").state is RunState.PENDING
    b.start("api-ckpt", {"n2": (0,)})
    o = settled(lambda: (x := observed(b, "api-ckpt")).state is RunState.FINISHED and x)
    assert o.starts == 2
    (out,) = (lab.root / "jobs").glob("chronus-api-ckpt-*.out")  # the last run's output
    ((run, done),) = re.findall(r"^run (\d+) of api-ckpt from (\d+) s$", out.read_text(), re.M)
    assert run == "1" and int(done) >= 1  # resumed from its checkpoint


class CountingRest(SlurmRest):
    """The real REST client, counting full job listings (the cost a round shares)."""

    listings = 0

    def jobs(self):
        self.listings += 1
        return super().jobs()


def test_a_round_lists_jobs_once_and_sees_its_own_commands(lab):
    rest = CountingRest(f"unix:{lab.socket}")
    b = SlurmBackend(rest, partition=lab.partition, env=lab.env, grace=0.5, start_timeout=15)
    job_id, other = (
        named(b, lab.sbatch("--hold", "--gres=gpu:1", "--comment", "chronus: estimate=30s"))
        for _ in range(2)
    )
    accept_all(b)  # arrivals, then the submit that accepts the arrival
    assert observed(b, job_id).state is RunState.PENDING  # accepted, as the shared listing shows
    assert rest.listings == 1
    b.arrivals()
    b.start(job_id, {"n1": (0,)})  # a command drops the shared listing: the look is fresh
    assert observed(b, job_id).state is RunState.RUNNING
    assert rest.listings == 3
    b.start(other, {"n2": (0,)})
    b.arrivals()  # the next round's look, once the last round's starts run: shared again
    assert observed(b, other).state is RunState.RUNNING
    assert rest.listings == 4
    b.cancel(job_id)
    b.cancel(other)


def test_a_look_before_the_round_leaves_the_round_nothing_to_read_or_wait_for(lab):
    """``look`` (called by the service before a round, off its request lock) settles the last
    round's starts and lists; the round's ``arrivals`` and ``jobs`` then read nothing more from
    Slurm, and see the start done. A second round without a look lists again."""
    rest = CountingRest(f"unix:{lab.socket}")
    b = SlurmBackend(rest, partition=lab.partition, env=lab.env, grace=0.5, start_timeout=15)
    job_id = named(b, lab.sbatch("--hold", "--gres=gpu:1", "--comment", "chronus: estimate=30s"))
    accept_all(b)
    b.jobs()
    b.start(job_id, {"n1": (0,)})
    b.look()
    listed = rest.listings
    assert b.arrivals() == []
    assert observed(b, job_id).state is RunState.RUNNING
    assert rest.listings == listed
    b.arrivals()
    assert rest.listings == listed + 1
    b.cancel(job_id)
