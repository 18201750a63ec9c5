"""The round's informational writes are queued and never delay a start (issue 24, session 13:
the 200-job trace lost its guarantees while the loop waited for check messages and records).

In-process on the session's control plane: ``publish`` of many changed decisions makes no API
request in the caller's thread; a start right after makes exactly its two writes and no read,
and lands ``Ready`` even though a ``Pending`` message for the same Workload was queued before
it; unchanged content is never written again; a submit's record is read back by the next round
before the API server has it; the arrivals' Jobs are read before the round (``look``)."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("lightkube")

from kueue_helpers import wait  # noqa: E402

from chronus_py.backends.base import JobReport, RunState  # noqa: E402
from chronus_py.backends.kueue import workloads as wls  # noqa: E402
from chronus_py.backends.kueue.backend import FIELD_MANAGER, KueueBackend  # noqa: E402
from chronus_py.backends.kueue.kube import Conflict, Kube, config  # noqa: E402
from chronus_py.jobs.model import DeadlineOption, Job, JobKind  # noqa: E402

JOBS = 6


def test_a_start_goes_ahead_of_queued_messages_and_nothing_unchanged_is_rewritten(setup):
    s = setup
    (node,) = s.add_nodes("a", gpus=4)
    names = [f"w{i}" for i in range(JOBS)]
    for name in names:
        s.submit(name, gpus=1, run_seconds=60, notes={"chronus.io/estimate": "10m"})
    ids = {name: s.chronus_id(name) for name in names}
    kube = Kube(config(str(s.kubeconfig)), manager=FIELD_MANAGER)
    backend = KueueBackend(kube, controller=f"chronus.io/{s.ns}")
    try:

        def reserved() -> dict | None:
            got = {f["id"]: f for f in backend.arrivals() if f["id"] in ids.values()}
            return got if len(got) == JOBS else None

        wait(reserved, 60, "every Workload reserved")
        backend.look()  # their Jobs read before the round, off its path
        reads = kube.reads
        arrived = reserved()
        assert arrived is not None and kube.reads == reads  # the round read no Job itself
        calls = (sum(kube.writes.values()), kube.reads)
        for f in arrived.values():
            backend.submit(Job(f["id"], s.ns, 1, f["submit"], JobKind.BEST_EFFORT), f)
        # queued: the caller made no request, and the next round reads them as accepted
        assert (sum(kube.writes.values()), kube.reads) == calls
        assert not backend.arrivals()
        assert {o.id for o in backend.jobs()} >= set(ids.values())

        now = backend.now()
        promise = DeadlineOption(at=now + 7_200, value=1.0)
        reports = {
            i: JobReport(running=False, guaranteed=promise, planned_start=now + 600, reason="")
            for i in ids.values()
        }
        backend.publish(reports)  # a record and a message per Workload, all queued
        assert (sum(kube.writes.values()), kube.reads) == calls

        first = ids["w0"]
        backend.start(first, {node: (0,)})
        # the start's own writes only (its record, then Ready), no read, not behind the queue
        assert (sum(kube.writes.values()), kube.reads) == (calls[0] + 2, calls[1])
        assert backend.writes.wait_idle(60)
        for _ in range(10):  # and the rounds after it see it running, as the API server does
            (seen,) = [o for o in backend.jobs() if o.id == first]
            assert seen.state is RunState.RUNNING, (seen, s.entry("w0"), s.workload("w0"))
            time.sleep(0.3)
        entry = s.entry("w0")
        assert entry["state"] == "Ready", entry  # the queued Pending message did not undo it
        assert entry["message"].startswith("chronus started it on"), entry
        for name in names:
            assert s.promise(name) is not None, name
            assert wls.accepted(s.workload(name)) is not None, name
        for name in names[1:]:
            assert s.entry(name)["message"].startswith("guaranteed to finish by"), name

        # the started one's message says its promise after the start (Kueue writes a running
        # Workload's status too, and may put an older message back: written again then)
        def says_promise() -> bool:
            backend.publish(reports)
            assert backend.writes.wait_idle(60)
            return "; guaranteed to finish by" in s.entry("w0")["message"]

        wait(says_promise, 60, "the started Workload's message to say its promise")
        assert s.entry("w0")["state"] == "Ready"
        # the same decisions again for the waiting ones: nothing is written at all
        waiting = {i: r for i, r in reports.items() if i != first}
        before = sum((kube.writes + backend.writes.writes).values())
        backend.publish(waiting)
        assert backend.writes.wait_idle(60)
        total = sum((kube.writes + backend.writes.writes).values())
        assert total == before
        # a decision's record with the content the API server has: no write either
        wl = backend._fresh(ids["w1"])
        backend._record(wl, guarantee={"at": promise.at, "value": promise.value})
        assert sum((kube.writes + backend.writes.writes).values()) == total

        # a start at a resourceVersion the Workload no longer has is refused by the API server
        stale = backend._fresh(ids["w2"])
        backend._record(stale, guarantee=None)
        version = stale["metadata"]["resourceVersion"]
        with pytest.raises(Conflict):
            backend._check(stale, "Ready", "a stale start", version=version)
        assert s.entry("w2")["state"] == "Pending"
    finally:
        backend.close()
