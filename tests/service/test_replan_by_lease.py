"""A lease's start reads only the bookings of the jobs booked in it, whether the plan was read
from a re-plan or built in-process (issue 27 part 2: with a re-plan's child alive, every
booking the committed plan reads costs a page copy, 46-85 ms of CPU at 10 s leases when it
read them all), and tells the same jobs as a read of every booking would."""

from __future__ import annotations

import gc

import pytest

from chronus_py.jobs.model import Cluster, DeadlineOption, Job, JobKind
from chronus_py.service import rounds

LEASE = 600.0


@pytest.fixture
def thawed():
    """``start_replan`` freezes the collector's objects, as the server does; thawed after."""
    yield
    gc.unfreeze()


class Unread(tuple):
    """A booking no lease's start may read."""

    def __len__(self):
        raise AssertionError("a booking outside the lease was read")

    def __getitem__(self, i):
        raise AssertionError("a booking outside the lease was read")


def job(i: int, now: float, estimates: dict[str, float]) -> Job:
    estimates[f"j{i}"] = 1800.0 + 600.0 * (i % 5)
    deadline = DeadlineOption(now + 7200.0 + 1200.0 * i, 1.0)
    return Job(f"j{i}", "t", 2, now, JobKind.STRICT_SLO, (deadline,), estimates[f"j{i}"])


def sixteen_guarantees():
    """A 4 x 8-GPU scheduler with sixteen 2-GPU jobs admitted and placed at 0, and their
    runtimes."""
    estimates: dict[str, float] = {}
    s = rounds.scheduler_for(
        rounds.SchedulerSettings(options={"headroom": 0.0, "lease": LEASE}),
        Cluster.uniform(4, 8),
        estimates=estimates,
    )
    for i in range(16):
        rounds.admit(s, job(i, 0.0, estimates), 0.0)
    rounds.advance(s, 0.0)
    return s, estimates


def test_a_lease_start_reads_only_the_jobs_booked_in_it(thawed):
    s, estimates = sixteen_guarantees()
    replan = rounds.start_replan(s, LEASE)
    result = rounds.replan_result(replan, s)
    late = job(99, LEASE, estimates)
    rounds.admit(s, late, LEASE)  # booked in the committed plan, then caught up into the new
    assert rounds.catch_up(s, replan, result, LEASE, 1.0)
    rounds.commit_replan(s, replan, result, LEASE, caught_up=True)
    selector = s.policy.selector
    assert selector.by_lease is not None and "j99" in selector.by_lease.since

    assert_reads_only_the_lease(selector, late="j99")


def test_a_plan_built_in_process_is_indexed_by_its_first_lease_start(thawed):
    # The service's first re-plan replaces the plan its admissions built in-process, which no
    # read of a re-plan indexed: a lease ending while that child computes read every booking
    # of it, each a page copy (19-25 ms of CPU at 6,024 guarantees, issue 27 session 15).
    # The lease start before the fork (``start_replan``) indexes it, so the next one does not.
    s, estimates = sixteen_guarantees()
    replan = rounds.start_replan(s, LEASE)
    late = job(99, LEASE, estimates)
    rounds.admit(s, late, LEASE)  # booked in the committed plan, after its index
    try:
        assert_reads_only_the_lease(s.policy.selector, late="j99")
    finally:
        rounds.replan_result(replan, s)


def assert_reads_only_the_lease(selector, *, late: str) -> None:
    """A later lease's start, on ``selector``'s plan, reads the bookings of the jobs booked
    in that lease and of ``late`` (booked after the plan was indexed) only, and triggers
    the same jobs as a read of every booking."""
    assert selector.by_lease is not None and late in selector.by_lease.since
    booked = selector.booked
    leases = sorted({k for b in booked.values() for k in b if k > selector.lease_index})
    k = next(k for k in leases if 1 < sum(k in b for b in booked.values()) < len(booked) - 1)
    now = k * LEASE
    inside = {j for j, leases in booked.items() if k in leases}
    outside = set(booked) - inside
    assert inside and outside and late in booked
    expected = sorted([*selector._triggers, *((now, j) for j in inside)])
    for j in outside - {late}:  # the job booked since the index is read, and must be
        booked[j] = Unread(booked[j])
    selector.lease_began(now)
    assert sorted(selector._triggers) == expected
