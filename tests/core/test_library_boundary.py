"""The library's boundary (``chronus_py.jobs.checks``): what a cluster manager hands the
Scheduler and ``run_round`` in Python is checked there, and a mistake is one ArgumentError (or
JobIdError for a job id) naming the argument or the job's field and the value's problem, with
nothing changed; never a TypeError, KeyError or IndexError from inside a round, nor a plan built
on a NaN. Numbers of numpy's types are taken as the ints and floats they stand for."""

from __future__ import annotations

import copy
import json
import math
import pickle
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from chronus_py import (
    Chronus,
    ChronusSettings,
    Cluster,
    DeadlineOption,
    Fixed,
    Job,
    JobKind,
    Node,
    Scheduler,
    run_round,
)
from chronus_py.errors import ArgumentError, InputError, JobIdError
from chronus_py.layers import HostTopology, LayerSpec
from chronus_py.round import choose_size, restore
from placement import CellAllocator


def scheduler(nodes: int = 2, gpus: int = 8, seconds: float = 3600.0) -> Scheduler:
    class Every:
        def estimate(self, job: Job) -> float:
            return seconds

        def uncertainty(self, job: Job) -> float:
            return 0.0

    return Scheduler(
        Cluster.uniform(nodes, gpus), Chronus(ChronusSettings(lease=1200)), estimator=Every()
    )


def be(job_id: str = "a", gpus=2, submit=0.0, **fields) -> Job:
    return Job(job_id, "t", gpus, submit, JobKind.BEST_EFFORT, **fields)


def slo(job_id: str = "a", gpus=2, submit=0.0, at=20000.0, value=1.0) -> Job:
    return Job(job_id, "t", gpus, submit, JobKind.STRICT_SLO, (DeadlineOption(at, value),))


def refused(call, message: str, error: type = ArgumentError):
    with pytest.raises(error) as caught:
        call()
    assert str(caught.value) == message
    assert isinstance(caught.value, InputError)
    return caught.value


@pytest.mark.parametrize(
    "job, message",
    [
        (be(gpus="2"), "job 'a': gpus: expected an integer, got '2'"),
        (be(gpus=2.5), "job 'a': gpus: expected an integer, got 2.5"),
        (be(gpus=None), "job 'a': gpus: expected an integer, got None"),
        (be(gpus=True), "job 'a': gpus: expected an integer, got True"),
        (be(gpus=0), "job 'a': gpus: must be >= 1, got 0"),
        (be(gpus=-2), "job 'a': gpus: must be >= 1, got -2"),
        (be(gpus=17), "job 'a': gpus: 17 is more than the cluster's 16 GPUs"),
        (be(submit=math.nan), "job 'a': submit: expected a finite number, got nan"),
        (be(submit=math.inf), "job 'a': submit: expected a finite number, got inf"),
        (be(submit="0"), "job 'a': submit: expected a number, got '0'"),
        (be(submit=Decimal(0)), "job 'a': submit: expected a number, got Decimal('0')"),
        (be(submit=None), "job 'a': submit: expected a number, got None"),
        (Job(1, "t", 2, 0.0, JobKind.BEST_EFFORT), "job 1: id: expected a non-empty string, got 1"),
        (
            Job("a", None, 2, 0.0, JobKind.BEST_EFFORT),
            "job 'a': tenant: expected a non-empty string, got None",
        ),
        (
            Job("a", "t", 2, 0.0, "urgent"),
            "job 'a': kind: expected a JobKind (strict, soft, best_effort), got 'urgent'",
        ),
        (
            Job("a", "t", 2, 0.0, JobKind.STRICT_SLO),
            "job 'a': deadlines: a strict job needs at least one deadline (tightest first)",
        ),
        (
            be(deadlines=(DeadlineOption(100.0, 1.0),)),
            "job 'a': deadlines: a best-effort job has no deadlines",
        ),
        (slo(at=math.nan), "job 'a': deadlines[0].at: expected a finite number, got nan"),
        (slo(at=math.inf), "job 'a': deadlines[0].at: expected a finite number, got inf"),
        (slo(at="20000"), "job 'a': deadlines[0].at: expected a number, got '20000'"),
        (slo(submit=100.0, at=50.0), "job 'a': deadlines[0].at: must be >= 100, got 50.0"),
        (slo(value=math.nan), "job 'a': deadlines[0].value: expected a finite number, got nan"),
        (slo(value=-1.0), "job 'a': deadlines[0].value: must be >= 0, got -1.0"),
        (
            Job("a", "t", 2, 0.0, JobKind.STRICT_SLO, ((20000.0, 1.0),)),
            "job 'a': deadlines[0]: expected a DeadlineOption, got (20000.0, 1.0)",
        ),
        (
            Job(
                "a",
                "t",
                2,
                0.0,
                JobKind.SOFT_SLO,
                (DeadlineOption(300.0, 1.0), DeadlineOption(200.0, 0.5)),
            ),
            "job 'a': deadlines[1]: must not be before deadlines[0].at (tightest first)",
        ),
        (
            {"id": "a", "gpus": 2},
            "Scheduler.submit: job: expected a Job, got {'gpus': 2, 'id': 'a'}",
        ),
    ],
)
def test_a_bad_job_is_refused_at_submit_naming_its_field(job, message):
    # Before: a str gpus was a TypeError in the overhead model, a float one a TypeError in the
    # allocator, a kind given as an unknown string or a strict job without deadlines an
    # IndexError in admission, a NaN or inf deadline a ValueError/OverflowError in the lease
    # arithmetic; a NaN submit time, 0 or negative GPUs, a job wider than the cluster and a
    # best-effort job with deadlines were taken silently (0 GPUs "waited", a job of 17 GPUs on
    # 16 waited for ever).
    sched = scheduler()
    refused(lambda: sched.submit(job), message)
    assert not sched.jobs and not sched.active and not sched.pending()
    assert run_round(sched, 0.0).decisions == ()


