"""A check's message is rewritten only when chronus's decision changes materially (issue 24: the
120x trace spent its rounds rewriting the messages of waiting Workloads, ~1 s a write): a small
drift of the planned start costs no API write, a new guarantee or a large move does.

The cluster test drives the controller in-process (``publish`` with the reports a round would
give) on the session's control plane, and reads the Workload back from the API server."""

from __future__ import annotations

import pytest

pytest.importorskip("lightkube")

from kueue_helpers import KUEUE, wait  # noqa: E402

from chronus_py.backends.base import JobReport  # noqa: E402
from chronus_py.backends.kueue import workloads as wls  # noqa: E402
from chronus_py.backends.kueue.backend import FIELD_MANAGER, KueueBackend, material  # noqa: E402
from chronus_py.backends.kueue.kube import Kube, config  # noqa: E402
from chronus_py.jobs.model import DeadlineOption, Job, JobKind  # noqa: E402

PROMISE = DeadlineOption(at=20_000.0, value=1.0)


def report(start: float | None, promise=PROMISE, reason: str = "") -> JobReport:
    return JobReport(running=False, guaranteed=promise, planned_start=start, reason=reason)


def test_a_planned_start_tolerates_a_minute_or_a_tenth_of_the_wait():
    now = 1_000.0
    shown = report(now + 3_600)  # an hour away: 6 minutes of tolerance
    assert not material(shown, report(now + 3_600 + 300), now)
    assert material(shown, report(now + 3_600 + 400), now)
    near = report(now + 120)  # two minutes away: the minute floor
    assert not material(near, report(now + 170), now)
    assert material(near, report(now + 190), now)
    assert material(shown, report(now + 3_600, DeadlineOption(at=21_000.0, value=1.0)), now)
    assert material(shown, report(now + 3_600, None, "cannot meet its last deadline"), now)
    assert material(shown, report(None), now)
    assert material(None, shown, now)


def test_the_message_is_not_rewritten_for_a_small_shift_but_is_for_a_new_guarantee(setup):
    s = setup
    s.add_nodes("a")  # no nodes: a Job of any size is wider than the cluster, and refused
    notes = {"chronus.io/estimate": "10m", "chronus.io/deadline": "+2h,+150m"}
    s.submit("waits", gpus=1, run_seconds=60, notes=notes)
    job_id = s.chronus_id("waits")
    kube = Kube(config(str(s.kubeconfig)), manager=FIELD_MANAGER)
    backend = KueueBackend(kube, controller=f"chronus.io/{s.ns}")
    try:
        (fields,) = wait(
            lambda: [f for f in backend.arrivals() if f["id"] == job_id], 30, "its arrival"
        )
        backend.submit(Job(job_id, s.ns, 1, fields["submit"], JobKind.BEST_EFFORT), fields)
        now = backend.now()

        def published(r: JobReport) -> tuple[int, str]:
            """The API writes one publish made (queued: counted once written), and the check's
            message the API server has."""
            before = sum((kube.writes + backend.writes.writes).values())
            backend.publish({job_id: r})
            assert backend.writes.wait_idle(30)
            after = sum((kube.writes + backend.writes.writes).values())
            return after - before, s.entry("waits")["message"]

        # chronus records only a promise that is one of the job's deadline options
        promise, later = (DeadlineOption(d["at"], d["value"]) for d in fields["deadlines"])
        writes, text = published(report(now + 3_600, promise))
        assert writes == 2, writes  # the promise recorded, then the message
        assert text == f"guaranteed to finish by {wls.rfc3339(promise.at)}; planned start " + (
            wls.rfc3339(now + 3_600)
        )
        assert published(report(now + 3_600 + 120, promise)) == (0, text)
        writes, text = published(report(now + 3_600 + 120, later))
        assert writes == 2, writes
        assert text.startswith(f"guaranteed to finish by {wls.rfc3339(later.at)}; "), text
        assert text.endswith(wls.rfc3339(now + 3_600 + 120)), text
        writes, text = published(report(now + 3_600 + 1_200, later))
        assert writes == 1 and text.endswith(wls.rfc3339(now + 3_600 + 1_200)), (writes, text)
        withdrawn = report(None, None, "cannot meet its last deadline even alone")
        writes, text = published(withdrawn)
        assert writes == 2 and s.promise("waits") is None, (writes, text)
        # another manager puts the record back (as Kueue's update from an older copy did in the
        # trace): it owns the key now, and chronus's apply alone would never remove it again
        wl = s.workload("waits")
        wl["metadata"]["annotations"][wls.GUARANTEE] = wls.encode({"at": later.at, "value": 1.0})
        s.cp.api("PUT", f"{KUEUE}/namespaces/{s.ns}/workloads/{wl['metadata']['name']}", wl)
        wait(
            lambda: (wl := backend._fresh(job_id)) and wls.guarantee(wl, wls.accepted(wl)),
            5,
            "the record back",
        )
        assert published(withdrawn) == (2, text)  # the apply, then the merge patch
        assert s.promise("waits") is None
        assert published(withdrawn) == (0, text)
    finally:
        backend.close()


def test_refusals_are_queued_not_written_in_the_round(setup):
    """A round refuses bad Workloads under the request lock: their records and ``Rejected``
    checks are queued for the writer threads (the round's own client writes nothing), land,
    and are not refused twice. Written in the round, one team's template with a typo (here
    6 Jobs, in a real cluster hundreds) held every request for two writes a Job."""
    s = setup
    names = [f"typo-{i}" for i in range(6)]
    for name in names:
        s.submit(name, gpus=1, run_seconds=60, notes={"chronus.io/estimate": "2 h"})
    kube = Kube(config(str(s.kubeconfig)), manager=FIELD_MANAGER)
    backend = KueueBackend(kube, controller=f"chronus.io/{s.ns}")
    try:
        ids = {s.chronus_id(n) for n in names}

        def reserved() -> bool:
            return {i for i, w in backend._ours().items() if wls.reserved(w)} >= ids

        wait(reserved, 60, "Kueue to reserve every Job")
        before = dict(kube.writes)  # the check marked Active at start
        backend.look()
        assert backend.arrivals() == []
        assert dict(kube.writes) == before, kube.writes
        assert backend.arrivals() == []  # read as refused at once, not refused again
        assert backend.writes.wait_idle(30)
        assert sum(backend.writes.writes.values()) == 2 * len(names), backend.writes.writes

        def rounds() -> None:
            """As serve goes on: Kueue resets a check to Pending when it evicts the Workload it
            deactivated, and the next round says Rejected again (CI saw typo-1 stay Pending
            when the test ran no round after the first)."""
            backend.look()
            assert backend.arrivals() == []

        for name in names:
            entry = wait(
                lambda n=name: (e := s.entry(n)).get("state") == "Rejected" and e,
                30,
                f"{name} Rejected",
                during=rounds,
            )
            assert entry["message"] == "chronus refused it: chronus.io/estimate: expected a " + (
                "duration like 600, 90s, 20m, 2h, 1h30m, got '2 h'"
            ), entry
    finally:
        backend.close()
