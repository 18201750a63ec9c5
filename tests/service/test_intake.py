"""One intake: a job submitted over the API and one that enters through the backend (a trace's
arrival) go through the same function, so the same job is refused for the same reason, or
admitted, recorded and audited the same way, either way it came.

The real service and sim backend in-process; the sim's clock starts at 1000 s."""

from __future__ import annotations

import json

import pytest

from chronus_py.backends.base import RunState
from chronus_py.backends.sim import SimBackend, trace_fields
from chronus_py.jobs.model import DeadlineOption, Job, JobKind
from chronus_py.service.core import ApiError, Caller, Service
from chronus_py.service.db import Database
from chronus_py.service.rounds import SchedulerSettings

ADMIN = Caller("ops", admin=True)


def slo(job_id: str, gpus: int, deadline: float) -> Job:
    return Job(job_id, "t", gpus, 0.0, JobKind.STRICT_SLO, (DeadlineOption(deadline, 1.0),), 600.0)


LATE = slo("late", 2, 500.0)  # its deadline passed before it arrived
WIDE = slo("wide", 16, 90_000.0)  # wider than the cluster
FINE = slo("fine", 2, 90_000.0)


@pytest.fixture
def svc(tmp_path):
    backend = SimBackend(
        tmp_path / "world.sim", [("n0", 8)], origin=1000.0, trace_jobs=(LATE, WIDE, FINE)
    )
    db = Database(tmp_path / "chronus.db")
    built = Service(backend, db, SchedulerSettings())
    yield built
    db.close()


def request(job: Job) -> dict:
    """The trace job's fields as a request gives them (no submission time of its own)."""
    return {k: v for k, v in trace_fields(job).items() if k != "submit"} | {"id": f"api-{job.id}"}


def refusals(caplog) -> dict[str, str]:
    lines = [  # a round's step logs its lines as one record (``core.held_decisions``)
        json.loads(line)
        for r in caplog.records
        if r.name == "chronus.serve"
        for line in r.getMessage().splitlines()
    ]
    return {line["job"]: line["reason"] for line in lines if line["event"] == "refuse"}


def test_an_arrival_is_refused_for_what_a_request_is(svc, caplog):
    caplog.set_level("INFO", logger="chronus.serve")
    status, late = svc.submit(request(LATE), ADMIN)
    assert status == 200 and late["admission"]["decision"] == "rejected"
    assert late["admission"]["reason"].startswith(
        "deadlines[0].at: the last deadline (500) is not after now"
    )
    with pytest.raises(ApiError) as wide:
        svc.submit(request(WIDE), ADMIN)
    assert (wide.value.status, wide.value.line()) == (422, "gpus: expected at most the cluster's 8")
    svc.tick()
    refused = refusals(caplog)
    assert refused["late"].startswith("deadlines[0].at: the last deadline (500) is not after now")
    assert refused["wide"] == "gpus: expected at most the cluster's 8"
    # Refused: cancelled on the backend, kept nowhere.
    world = svc.backend.world.jobs
    assert world["late"].state is world["wide"].state is RunState.CANCELLED
    assert svc.db.job("late") is None and svc.db.job("wide") is None


def test_an_arrival_is_admitted_recorded_and_audited_like_a_request(svc):
    status, answer = svc.submit(request(FINE), ADMIN)
    assert status == 201 and answer["admission"]["decision"] == "guaranteed"
    svc.tick()
    api, trace = svc.db.job("api-fine"), svc.db.job("fine")
    assert trace["admission"]["decision"] == api["admission"]["decision"] == "guaranteed"
    assert (trace["tenant"], trace["submit"], api["tenant"]) == ("t", 0.0, "t")
    for row in (api, trace):
        assert row["guaranteed_at"] == 90_000.0 and row["estimate"] == 600.0
        assert [d["action"] for d in svc.db.decisions(row["id"])][:1] == ["admit:guaranteed"]
    assert svc.backend.world.jobs["fine"].state is not RunState.CANCELLED


HIVED = """physicalCluster:
  cellTypes:
    NODE: {childCellType: GPU, childCellNumber: 8, isNodeLevel: true}
  physicalCells:
  - {cellType: NODE, cellAddress: n0}
virtualClusters:
  t: {virtualCells: [{cellType: NODE, cellNumber: 1}]}
"""


def test_a_tenant_with_no_virtual_cluster_is_refused_not_kept_waiting(tmp_path, caplog):
    # Accepted before, it waited for ever ("so it can never be placed"), and an arrival's
    # owner learnt nothing.
    from placement import CellAllocator, load_config

    caplog.set_level("INFO", logger="chronus.serve")
    (tmp_path / "hived.yaml").write_text(HIVED)
    config = load_config(tmp_path / "hived.yaml")
    stray = Job("stray", "u", 2, 0.0, JobKind.BEST_EFFORT, (), 600.0)
    backend = SimBackend(
        tmp_path / "world.sim", [("n0", 8)], origin=1000.0, trace_jobs=(FINE, stray)
    )
    db = Database(tmp_path / "chronus.db")
    svc = Service(backend, db, SchedulerSettings(), allocator_factory=lambda: CellAllocator(config))
    try:
        status, answer = svc.submit(request(FINE) | {"tenant": "u"}, ADMIN)
        assert status == 200 and answer["admission"] == {
            "decision": "rejected",
            "reason": "tenant: 'u' is no virtual cluster of the cell allocator (have: t)",
        }
        svc.tick()
        assert refusals(caplog) == {"stray": answer["admission"]["reason"]}
        assert backend.world.jobs["stray"].state is RunState.CANCELLED
        assert svc.db.job("fine") is not None and svc.db.job("stray") is None
    finally:
        db.close()
