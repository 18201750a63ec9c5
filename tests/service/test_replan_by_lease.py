"""A lease's start reads only the bookings of the jobs booked in it, where the plan was read
from a re-plan (issue 27 part 2: with a re-plan's child alive, every booking the committed
plan reads costs a page copy, 46-85 ms of CPU at 10 s leases when it read them all), and tells
the same jobs as a read of every booking would."""

from __future__ import annotations

import copy
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


def test_a_lease_start_reads_only_the_jobs_booked_in_it(thawed):
    estimates: dict[str, float] = {}
    s = rounds.scheduler_for(
        rounds.SchedulerSettings(options={"headroom": 0.0, "lease": LEASE}),
        Cluster.uniform(4, 8),
        estimates=estimates,
    )
    for i in range(16):
        rounds.admit(s, job(i, 0.0, estimates), 0.0)
    rounds.advance(s, 0.0)
    replan = rounds.start_replan(s, LEASE)
    result = rounds.replan_result(replan, s)
    late = job(99, LEASE, estimates)
    rounds.admit(s, late, LEASE)  # booked in the committed plan, then caught up into the new
    assert rounds.catch_up(s, replan, result, LEASE, 1.0)
    rounds.commit_replan(s, replan, result, LEASE, caught_up=True)
    selector = s.policy.selector
    assert selector.by_lease is not None and "j99" in selector.by_lease.since

    booked = selector.booked
    leases = sorted({k for b in booked.values() for k in b if k > selector.lease_index})
    k = next(k for k in leases if 1 < sum(k in b for b in booked.values()) < len(booked) - 1)
    now = k * LEASE
    inside = {j for j, leases in booked.items() if k in leases}
    outside = set(booked) - inside
    assert inside and outside and "j99" in booked
    reference = copy.deepcopy(selector)
    reference.by_lease = None  # every booking read, as without the index
    reference.lease_began(now)

    for j in outside - {"j99"}:  # the job booked since the read is read, and must be
        booked[j] = Unread(booked[j])
    selector.lease_began(now)
    assert sorted(selector._triggers) == sorted(reference._triggers)
    assert {j for _, j in selector._triggers} >= inside