def test_numpy_numbers_and_a_kind_given_as_its_string_are_what_they_stand_for():
    # np.int64 GPUs used to reach the plan's JSON and fail there ("Object of type int64 is not
    # JSON serializable"); "best_effort" as a kind made the job an SLO job (it is not
    # JobKind.BEST_EFFORT) and admission failed on its missing deadline.
    sched = scheduler()
    sched.submit(Job("a", "t", np.int64(2), np.float64(0.0), "best_effort"))
    sched.submit(slo("b", gpus=np.int32(4), at=np.float32(20000.0)))
    plan = run_round(sched, np.float64(0.0))
    held = sched.jobs["a"].job
    assert type(held.gpus) is int and held.kind is JobKind.BEST_EFFORT
    assert type(sched.jobs["b"].job.deadlines[0].at) is float
    out = json.loads(plan.to_json())
    assert [(d["job"], d["action"], d["gpus"]) for d in out["decisions"]] == [
        ("a", "start", 2),
        ("b", "start", 4),
    ]


def test_a_traces_jobs_are_held_as_given_not_copied():
    """A Chronus trace gives every job its iteration count as an int: the checks copied each
    such job (30,746 copies in a replay of philly-mix2, its iterations turned to floats)."""
    sched = scheduler()
    job = Job("a", "t", 2, 0.0, JobKind.STRICT_SLO, deadlines=(DeadlineOption(9000.0, 1.0),))
    job = replace(job, duration=600.0, iterations=4146)
    assert sched.submit(job).job is job


def test_a_job_id_is_taken_once():
    sched = scheduler()
    sched.submit(be("a"))
    refused(lambda: sched.submit(be("a")), "job 'a': id: submitted twice: job ids are unique")
    refused(
        lambda: sched.restore(be("a"), 0.0, placement={"node0": [0, 1]}),
        "job 'a': id: submitted twice: job ids are unique",
    )
    assert len(sched.jobs) == 1 and sched.allocator.free_gpus() == 16


@pytest.mark.parametrize(
    "seconds, message",
    [
        (math.nan, "job 'a': estimate (the estimator's): expected a finite number, got nan"),
        (math.inf, "job 'a': estimate (the estimator's): expected a finite number, got inf"),
        (-5.0, "job 'a': estimate (the estimator's): must be >= 0, got -5.0"),
        ("3600", "job 'a': estimate (the estimator's): expected a number, got '3600'"),
        (None, "job 'a': estimate (the estimator's): expected a number, got None"),
    ],
)
def test_an_estimate_that_is_no_number_of_seconds_is_refused(seconds, message):
    # Before: NaN and negative estimates were planned on silently (NaN remaining work ranks
    # anywhere), a NaN or inf one of an SLO job was a ValueError/OverflowError in the lease
    # arithmetic, a string one a TypeError in JobState.
    sched = Scheduler(Cluster.uniform(2, 8), Chronus(), estimator=Fixed({"a": seconds}))
    refused(lambda: sched.submit(slo("a")), message)
    assert not sched.jobs


