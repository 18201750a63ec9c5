"""Learning how wrong first estimates are, and padding the plans of jobs not observed yet."""

from __future__ import annotations

import numpy as np
import pytest

from chronus_py.estimates import EstimateErrors
from chronus_py.jobs.model import Cluster, DeadlineOption, Job, JobKind
from chronus_py.jobs.state import JobState
from chronus_py.policies import SRTF
from chronus_py.scheduler import Scheduler
from chronus_py.selector import ChronusSettings, LeaseSelector


def be(id, duration):
    return Job(id=id, tenant="t", gpus=1, submit=0.0, kind=JobKind.BEST_EFFORT, duration=duration)


def test_no_pad_without_evidence_then_the_upper_quantile_of_underestimates():
    errors = EstimateErrors(quantile=0.95, min_samples=20)
    for ratio in np.linspace(0.8, 1.2, 19):
        errors.record(100.0, 100.0 * ratio)
    assert errors.pad() == 0.0
    errors.record(100.0, 120.0)
    assert errors.pad() == pytest.approx(
        np.quantile(list(np.linspace(0.8, 1.2, 19)) + [1.2], 0.95) - 1
    )
    assert 0.17 < errors.pad() < 0.2


def test_cut_is_the_lower_quantile_of_overestimates():
    errors = EstimateErrors(quantile=0.95, window=20, min_samples=20)
    ratios = np.linspace(0.6, 1.4, 20)
    for ratio in ratios[:-1]:
        errors.record(100.0, 100.0 * ratio)
    assert errors.cut() == 0.0
    errors.record(100.0, 100.0 * ratios[-1])
    assert errors.cut() == pytest.approx(1.0 - np.quantile(ratios, 0.05))
    for _ in range(20):
        errors.record(100.0, 300.0)
    assert errors.cut() == 0.0  # window of underestimates only


def test_overestimates_need_no_pad_and_the_window_forgets_old_errors():
    errors = EstimateErrors(window=30, min_samples=5)
    for _ in range(30):
        errors.record(100.0, 200.0)
    assert errors.pad() == pytest.approx(1.0)
    for _ in range(30):
        errors.record(100.0, 50.0)
    assert errors.pad() == 0.0 and len(errors) == 30


def test_quantile_must_be_a_probability():
    with pytest.raises(ValueError, match="quantile"):
        EstimateErrors(quantile=1.0)


def test_scheduler_learns_from_the_first_re_estimate_of_each_job_only():
    scheduler = Scheduler(Cluster.uniform(1, 2), SRTF())
    scheduler.submit(be("a", 100.0))
    scheduler.reestimate("a", 150.0, 0.0)
    scheduler.reestimate("a", 300.0, 0.0)
    assert len(scheduler.estimate_errors) == 1 and scheduler.jobs["a"].observed
    assert scheduler.estimate_errors._ratios[0] == pytest.approx(1.5)


def test_selector_pads_only_jobs_not_observed_yet():
    selector = LeaseSelector(ChronusSettings(lease=1200.0), capacity=8, estimate_pad=0.5)
    state = JobState(job=be("a", 2000.0), seq=0, estimate=2000.0, overhead=0.0, uncertainty=0.1)
    assert selector._padded(state, 0.0) == pytest.approx(3000.0)  # pad beats the band
    state.observed = True
    assert selector._padded(state, 0.0) == pytest.approx(2200.0)  # observed: its own band only


def test_a_job_is_hopeless_only_if_even_an_estimate_as_high_as_past_ones_cannot_make_it():
    job = Job(
        id="a",
        tenant="t",
        gpus=1,
        submit=0.0,
        kind=JobKind.STRICT_SLO,
        duration=1000.0,
        deadlines=(DeadlineOption(1500.0, 1.0),),
    )
    state = JobState(job=job, seq=0, estimate=2000.0, overhead=0.0)
    selector = LeaseSelector(ChronusSettings(lease=1200.0), capacity=8)
    assert selector.hopeless(state, 0.0)  # exact estimates: 2000 > 1500
    selector.estimate_cut = 0.3
    assert not selector.hopeless(state, 0.0)  # may need only 1400
    state.observed = True
    assert selector.hopeless(state, 0.0)  # observed: its own band (0) only
