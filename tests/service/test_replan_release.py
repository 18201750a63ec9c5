"""No re-plan is forked while the plan the last commit replaced is being freed (issue 27 part
2): after a fork every page that release writes is a copy, 2.5x its CPU in the process that
answers requests. A re-plan that fell due meanwhile (one that took longer than a lease) is
owed: the committed plan decides, nothing re-plans under the lock, and the server's loop forks
it in a hold of its own (``Service.fork_replan``) ``FORK_GAP`` after the release and after the
first round on the committed plan (that round's writes made before the fork: after it, 26-61 ms
of CPU in page copies at 10 s leases, session 16). No request's call forks (session 17). The
real service, sim backend and fork, on a clock that runs a 60 s lease in 0.3 wall seconds."""

from __future__ import annotations

import gc
import time

import pytest

from chronus_py.backends.sim import SimBackend
from chronus_py.service import rounds
from chronus_py.service.core import FORK_GAP, Caller, Service
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


def test_the_fork_runs_in_the_loops_own_hold_not_in_the_requests_call(service):
    """A request that meets the lease's end tells the committed plan and wakes the loop, which
    forks in a hold of its own (``fork_replan``) once the request's batch is answered: the fork
    copies the page tables of the whole process (10-46 ms with the lock and the GIL), which no
    request's call pays (issue 27, session 17)."""
    woken = []
    service.on_replan = lambda: woken.append(service.replan)
    for i in range(6):
        submit(service, i)
    lease_ends(service)
    replans = rounds.solver_stats(service.scheduler).rounds
    submit(service, 6)
    assert service.replan is None, "forked in the request's call"
    assert woken == [None], "the loop was not woken to fork"
    assert not rounds.replan_due(service.scheduler, service.backend.now()), "plan not told"
    assert rounds.solver_stats(service.scheduler).rounds == replans, "re-planned in the call"
    assert service.fork_wait() == 0.0
    service.decide()  # a round before the loop forks: owed still, not forked nor re-planned
    assert service.replan is None and service.fork_wait() == 0.0
    service.fork_replan()  # as the loop calls it, under the lock
    assert service.replan is not None and len(service.replan.known) == 7
    assert service.fork_wait() is None
    assert rounds.solver_stats(service.scheduler).rounds == replans


def test_no_fork_while_the_replaced_plan_is_freed_or_unrounded_and_the_owed_replan_follows(service):
    for i in range(6):
        submit(service, i)
    lease_ends(service)
    submit(service, 6)  # the lease ended: owed, and forked by the loop
    service.fork_replan()
    replan = service.replan
    assert replan is not None
    result = service.replan_result(replan)
    lease_ends(service)  # the re-plan took longer than its lease: the next is due at its commit
    while not service.commit_replan(replan, result):
        pass
    assert rounds.replan_due(service.scheduler, service.backend.now())
    replans = rounds.solver_stats(service.scheduler).rounds

    submit(service, 7)  # while the replaced plan is still being freed
    assert service.fork_wait() is None, "to be forked while the replaced plan is freed"
    service.fork_replan()
    assert service.replan is None, "forked while the replaced plan was being freed"
    assert rounds.solver_stats(service.scheduler).rounds == replans, "re-planned in the call"
    assert not rounds.replan_due(service.scheduler, service.backend.now())

    service.release_replaced()
    submit(service, 8)  # freed, but no round has run on the committed plan yet
    assert service.fork_wait() is None
    service.fork_replan()
    assert service.replan is None, "forked before the first round on the committed plan"

    service.decide()  # that round, its writes made before any fork (no page of it copied)
    assert service.replan is None, "forked inside the round, before its writes"
    wait = service.fork_wait()  # the release's end is at most FORK_GAP ago: not forked at once
    assert wait is not None and 0.0 < wait <= FORK_GAP, wait
    time.sleep(wait)
    assert service.fork_wait() == 0.0
    submit(service, 9)
    assert service.replan is None, "forked in the request's call"
    service.fork_replan()  # the owed re-plan, forked by the loop now
    assert service.replan is not None and len(service.replan.known) == 10
    assert rounds.solver_stats(service.scheduler).rounds == replans
