"""No re-plan is forked while the plan the last commit replaced is being freed (issue 27 part
2): after a fork every page that release writes is a copy, 2.5x its CPU in the process that
answers requests. A re-plan that fell due meanwhile (one that took longer than a lease) is
owed: the committed plan decides, nothing re-plans under the lock, and the first call after
the release and the first round on the committed plan forks it (that round's writes made
before the fork: after it, 26-61 ms of CPU in page copies at 10 s leases, session 16). The
real service, sim backend and fork, on a clock that runs a 60 s lease in 0.3 wall seconds."""

from __future__ import annotations

import gc
import time

import pytest

from chronus_py.backends.sim import SimBackend
from chronus_py.service import rounds
from chronus_py.service.core import Caller, Service
from chronus_py.service.db import Database

LEASE, SPEED = 60.0, 200.0
TEAM = Caller("team-a")


@pytest.fixture
def service(tmp_path):
    backend = SimBackend(tmp_path / "world.sim", [("n0", 8), ("n1", 8)], speed=SPEED)
    built = Service(
        backend,
        Database(tmp_path / "chronus.db"),
        rounds.SchedulerSettings(options={"headroom": 0.5, "lease": LEASE}),
        replan_in_child=True,
    )
    yield built
    if built.replan is not None:  # collect the last child
        built.replan_result(built.replan)
    gc.unfreeze()  # ``start_replan`` freezes the collector's objects, as the server does


def submit(service: Service, i: int) -> None:
    now = service.backend.now()
    body = {
        "id": f"j{i}",
        "gpus": 4,
        "estimate_seconds": 1800,
        "deadlines": [{"at": now + 20_000 + 600 * i}],
    }
    status, answer = service.submit(body, TEAM)
    assert status == 201 and answer["admission"]["decision"] == "guaranteed", answer


def lease_ends(service: Service) -> None:
    """Wait on the sim's clock until the committed plan's lease has ended."""
    end = rounds.lease_report(service.scheduler).lease_end
    while service.backend.now() < end + 1.0:
        time.sleep(0.02)


def test_no_fork_while_the_replaced_plan_is_freed_or_unrounded_and_the_owed_replan_follows(service):
    for i in range(6):
        submit(service, i)
    lease_ends(service)
    submit(service, 6)  # the lease ended: forked
    replan = service.replan
    assert replan is not None
    result = service.replan_result(replan)
    lease_ends(service)  # the re-plan took longer than its lease: the next is due at its commit
    while not service.commit_replan(replan, result):
        pass
    assert rounds.replan_due(service.scheduler, service.backend.now())
    replans = rounds.solver_stats(service.scheduler).rounds

    submit(service, 7)  # while the replaced plan is still being freed
    assert service.replan is None, "forked while the replaced plan was being freed"
    assert rounds.solver_stats(service.scheduler).rounds == replans, "re-planned in the call"
    assert not rounds.replan_due(service.scheduler, service.backend.now())

    service.release_replaced()
    submit(service, 8)  # freed, but no round has run on the committed plan yet
    assert service.replan is None, "forked before the first round on the committed plan"

    service.decide()  # that round, its writes made before any fork (no page of it copied)
    assert service.replan is None, "forked inside the round, before its writes"
    submit(service, 9)  # the owed re-plan, forked now
    assert service.replan is not None and len(service.replan.known) == 9  # j9 came after
    assert rounds.solver_stats(service.scheduler).rounds == replans
