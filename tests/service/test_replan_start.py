"""A re-plan's start does the parent's work before the fork (issue 27 part 2: after the fork,
every page the parent touches is copied from the child's, 22,000 of them for the committed
plan's ``lease_began`` at 6,024 guarantees, in the request's call). Doing it first must change
neither what the child computes nor what the parent is left with."""

from __future__ import annotations

import copy
import gc

import pytest

from chronus_py.jobs.model import Cluster, DeadlineOption, Job, JobKind
from chronus_py.service import rounds

LEASE = 600.0


def planned(jobs: int):
    estimates: dict[str, float] = {}
    s = rounds.scheduler_for(
        rounds.SchedulerSettings(options={"headroom": 0.0, "lease": LEASE}),
        Cluster.uniform(4, 8),
        estimates=estimates,
    )
    for i in range(jobs):
        estimates[f"j{i}"] = 1800.0
        deadline = DeadlineOption(3600.0 * (1 + i), 1.0)
        rounds.admit(s, Job(f"j{i}", "t", 2, 0.0, JobKind.STRICT_SLO, (deadline,), 1800.0), 0.0)
    rounds.advance(s, 0.0)
    return s


def plan_of(selector) -> tuple:
    return (
        selector.lease_index,
        dict(selector.booked),
        dict(selector.guarantees),
        dict(selector.tiers),
        sorted(selector._triggers),
    )


@pytest.fixture
def thawed():
    """``start_replan`` freezes the collector's objects, as the server does; thawed after."""
    yield
    gc.unfreeze()


def test_the_childs_plan_and_the_parents_state_are_those_of_a_start_after_the_fork(thawed):
    s = planned(12)
    now = 2 * LEASE  # a lease the committed plan booked j0 in begins: j0 is re-tiered
    reference = copy.deepcopy(s)  # as before: the child forked first, then the parent was told
    expected = reference.policy.replan(reference.active, now)
    told = copy.deepcopy(s)
    told.policy.replan_started(now)
    assert told.policy.selector._triggers  # the check below can fail: the parent's state moved

    replan = rounds.start_replan(s, now)
    result = rounds.replan_result(replan, s)

    assert plan_of(result.selector) == plan_of(expected.selector)
    assert result.changed == expected.changed
    assert plan_of(s.policy.selector) == plan_of(told.policy.selector)
    assert replan.known == frozenset(s.active)


def test_no_object_older_than_the_fork_is_left_to_the_collector(thawed):
    # A collector pass writes the header of every object it visits: after the fork each is a
    # page copy in the process that runs it, so what exists at the fork is frozen first.
    s = planned(4)
    old = [s, s.policy.selector, *s.active.values(), *s.policy.selector.booked.values()]
    replan = rounds.start_replan(s, LEASE)
    assert {id(o) for o in old} & {id(o) for o in gc.get_objects()} == set()
    assert rounds.replan_result(replan, s) is not None