def test_a_job_fixed_has_no_estimate_for_is_named():
    sched = Scheduler(Cluster.uniform(2, 8), Chronus(), estimator=Fixed({"b": 10.0}))
    refused(lambda: sched.submit(be("a")), "Fixed: seconds: no estimate for job 'a'", JobIdError)


def test_without_an_estimator_a_job_needs_its_duration():
    # The default estimator is the oracle, which read a missing duration as 0 s of work: every
    # job planned as instantly done.
    sched = Scheduler(Cluster.uniform(2, 8), Chronus())
    error = refused(
        lambda: sched.submit(be("a")),
        "job 'a': duration: no runtime: the scheduler was made without an estimator, so it "
        "takes the job's duration (Oracle); give one, or Scheduler(..., "
        "estimator=Fixed({id: seconds}))",
    )
    assert error.field == "duration"
    assert sched.submit(be("b", duration=600.0)).estimate == 600.0


def test_reports_about_a_job_not_held_say_why():
    # Before: a bare KeyError('a') from finish, withdraw and report_progress alike.
    sched = scheduler()
    sched.submit(be("a"))
    sched.submit(be("w", gpus=16))
    run_round(sched, 0.0)
    refused(
        lambda: sched.finish("w", 10.0),
        "Scheduler.finish: job_id: 'w' is pending, not running (withdraw() ends a job that waits)",
        JobIdError,
    )
    sched.finish("a", 10.0)
    for call, name in (
        (lambda: sched.finish("a", 20.0), "finish"),
        (lambda: sched.report_progress("a", 5.0, 20.0), "report_progress"),
        (lambda: sched.withdraw("a", 20.0), "withdraw"),
        (lambda: sched.reestimate("a", 5.0, 20.0), "reestimate"),
    ):
        refused(call, f"Scheduler.{name}: job_id: 'a' already ended (at 10)", JobIdError)
    refused(
        lambda: sched.finish("zz", 20.0),
        "Scheduler.finish: job_id: 'zz' was never submitted",
        JobIdError,
    )
    with pytest.raises(KeyError):  # what these calls raised before, for callers catching it
        sched.report_progress("zz", 1.0, 20.0)


def test_an_ended_job_can_be_forgotten_and_only_an_ended_one():
    """``forget`` is for a caller that keeps ended jobs elsewhere (``chronus serve``'s
    database): the record goes, the job is then as never submitted, and the next job's ``seq``
    still follows every job ever taken in."""
    sched = scheduler()
    sched.submit(be("a"))
    sched.submit(be("w", gpus=16))
    run_round(sched, 0.0)
    refused(
        lambda: sched.forget("a"),
        "Scheduler.forget: job_id: 'a' has not ended (withdraw() ends a job)",
        JobIdError,
    )
    sched.finish("a", 10.0)
    sched.withdraw("w", 10.0)
    sched.forget("a")
    sched.forget("w")
    assert not sched.jobs and not sched.active
    refused(
        lambda: sched.forget("a"), "Scheduler.forget: job_id: 'a' was never submitted", JobIdError
    )
    assert sched.submit(be("b")).seq == 2
    assert sched.submit(be("a")).seq == 3  # its uniqueness is the caller's to keep, once forgotten


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda s: s.report_progress("a", math.nan, 10.0),
            "job 'a': work_done: expected a finite number, got nan",
        ),
        (
            lambda s: s.report_progress("a", -10.0, 10.0),
            "job 'a': work_done: must be >= 0, got -10.0",
        ),
        (
            lambda s: s.report_progress("a", "10", 10.0),
            "job 'a': work_done: expected a number, got '10'",
        ),
        (
            lambda s: s.report_progress("a", 10.0, None),
            "Scheduler.report_progress: now: expected a number, got None",
        ),
        (
            lambda s: s.finish("a", math.nan),
            "Scheduler.finish: now: expected a finite number, got nan",
        ),
        (
            lambda s: s.reestimate("a", math.nan, 10.0),
            "job 'a': estimate: expected a finite number, got nan",
        ),
        (lambda s: s.firm_estimate("a", -1.0, 10.0), "job 'a': estimate: must be >= 0, got -1.0"),
        (
            lambda s: s.run_began("a", "5", 10.0),
            "Scheduler.run_began: at: expected a number, got '5'",
        ),
    ],
)
def test_a_bad_report_is_refused_and_changes_nothing(call, message):
    # Before: a NaN or negative progress was taken (the job's remaining work became NaN or
    # grew), a str one a TypeError; a NaN finish time was written down as the job's end.
    sched = scheduler()
    sched.submit(be("a"))
    run_round(sched, 0.0)
    before = (sched.jobs["a"].service, sched.jobs["a"].estimate, sched.jobs["a"].run_since)
    refused(lambda: call(sched), message)
    assert (sched.jobs["a"].service, sched.jobs["a"].estimate, sched.jobs["a"].run_since) == before
    assert "a" in sched.running


