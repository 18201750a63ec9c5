"""The re-plan's retried admission skips only jobs admission would refuse anyway
(``LeaseSelector._refused_again``, issue 27): on random plans, with narrow and wide guarantees
and the headroom, every job it names is refused when the candidates are tried in turn, and the
plan that comes out is the one trying every candidate gives."""

from __future__ import annotations

import copy

import numpy as np
from core_helpers import job
from hypothesis import given, settings
from hypothesis import strategies as st

from chronus_py.jobs.state import JobState
from chronus_py.selector import ChronusSettings, LeaseSelector

LEASE = 100.0


def _state(i: int, gpus: int, work: float, deadlines: list[float]) -> JobState:
    return JobState(
        job=job(f"c{i}", gpus=gpus, deadlines=[(at, 10.0 - k) for k, at in enumerate(deadlines)]),
        seq=i,
        estimate=work,
        overhead=0.0,
    )


def _retry(selector: LeaseSelector, candidates: list[JobState], skip: set[str]) -> list[str]:
    """The re-plan's loop over the candidates: those admitted, in turn."""
    need = {s.id: selector._need_seconds(s, 0.0, 0) for s in candidates}
    assert skip <= set(need)
    return [s.id for s in candidates if s.id not in skip and selector._try_guarantee(s, 0.0, 0)]


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from([8, 32, 96]),
    st.sampled_from([0.0, 0.5, 0.9]),
    st.lists(st.tuples(st.integers(1, 96), st.integers(0, 15)), max_size=25),
    st.lists(
        st.tuples(
            st.integers(1, 96),
            st.floats(1.0, 900.0),
            st.lists(st.integers(1, 20), min_size=1, max_size=3),
        ),
        min_size=1,
        max_size=12,
    ),
)
def test_a_skipped_retry_is_one_admission_refuses(capacity, headroom, bookings, jobs):
    selector = LeaseSelector(
        ChronusSettings(lease=LEASE, headroom=headroom, guard=0.0), capacity, node_gpus=1
    )
    selector.lease_index = 0
    for i, (width, lease) in enumerate(bookings):
        width = min(width, capacity)
        if selector._free(0, 16)[lease] >= width:
            selector._book(f"b{i}", width, np.array([lease]))
            if width > selector._share():
                selector._wide[f"b{i}"] = width
    candidates = [
        _state(i, min(gpus, capacity), work, [at * LEASE for at in ats])
        for i, (gpus, work, ats) in enumerate(jobs)
    ]
    need = {s.id: selector._need_seconds(s, 0.0, 0) for s in candidates}
    refused = selector._refused_again(candidates, need, 0)
    every = copy.deepcopy(selector)
    admitted = _retry(every, candidates, set())
    assert not refused & set(admitted)
    skipping = copy.deepcopy(selector)
    assert _retry(skipping, candidates, refused) == admitted
    assert skipping.booked == every.booked
