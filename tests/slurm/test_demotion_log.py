"""The numbers behind a withdrawn guarantee in the service log (``rounds.advance``): what a
demoted Slurm job that never started is explained by (issue 26). No Slurm needed."""

from __future__ import annotations

import json
import logging

from chronus_py.jobs.model import Cluster, DeadlineOption, Job, JobKind
from chronus_py.service import rounds


def two_guaranteed():
    """A 4-GPU cluster with two guaranteed 4-GPU jobs due at 4,000 s: "b" runs, "a" waits."""
    s = rounds.scheduler_for(
        rounds.SchedulerSettings(), Cluster.uniform(1, 4), estimates={"a": 600.0, "b": 1000.0}
    )
    deadline = (DeadlineOption(4000.0, 1.0),)
    for job_id, work in (("b", 1000.0), ("a", 600.0)):
        job = Job(job_id, "t", 4, 0.0, JobKind.SOFT_SLO, deadlines=deadline, duration=work)
        assert rounds.admit(s, job, 0.0)[1].decision == rounds.GUARANTEED
        rounds.advance(s, 0.0)
    waiting = rounds.active_job(s, "a")
    return s, waiting


def test_a_demotion_logs_its_booked_lease_and_latency_charge(caplog):
    s, waiting = two_guaranteed()
    lease = rounds.lease_report(s)
    booked = lease.lease_plan["a"]
    waiting.overhead = 3000.0  # a start latency grown past what its deadline leaves
    with caplog.at_level(logging.INFO, logger="chronus.serve"):
        rounds.advance(s, lease.lease_end)
    assert waiting.guaranteed is None
    [line] = [
        json.loads(r.getMessage()) for r in caplog.records if "demotion_numbers" in r.getMessage()
    ]
    assert line["job"] == "a" and not line["running"] and line["booked"] == list(booked)
    assert line["deadline"] == 4000.0 and line["remaining"] == 3600.0
    assert line["latency_charge"] == 3000.0 - line["restart_overhead"]


def test_a_child_replans_demotion_logs_its_numbers_at_the_next_round(caplog):
    """A lease re-plan computed in a child is committed between rounds; the guarantee it drops
    reaches the job's record in the next round's select, which logs the numbers."""
    s, waiting = two_guaranteed()
    end = rounds.lease_report(s).lease_end
    waiting.overhead = 3000.0
    replan = rounds.start_replan(s, end)
    rounds.commit_replan(s, replan, rounds.replan_result(replan, s), end)
    with caplog.at_level(logging.INFO, logger="chronus.serve"):
        rounds.advance(s, end, committed=True)
    assert waiting.guaranteed is None
    [line] = [
        json.loads(r.getMessage()) for r in caplog.records if "demotion_numbers" in r.getMessage()
    ]
    assert line["job"] == "a" and line["remaining"] == 3600.0 and not line["running"]