@pytest.mark.parametrize(
    "now, message",
    [
        (math.nan, "run_round: now: expected a finite number, got nan"),
        ("0", "run_round: now: expected a number, got '0'"),
        (None, "run_round: now: expected a number, got None"),
        (Decimal(0), "run_round: now: expected a number, got Decimal('0')"),
    ],
)
def test_a_round_needs_a_number_for_now(now, message):
    sched = scheduler()
    sched.submit(be("a"))
    refused(lambda: run_round(sched, now), message)
    assert not sched.running


def test_time_does_not_go_back_between_rounds():
    # Before: a round at 500 after one at 1000 planned silently for the past.
    sched = scheduler()
    sched.submit(slo("a"))
    run_round(sched, 1000.0)
    refused(
        lambda: run_round(sched, 500.0), "run_round: now: 500 is before the last round's now (1000)"
    )
    assert run_round(sched, 1000.0).now == 1000.0


def test_times_in_a_refusal_are_exact_unix_times_too():
    # Before: "1.79601e+09 is before the last round's now (1.79601e+09)", six digits of each.
    sched = scheduler()
    sched.submit(be("a", submit=1_796_012_000.0))
    run_round(sched, 1_796_012_345.25)
    refused(
        lambda: run_round(sched, 1_796_012_300.5),
        "run_round: now: 1796012300.5 is before the last round's now (1796012345.25)",
    )


def test_a_round_before_a_job_arrives_is_refused():
    # Before: the job started at 0, 5000 s before it was submitted.
    sched = scheduler()
    sched.submit(be("a", submit=5000.0))
    refused(
        lambda: run_round(sched, 0.0),
        "run_round: now: 0 is before job 'a''s submit time (5000): submit a job when it arrives",
    )
    assert not sched.running
    assert [d.action for d in run_round(sched, 5000.0).decisions] == ["start"]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            {"placement": {"node0": ["0", "1"]}},
            "job 'a': placement['node0']: expected an integer, got '0'",
        ),
        (
            {"placement": {"node0": 0}},
            "job 'a': placement['node0']: expected a list of GPU indices, got 0",
        ),
        (
            {"placement": [("node0", [0, 1])]},
            "job 'a': placement: expected a mapping of node -> GPU indices, got [('node0', [...])]",
        ),
        ({"placement": {"zz": [0, 1]}}, "job 'a': placement: unknown node 'zz'"),
        ({"work_done": -100}, "job 'a': work_done: must be >= 0, got -100.0"),
        ({"work_done": "100"}, "job 'a': work_done: expected a number, got '100'"),
        (
            {"guaranteed": (20000.0, 1.0)},
            "job 'a': guaranteed: expected one of its "
            "DeadlineOptions, got (20000.0, 1.0) (its deadlines: 20000)",
        ),
    ],
)
def test_a_bad_restore_is_refused_and_changes_nothing(kwargs, message):
    # Before: str GPU indices were a TypeError in the allocator, a tuple guarantee an
    # AttributeError, a negative work_done was taken (more work left than the job has).
    sched = scheduler()
    refused(lambda: sched.restore(slo("a"), 0.0, **kwargs), message)
    assert not sched.jobs and sched.allocator.free_gpus() == 16


