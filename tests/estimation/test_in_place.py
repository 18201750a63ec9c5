"""Realistic estimation: jobs measured in place, admitted when measured, reported honestly."""

from __future__ import annotations

import json
import math

import pytest

from chronus_py.engine import replay
from chronus_py.estimates.in_place import InPlaceEstimation
from chronus_py.estimates.report import Phase, Promise, describe
from chronus_py.jobs.model import Cluster, DeadlineOption, Job, JobKind
from chronus_py.jobs.overhead import restart_overhead
from chronus_py.policies import make_policy
from chronus_py.round import advance
from chronus_py.scheduler import Scheduler

HOUR = 3600.0


def job(
    i: int,
    submit: float,
    work: float,
    gpus: int = 1,
    slack: float | None = 3.0,
    iterations: int | None = 10_000,
) -> Job:
    deadlines = () if slack is None else (DeadlineOption(submit + slack * work, 1.0),)
    return Job(
        id=f"j{i}",
        tenant="t",
        gpus=gpus,
        submit=submit,
        kind=JobKind.BEST_EFFORT if slack is None else JobKind.STRICT_SLO,
        deadlines=deadlines,
        duration=work,
        iterations=iterations,
    )


def test_unmeasured_job_is_not_planned_then_measured_in_place_and_guaranteed():
    cluster = Cluster.uniform(2, 8)
    stage = InPlaceEstimation(sigma=0.0, seed=1)
    sched = Scheduler(cluster, make_policy("chronus"), estimator=stage)
    state = sched.submit(job(0, 0.0, 4 * HOUR))
    stage.arrive(state, 4 * HOUR)
    decided = advance(sched, 0.0)
    assert [s.id for s in decided.started] == ["j0"]
    assert state.guaranteed is None and state.estimate == stage.window
    answer = describe(state, 60.0, stage.window)
    assert (answer.phase, answer.promise) == (Phase.MEASURING, Promise.TENTATIVE)
    done_at = (stage.window + state.overhead) / state.speed
    assert answer.answer_by == pytest.approx(done_at)
    stage.started(state, 0.0)
    assert stage.next_time() == pytest.approx(done_at)
    stage.update(sched, done_at)
    advance(sched, done_at)
    assert state.known and state.guaranteed is not None
    assert state.estimate == pytest.approx(4 * HOUR, rel=0.01)  # cv only: sigma 0
    answer = describe(state, done_at, stage.window).to_dict()
    assert answer["phase"] == "estimated" and answer["promise"] == "firm"
    assert answer["low"] < answer["seconds"] < answer["high"]
    assert answer["guaranteed_deadline"] == state.job.deadlines[0].at


def test_measurement_counts_only_progress_past_each_warm_up():
    stage = InPlaceEstimation(sigma=0.0)
    sched = Scheduler(Cluster.uniform(1, 8), make_policy("srtf"), estimator=stage)
    state = sched.submit(job(0, 0.0, HOUR, gpus=8))
    stage.arrive(state, HOUR)
    advance(sched, 0.0)
    stage.started(state, 0.0)
    assert stage.next_time() == pytest.approx(stage.window + restart_overhead(8))


def test_replay_measures_every_long_job_and_short_jobs_never_wait_for_a_pool():
    jobs = [
        job(i, 60.0 * i, w, gpus=g)
        for i, (w, g) in enumerate(
            [(120.0, 1), (2 * HOUR, 4), (200.0, 2), (3 * HOUR, 8), (HOUR, 1)] * 4
        )
    ]
    stage = InPlaceEstimation(sigma=0.1, seed=3)
    result = replay(jobs, Cluster.uniform(4, 8), make_policy("chronus"), estimation=stage)
    states = {s.id: s for s in result.jobs}
    assert all(s.finish is not None for s in states.values())
    short = [s for s in states.values() if s.job.duration < stage.window]
    assert short and all(s.first_start == s.job.submit for s in short)
    long_ = [s for s in states.values() if s.job.duration > stage.window + stage.confirm + 900]
    assert all(s.known for s in long_)
    assert all(s.estimate == s.job.duration for s in long_)  # confirmed online


def test_first_estimates_carry_the_profilers_error():
    stage = InPlaceEstimation(sigma=0.3, seed=0)
    ratios = [stage._measure(job(i, 0.0, HOUR), HOUR)[0] / HOUR for i in range(400)]
    logs = [math.log(r) for r in ratios]
    mean = sum(logs) / len(logs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / len(logs))
    assert sd == pytest.approx(0.3, rel=0.15)


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError):
        InPlaceEstimation(window=0.0)
    with pytest.raises(ValueError):
        InPlaceEstimation(sigma=-0.1)


def test_cli_realistic_estimates_meet_what_oracle_meets_on_a_small_trace(write, capsys):
    from chronus_py.cli import main

    rows = "".join(
        f"j{i},{i * 60},{w},{g},{i * 60 + 3 * w}\n"
        for i, (w, g) in enumerate([(3000, 2), (200, 1), (7200, 4), (900, 1)] * 3)
    )
    path = write("job_id,submit_time,duration,num_gpu,deadline\n" + rows)
    runs = {}
    for mode in ("oracle", "realistic"):
        assert (
            main(
                [
                    "replay",
                    "--trace",
                    str(path),
                    "--nodes",
                    "2",
                    "--estimates",
                    mode,
                    "--estimate-sigma",
                    "0.1",
                    "--json",
                ]
            )
            == 0
        )
        runs[mode] = json.loads(capsys.readouterr().out)
    assert runs["realistic"]["slo_deadline_ratio"] == runs["oracle"]["slo_deadline_ratio"] == 1.0
    assert runs["realistic"]["avg_queueing_delay"] == 0.0  # no pool to wait for


def test_cli_refuses_the_pool_flag_with_realistic_estimates(write, capsys):
    from chronus_py.cli import main

    path = write("job_id,submit_time,duration,num_gpu\na,0,100,1\n")
    assert main(["replay", "--trace", str(path), "--estimates", "realistic", "--profiling"]) == 2
    assert "--profiling" in capsys.readouterr().err
