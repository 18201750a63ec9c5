"""One registry, one entry point: elastic policies are built by name from the one
ChronusSettings and replay rigid jobs too; a scheduling round refuses them by name."""

from __future__ import annotations

import pytest

from chronus_py.engine import replay, summarize, write_jobs_csv
from chronus_py.errors import InputError
from chronus_py.jobs.model import Cluster, DeadlineOption, Job, JobKind
from chronus_py.policies import ELASTIC, POLICIES, make_policy
from chronus_py.scheduler import Scheduler


def rigid(id: str, submit: float, duration: float, gpus: int, deadline: float) -> Job:
    return Job(
        id, "t", gpus, submit, JobKind.STRICT_SLO, (DeadlineOption(deadline, 1.0),), duration
    )


def test_elastic_policies_are_registered_with_the_rigid_ones():
    assert set(ELASTIC) <= set(POLICIES)
    assert make_policy("elastic-edf").elastic


def test_lease_and_headroom_are_the_one_settings_with_elastic_defaults():
    default = make_policy("elastic-chronus")
    assert (default.slot, default.headroom, default.backend) == (60.0, 0.0, "greedy")
    chosen = make_policy("elastic-chronus", {"lease": 600, "headroom": 0.5, "backend": "cpsat"})
    assert (chosen.slot, chosen.headroom, chosen.backend) == (600.0, 0.5, "cpsat")
    flow = make_policy("elasticflow", {"lease": 120})
    assert flow.slot == flow.arrival_window == 120.0
    with pytest.raises(InputError, match="headroom"):
        make_policy("elastic-chronus", {"headroom": 2})
    with pytest.raises(InputError, match="no option 'guard'"):
        make_policy("elasticflow", {"guard": 60})


def test_headroom_keeps_a_share_of_the_elastic_plan_unpromised():
    # one rigid 4-GPU job on 4 GPUs: with half the plan kept free it cannot be promised, but
    # still runs on the idle GPUs and finishes (29 s start pause, then 100 s)
    jobs = [rigid("a", 0, 100, 4, 1000)]
    for headroom, promised in ((0.0, True), (0.5, False)):
        policy = make_policy("elastic-chronus", {"headroom": headroom})
        (a,) = replay(jobs, Cluster.uniform(1, 4), policy).jobs
        assert (a.was_guaranteed is not None) is promised
        assert a.finish == pytest.approx(129)


def test_a_rigid_trace_replays_under_an_elastic_policy_with_one_summary(tmp_path):
    jobs = [rigid("a", 0, 100, 2, 200), rigid("b", 10, 100, 4, 150)]
    result = replay(jobs, Cluster.uniform(1, 4), make_policy("elastic-edf"))
    done = {s.id: s.finish for s in result.jobs}
    # a starts at 0 (29 s pause) on 2 GPUs; b (earlier deadline) needs all 4: a is stopped at 10
    # and resumes after b (10 + 29 + 100 = 139), then pays its start again: 139 + 29 + 100 - 0
    assert done == {"b": pytest.approx(139), "a": pytest.approx(268)}
    metrics = summarize(result, trace="t", dropped={})
    assert metrics["slo_deadline_ratio"] == 0.5 and metrics["restarts"] == 3
    write_jobs_csv(result.jobs, tmp_path / "jobs.csv", elastic=True)
    assert (
        (tmp_path / "jobs.csv")
        .read_text()
        .splitlines()[0]
        .startswith("job_id,submit,first_start,finish,gpus,kind,deadlines")
    )


def test_a_scheduling_round_refuses_an_elastic_policy_by_name():
    with pytest.raises(InputError, match="elastic-chronus"):
        Scheduler(Cluster.uniform(1, 4), make_policy("elastic-chronus"))


def test_a_round_plans_any_job_in_seconds_at_one_of_its_sizes():
    """``Job.seconds`` and ``Job.up_to``: what a round (``chronus plan``, the service) reads of
    a job with a curve, the same calls as of a rigid job (rate 1 at its one size)."""
    curve = Job(
        "e",
        "t",
        8,
        0.0,
        JobKind.BEST_EFFORT,
        iterations=1200.0,
        sizes=(2, 4, 8),
        rates=(1.0, 1.5, 3.0),
    )
    assert (curve.seconds(2), curve.seconds(8), curve.seconds(4, work=300.0)) == (
        1200.0,
        400.0,
        200.0,
    )
    fits = curve.up_to(5)
    assert (fits.sizes, fits.rates, fits.gpus) == ((2, 4), (1.0, 1.5), 4)
    assert curve.up_to(8) is curve and curve.up_to(1) is None
    plain = rigid("r", 0.0, 600.0, 4, 1000.0)
    assert (plain.seconds(4), plain.seconds(4, work=90.0)) == (600.0, 90.0)
    assert plain.up_to(4) is plain and plain.up_to(3) is None