def test_a_refused_restore_leaves_no_trace_for_the_next_round():
    sched = scheduler()
    with pytest.raises(ArgumentError, match="unknown node 'zz'"):
        sched.restore(be("late", submit=5000.0), 5000.0, placement={"zz": [0, 1]})
    assert run_round(sched, 0.0).decisions == ()  # no job submitted at 5000 is held


def test_numpy_gpu_indices_restore_and_reach_the_json():
    sched = scheduler()
    restore(sched, be("a"), 0.0, placement={"node0": np.array([0, 1])})
    out = json.loads(run_round(sched, 0.0).to_json())
    assert out["decisions"][0]["placement"] == {"node0": [0, 1]}


@pytest.mark.parametrize(
    "cluster, message",
    [
        (Cluster(()), "Scheduler: cluster.nodes: has no nodes"),
        (
            Cluster([Node("n0", 8)]),
            "Scheduler: cluster.nodes: expected a tuple of Node, got [Node(name='n0', gpus=8)]",
        ),
        (Cluster((Node("n0", -1),)), "Scheduler: cluster.nodes[0].gpus: must be >= 0, got -1"),
        (
            Cluster((Node("n0", "8"),)),
            "Scheduler: cluster.nodes[0].gpus: expected an integer, got '8'",
        ),
        (
            Cluster((Node("n0", 8), Node("n0", 8))),
            "Scheduler: cluster.nodes[1].name: node 'n0' appears twice",
        ),
        ("2x8", "Scheduler: cluster: expected a Cluster, got '2x8'"),
    ],
)
def test_a_bad_cluster_is_refused_when_the_scheduler_is_made(cluster, message):
    # Before: an empty cluster was "max() arg is an empty sequence", str or float GPU counts a
    # TypeError in the allocator, -1 GPUs accepted.
    refused(lambda: Scheduler(cluster, Chronus()), message)


def test_a_policy_of_the_wrong_kind_is_refused():
    # Before: Scheduler(cluster, "chronus") was taken and failed at the first round with an
    # AttributeError.
    refused(
        lambda: Scheduler(Cluster.uniform(1, 8), "chronus"),
        "Scheduler: policy: expected an object with prepare, key, keys methods, got 'chronus'",
    )


RACKS = Path(__file__).resolve().parents[1] / "placement" / "configs" / "rack-2x2.yaml"
HOSTS = Path(__file__).resolve().parents[2] / "examples" / "hosts"


def one_host(job_gpus: int = 4) -> tuple[Scheduler, HostTopology]:
    host = HostTopology.from_yaml(HOSTS / "2socket-8gpu.yaml")
    sched = Scheduler(Cluster((Node(host.name, 8),)), Chronus(), estimator=Fixed({"h": 600.0}))
    sched.submit(be("h", gpus=job_gpus))
    return sched, host


@pytest.mark.parametrize(
    "hosts, layers, message",
    [
        (
            {"gpu-2s8g-01": "2socket-8gpu.yaml"},
            {},
            "run_round: hosts['gpu-2s8g-01']: expected a "
            "HostTopology (HostTopology.from_yaml(PATH)), got '2socket-8gpu.yaml'",
        ),
        ({"nope": "HOST"}, {}, "run_round: hosts['nope']: 'nope' is no node of the cluster"),
        (
            {"gpu-2s8g-01": "SMALL"},
            {},
            "run_round: hosts['gpu-2s8g-01']: host gpu-1s4g-01 models "
            "no GPU 4, and the node has 8 GPUs",
        ),
        (
            ["gpu-2s8g-01"],
            {},
            "run_round: hosts: expected a mapping of node -> ..., got ['gpu-2s8g-01']",
        ),
        (
            "HOSTS",
            {"h": {"cgroup": "x"}},
            "run_round: layers['h']: expected a LayerSpec, got {'cgroup': 'x'}",
        ),
        (
            "HOSTS",
            {"h": LayerSpec(preset="nope")},
            "run_round: layers['h']: unknown preset 'nope' (known: pytorch, nccl, dataloader)",
        ),
        (
            "HOSTS",
            {"h": LayerSpec(thread_names={"critical": "nccl"})},
            "run_round: layers['h']: thread_names.critical must be a list of names",
        ),
    ],
)
def test_bad_host_models_or_layer_wishes_are_refused_before_the_round(hosts, layers, message):
    # Before: a path for a host or a dict for a wish was an AttributeError, a host for a node
    # the cluster lacks (a typo) or a list of hosts gave no config and no word, and a host
    # short of the node's GPUs, a bad preset or thread names an error raised while emitting,
    # after the round had started its jobs: the scheduler changed, and no plan said so.
    sched, host = one_host(8)
    small = HostTopology.from_yaml(HOSTS / "1socket-4gpu.yaml")
    named = {"HOST": host, "SMALL": small}
    if hosts == "HOSTS":
        hosts = {host.name: host}
    elif isinstance(hosts, dict):
        hosts = {node: named.get(value, value) for node, value in hosts.items()}
    refused(lambda: run_round(sched, 0.0, hosts=hosts, layers=layers), message)
    assert not sched.running and sched.last_round is None
    plan = run_round(sched, 0.0, hosts={host.name: host}, layers={"h": LayerSpec()})
    assert sorted(plan.host_layers) == [host.name]


