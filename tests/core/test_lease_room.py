"""``room`` (seconds of a job's leases before its deadline) bisects for the leases wholly before
the deadline (issue 27, session 15): it must give exactly the sum added up lease by lease, also
for leases that are not whole seconds, where ``count * lease`` would round differently."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from chronus_py.selector.leases import room


def _added_up(leases: tuple[int, ...], deadline: float, lease: float) -> float:
    total = 0.0
    for index in leases:
        share = deadline - index * lease
        if share > 0.0:
            total += share if share < lease else lease
    return total


@settings(max_examples=2000, deadline=None)
@given(
    st.lists(st.integers(0, 400), max_size=120, unique=True).map(lambda x: tuple(sorted(x))),
    st.floats(-100.0, 500_000.0, allow_nan=False),
    st.sampled_from([1200.0, 3600.0, 600.0, 0.1, 7.3, 1e-3]) | st.floats(1e-3, 5000.0),
)
def test_room_is_the_sum_added_up_lease_by_lease(leases, deadline, lease):
    assert room(leases, deadline, lease) == _added_up(leases, deadline, lease)


def test_room_on_a_deadline_inside_a_lease():
    assert room((0, 1, 2), 1000.0, 600.0) == 1000.0
    assert room((3, 4), 1000.0, 600.0) == 0.0
    assert room((), 1000.0, 600.0) == 0.0
    assert room(tuple(range(10)), 10 * 0.1 + 0.05, 0.1) == _added_up(tuple(range(10)), 1.05, 0.1)
