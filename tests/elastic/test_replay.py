"""Hand-computed elastic replays: throughput progress, overhead charging, admission."""

from __future__ import annotations

import pytest

from chronus_py.jobs.overhead import PauseOverhead
from chronus_py.policies.elastic import ElasticChronus, ElasticEDF, ElasticFlowStyle
from tests.elastic.helpers import by_id, job, replay


@pytest.mark.parametrize("policy", [ElasticEDF, ElasticChronus, ElasticFlowStyle])
def test_progress_is_throughput_at_the_size_after_the_start_overhead(policy):
    # alone on 4 GPUs: starts at its largest size, pauses 2 + 27 s, then 100 it / 4 it/s
    runs = by_id(replay([job("a", 0, 1000, 100)], policy()))
    assert runs["a"].finish == pytest.approx(29 + 25)
    assert runs["a"].overhead_seconds == pytest.approx(29)


def test_overhead_shrink_onto_known_gpus_pays_the_base_only():
    # a at 4 GPUs from 0 (paused to 29); b (rigid 2 GPUs, earlier deadline) arrives at 100:
    # a shrinks to 2 onto its own GPUs (2 s), b starts (29 s) and runs 100 it at 1 it/s to 229;
    # a grows back onto GPUs it already used (2 s) and finishes its last 462 it at 4 it/s.
    a = job("a", 0, 5000, 1000)
    b = job("b", 100, 300, 100, sizes=(2,), rates=(1.0,))
    runs = by_id(replay([a, b], ElasticEDF()))
    assert runs["b"].finish == pytest.approx(229)
    done_by_229 = 71 * 4 + (229 - 102) * 2
    assert runs["a"].finish == pytest.approx(231 + (1000 - done_by_229) / 4)
    assert runs["a"].overhead_seconds == pytest.approx(29 + 2 + 2)
    assert runs["a"].resizes == 2 and runs["a"].starts == 1


def test_growing_onto_new_gpus_pays_per_doubling():
    o = PauseOverhead()
    assert o.seconds(8, 64, from_stopped=False, known_gpus=False) == pytest.approx(2 + 2 * 4)
    assert o.seconds(8, 512, from_stopped=True, known_gpus=False) == pytest.approx(7 + 47)
    assert o.seconds(8, 64, from_stopped=False, known_gpus=True) == pytest.approx(2)
    assert PauseOverhead(scale=0).seconds(8, 64, from_stopped=True, known_gpus=False) == 0


@pytest.mark.parametrize("policy", [ElasticChronus, ElasticFlowStyle])
def test_admission_keeps_an_earlier_guarantee(policy):
    # a needs the whole cluster for 1000 s by 1200; b (feasible alone) would push it late
    a = job("a", 0, 1200, 1000, sizes=(4,), rates=(1.0,))
    b = job("b", 70, 800, 500, sizes=(4,), rates=(1.0,))
    runs = by_id(replay([a, b], policy()))
    assert runs["a"].guaranteed and runs["a"].finish <= 1200
    assert not runs["b"].guaranteed and (runs["b"].finish is None or runs["b"].finish > 800)


def test_batch_admission_declines_a_feasible_job_that_per_job_admission_accepts():
    # c fits easily; d arrives in the same 60 s slot and cannot make its deadline at all
    c = job("c", 0, 1000, 100, sizes=(1,), rates=(1.0,))
    d = job("d", 5, 100, 1000, sizes=(1,), rates=(1.0,))
    ef = by_id(replay([c, d], ElasticFlowStyle()))
    assert not ef["c"].guaranteed and ef["c"].finish is None
    ours = by_id(replay([c, d], ElasticChronus()))
    assert ours["c"].guaranteed and ours["c"].finish <= 1000
    assert not ours["d"].guaranteed


def test_chronus_does_not_grow_a_job_when_the_time_saved_does_not_pay_the_overhead():
    # a (elastic) and b (rigid 2 GPUs) share 4 GPUs from 0: a runs on 2 at 2 it/s after its
    # 29 s start. b ends at 129 with a 30 it from done: 4 GPUs would save 7.5 s, less than
    # 3 x the 8 s resize, so a stays on 2 and ends at 144 without a resize.
    a = job("a", 0, 5000, 230)
    b = job("b", 0, 10000, 100, sizes=(2,), rates=(1.0,))
    runs = by_id(replay([a, b], ElasticChronus()))
    assert runs["b"].finish == pytest.approx(129)
    assert runs["a"].finish == pytest.approx(144) and runs["a"].resizes == 0