def test_a_job_whose_tenant_is_no_virtual_cluster_says_it_can_never_be_placed():
    # Before: "32 GPUs free, but no placement holds its gang (e.g. its tenant's cells are
    # full)", round after round, for a job no cell of the cluster will ever take.
    allocator = CellAllocator(RACKS)
    cluster = Cluster(tuple(Node(n.name, n.gpus) for n in allocator.nodes()))
    sched = Scheduler(cluster, Chronus(), allocator=allocator, estimator=Fixed({"x": 100.0}))
    sched.submit(Job("x", "vcC", 2, 0.0, JobKind.BEST_EFFORT))
    (decision,) = run_round(sched, 0.0).decisions
    assert decision.action == "wait"
    assert decision.reason.endswith(
        "its tenant 'vcC' is no virtual cluster of the cell allocator (have: vcA, vcB), so it "
        "can never be placed"
    )


ELASTIC = dict(
    id="e",
    tenant="t",
    gpus=8,
    submit=0.0,
    kind=JobKind.STRICT_SLO,
    deadlines=(DeadlineOption(20000.0, 1.0),),
    iterations=100000.0,
    batch=256,
    sizes=(1, 2, 4, 8),
    rates=(2.0, 3.8, 7.0, 12.0),
)


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"sizes": (8, 4, 2, 1)}, "job 'e': sizes: must be ascending, got [8, 4, 2, 1]"),
        ({"rates": (0.0, 3.8, 7.0, 12.0)}, "job 'e': rates[0]: must be > 0"),
        (
            {"rates": (math.nan, 3.8, 7.0, 12.0)},
            "job 'e': rates[0]: expected a finite number, got nan",
        ),
        (
            {"iterations": None},
            "job 'e': iterations: an elastic job (with rates) needs its iterations",
        ),
        (
            {"sizes": (32, 64, 128, 256), "gpus": 32},
            "job 'e': sizes: its smallest size, 32, is more than the cluster's 16 GPUs",
        ),
    ],
)
def test_an_elastic_job_with_a_bad_curve_is_refused_when_sized(fields, message):
    # Before: a zero rate was a ZeroDivisionError in Job.seconds, a NaN one a ValueError in the
    # lease arithmetic, missing iterations a TypeError, unsorted sizes were sized silently.
    sched = scheduler()
    sched.select(0.0)
    refused(lambda: choose_size(sched, Job(**{**ELASTIC, **fields}), 0.0), message)


def test_an_elastic_job_is_sized_and_runs_at_that_size():
    sched = Scheduler(Cluster.uniform(2, 8), Chronus(), estimator=Fixed({}))
    sched.select(0.0)
    job = Job(**ELASTIC)
    size = choose_size(sched, job, 0.0)
    assert size in job.sizes
    sched.estimator.seconds["e"] = job.seconds(size)
    sched.submit(replace(job, gpus=size))
    (decision,) = run_round(sched, 0.0).decisions
    assert (decision.action, decision.gpus) == ("start", size)
    refused(
        lambda: sched.submit(replace(job, id="f", gpus=32, sizes=(1, 32), rates=(1.0, 9.0))),
        "job 'f': gpus: 32 is more than the cluster's 16 GPUs",
    )


