"""One overhead interface, two models by name, either with any trace: the elastic pause on a
rigid replay, the Chronus artifact's restart on an elastic one (finish times by hand)."""

from __future__ import annotations

import pytest

from chronus_py.engine import replay
from chronus_py.errors import InputError
from chronus_py.jobs.model import Cluster, Job, JobKind
from chronus_py.jobs.overhead import PauseOverhead, make_overhead, restart_overhead
from chronus_py.policies import FIFO
from chronus_py.policies.elastic import ElasticEDF
from tests.elastic.helpers import job as elastic_job
from tests.elastic.helpers import replay as elastic_replay


def rigid(id: str, submit: float, duration: float, gpus: int = 1) -> Job:
    return Job(id, "t", gpus, submit, JobKind.BEST_EFFORT, duration=duration)


def test_pause_model_on_a_rigid_trace_charges_its_start_seconds():
    # A alone on 4 GPUs: 2 s + 27 s per start (4 GPUs < 256) before its 100 s; B queues behind.
    jobs = [rigid("A", 0, 100, gpus=4), rigid("B", 10, 50, gpus=4)]
    result = replay(jobs, Cluster.uniform(1, 4), FIFO(), overhead="pause")
    done = {s.id: s.finish for s in result.jobs}
    assert done == {"A": 129, "B": 129 + 29 + 50}


def test_the_default_rigid_model_is_the_artifacts_restart():
    result = replay([rigid("A", 0, 100, gpus=4)], Cluster.uniform(1, 4), FIFO())
    assert result.jobs[0].finish == 100 + restart_overhead(4) == 100 + 90


def test_restart_model_on_an_elastic_trace_pauses_every_start_and_resize():
    # alone on 4 GPUs at 4 it/s: one start of 0.5 min x (1 + log2 4) = 90 s, then 100 it / 4 it/s
    result = elastic_replay(
        [elastic_job("a", 0, 1000, 100)], ElasticEDF(), overhead="chronus-restart"
    )
    (a,) = result.jobs
    assert a.finish == pytest.approx(90 + 25)
    assert a.overhead_seconds == pytest.approx(90)


def test_models_by_name_and_scale():
    assert make_overhead("pause") == PauseOverhead()
    assert make_overhead("chronus-restart", 2.0).worst(1, 8) == 2 * 30
    assert make_overhead("pause", 0).seconds(8, 8, from_stopped=True, known_gpus=False) == 0
    with pytest.raises(ValueError, match="have: chronus-restart, pause"):
        make_overhead("free")
    with pytest.raises(ValueError, match=">= 0"):
        make_overhead("pause", -1)


def test_an_unknown_model_name_is_one_clear_error():
    with pytest.raises(InputError, match="--overhead"):
        replay([rigid("A", 0, 100)], Cluster.uniform(1, 1), FIFO(), overhead="free")
