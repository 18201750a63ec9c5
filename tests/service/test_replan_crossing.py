"""A re-plan crosses from the forked child as numbers, is put back in steps of at most
``PIECE`` jobs' bookings, and arrives whole and in order, each lease one int shared by every
booking; the lease plan a commit logs from is a snapshot of the bookings,
converted per job, and the bookings a re-plan brings are out of the cyclic collector's reach
(issue 27: none of these may hold every thread, or the request lock, for long)."""

from __future__ import annotations

import gc
import pickle

import pytest

from chronus_py.jobs.model import Cluster, DeadlineOption, Job, JobKind
from chronus_py.policies.replanned import PIECE, Replanned
from chronus_py.service import rounds

MAPPINGS = ("booked", "guarantees", "tiers")


def planned(jobs: int, estimates: dict[str, float] | None = None):
    estimates = {} if estimates is None else estimates
    s = rounds.scheduler_for(
        rounds.SchedulerSettings(options={"headroom": 0.0, "lease": 600.0}),
        Cluster.uniform(4, 8),
        estimates=estimates,
    )
    for i in range(jobs):
        estimates[f"j{i}"] = 1200.0
        deadline = DeadlineOption(3600.0 * (1 + i), 1.0)
        rounds.admit(s, Job(f"j{i}", "t", 1, 0.0, JobKind.STRICT_SLO, (deadline,), 1200.0), 0.0)
    return s


def test_a_replan_crosses_as_numbers_and_arrives_whole_and_in_order():
    selector = planned(3 * PIECE + 5).policy.selector
    selector.booked["gaps"] = (3, 4, 7, 9, 10)  # a booking of three runs crosses as it was
    assert len(selector.guarantees) > 2 * PIECE
    crossed = pickle.loads(pickle.dumps(Replanned(selector, {"j0"})))
    for name in MAPPINGS:  # nothing of them in the one call that unpickles the rest
        assert getattr(crossed.selector, name) == {}
    steps = sum(1 for _ in crossed.load())
    assert steps >= -(-len(selector.booked) // PIECE) and crossed.parts is None
    for name in MAPPINGS:
        mine, theirs = getattr(selector, name), getattr(crossed.selector, name)
        assert list(theirs.items()) == list(mine.items())
        assert [type(v) for v in theirs.values()] == [type(v) for v in mine.values()]
    assert crossed.changed == {"j0"} and crossed.selector.lease_index == selector.lease_index


def test_every_booking_read_refers_to_one_int_per_lease():
    # Unpickled, each lease of each booking was an int object of its own: 28 bytes beside the
    # tuple's reference, 130 MB at 6,024 guarantees (benchmarks/replan_commit.py), forked at
    # the next lease and freed with the replaced plan. Indices above 256 (ints below that are
    # shared by Python anyway), as at 30 s leases after the service's second hour.
    s = planned(PIECE + 3)
    selector = s.policy.selector
    selector.plan.booked = {j: tuple(k + 1000 for k in v) for j, v in selector.booked.items()}
    first = pickle.loads(pickle.dumps(Replanned(selector, set())))
    second = pickle.loads(pickle.dumps(Replanned(selector, set())))
    for crossed in (first, second):
        for _ in crossed.load():
            pass
    ints: dict[int, int] = {}
    for crossed in (first, second):
        for leases in crossed.selector.booked.values():
            for k in leases:
                assert ints.setdefault(k, id(k)) == id(k)
    assert len(ints) > 1 and min(ints) > 256


def test_the_lease_plan_is_a_snapshot_converted_per_job():
    s = planned(4)
    selector = s.policy.selector
    plan = s.policy.lease_report().lease_plan
    before = {job: tuple(k * 600.0 for k in leases) for job, leases in selector.booked.items()}
    assert plan == before and list(plan) == list(before) and "j0" in plan
    selector.booked["j0"] = (99,)  # a later booking: the report keeps what it saw
    selector.booked["late"] = (100,)
    assert plan == before and "late" not in plan and plan["j0"] == before["j0"]


@pytest.fixture
def thawed():
    """The test freezes the collector's objects, as the server does; thawed again after."""
    yield
    gc.unfreeze()


def _tracked(objects) -> set[int]:
    """Which of ``objects`` a collector pass would visit (frozen ones are in no generation)."""
    ids = {id(o) for o in objects}
    return ids & {id(o) for o in gc.get_objects()}


def test_no_collector_pass_walks_the_bookings_of_a_replan(thawed):
    # The next young pass after a re-plan walked every lease of its bookings (tuples of ints,
    # tracked until a pass looks through them): one call of 115-250 ms that stopped every thread
    # at 5,000 guarantees. After the read and after the commit, no generation holds them.
    estimates = {"late": 1200.0}
    s = planned(2 * PIECE, estimates)
    replan = rounds.start_replan(s, 600.0)
    late = Job("late", "t", 1, 600.0, JobKind.STRICT_SLO, (DeadlineOption(9000.0, 1.0),), 1200.0)
    result = rounds.replan_result(replan, s)
    bookings = list(result.selector.booked.values())
    assert len(bookings) == 2 * PIECE and all(len(b) > 1 for b in bookings)
    assert _tracked(bookings) == set()
    rounds.admit(s, late, 600.0)
    assert rounds.catch_up(s, replan, result, 600.0, 1.0)
    rounds.commit_replan(s, replan, result, 600.0)
    booked = s.policy.selector.booked
    assert "late" in booked and set(booked) >= {f"j{i}" for i in range(2 * PIECE)}
    assert _tracked(booked.values()) == set()