def test_a_scheduler_copies_and_pickles_with_its_allocator_and_plan():
    """What the class docstring promises: a round tried on a copy leaves the original as it was,
    and a pickled scheduler decides as the original does."""
    allocator = CellAllocator(RACKS)
    cluster = Cluster(tuple(Node(n.name, n.gpus) for n in allocator.nodes()))
    sched = Scheduler(
        cluster, Chronus(), allocator=allocator, estimator=Fixed({"a": 600.0, "b": 900.0})
    )
    sched.submit(Job("a", "vcA", 8, 0.0, JobKind.STRICT_SLO, (DeadlineOption(5000.0, 1.0),)))
    run_round(sched, 0.0)
    sched.submit(Job("b", "vcB", 4, 10.0, JobKind.BEST_EFFORT))
    trial = copy.deepcopy(sched)
    tried = run_round(trial, 10.0)
    assert "b" in trial.running and "b" not in sched.running
    assert sched.allocator.free_gpus() == 24 and trial.allocator.free_gpus() == 20
    thawed = pickle.loads(pickle.dumps(sched))
    assert run_round(thawed, 10.0).to_json() == tried.to_json() == run_round(sched, 10.0).to_json()


def test_one_chronus_plans_for_one_scheduler():
    # Before: the second scheduler's round planned on the first cluster's 16 GPUs and then
    # failed with KeyError 'a' (a job of the first scheduler) while assembling its plan, its
    # jobs already started.
    policy = Chronus()
    first = Scheduler(Cluster.uniform(2, 8), policy, estimator=Fixed({"a": 3600.0}))
    first.submit(slo("a", gpus=16, at=5000.0))
    run_round(first, 0.0)
    second = Scheduler(Cluster.uniform(8, 8), policy, estimator=Fixed({"b": 3600.0}))
    second.submit(slo("b", gpus=16, at=5000.0))
    refused(
        lambda: run_round(second, 0.0),
        "Chronus: policy: already plans for another Scheduler: give each Scheduler its own "
        "Chronus(...) (a copy.deepcopy of the scheduler copies its policy too)",
    )
    assert not second.running and "b" in second.active
    assert [d.action for d in run_round(first, 10.0).decisions] == ["continue"]


def test_a_round_is_not_planned_before_what_was_reported():
    # The README's flow, one round too many: j1 was reported finished at 6900, so a round at
    # 600 would give its GPUs away 6300 s before they were free. Before, it was planned.
    sched = scheduler()
    sched.restore(slo("j1"), 0.0, placement={"node0": [0, 1]})
    sched.report_progress("j1", 900.0, 300.0)
    run_round(sched, 300.0)
    sched.finish("j1", 6900.0)
    refused(
        lambda: run_round(sched, 600.0),
        "run_round: now: 600 is before job 'j1' was finished (at 6900): time does not go back",
    )
    assert run_round(sched, 6900.0).decisions == ()


class Meddling(Chronus):
    """A policy that calls its scheduler in the middle of a round, as another thread of the
    cluster manager would: the round's own thread, so the test does not depend on timing."""

    def __init__(self, call):
        super().__init__()
        self.call = call

    def prepare(self, view):
        self.call()
        return super().prepare(view)


@pytest.mark.parametrize(
    "call, source",
    [
        (lambda s: s.submit(be("x")), "Scheduler.submit"),
        (lambda s: s.finish("a", 0.0), "Scheduler.finish"),
        (lambda s: s.report_progress("a", 1.0, 0.0), "Scheduler.report_progress"),
        (lambda s: s.withdraw("a", 0.0), "Scheduler.withdraw"),
        (lambda s: run_round(s, 0.0), "run_round"),
    ],
)
def test_a_call_made_while_a_round_runs_is_refused(call, source):
    # Before: taken, in the middle of the walk: a job submitted or finished while the round
    # sorted and placed the queue could be placed on GPUs it had just given away.
    holder = []
    sched = Scheduler(
        Cluster.uniform(2, 8),
        Meddling(lambda: call(holder[0])),
        estimator=Fixed({"a": 600.0, "x": 600.0}),
    )
    holder.append(sched)
    sched.submit(be("a"))
    with pytest.raises(ArgumentError) as caught:
        run_round(sched, 0.0)
    assert str(caught.value).startswith(f"{source}: ")
    assert "a Scheduler takes one call at a time" in str(caught.value)
    assert not sched.in_round
    sched.policy.call = lambda: None
    assert [d.action for d in run_round(sched, 0.0).decisions] == ["start"]
