"""Two replicas of ``chronus serve --backend kueue`` electing a leader on a Lease: the standby
answers nothing; SIGKILL the leader and the standby leads within the stated time (the lease
duration plus one retry, plus its own start), keeping every promise and starting nothing twice."""

from __future__ import annotations

import secrets
import time

import pytest

pytest.importorskip("lightkube")

from kueue_helpers import make_setup, wait  # noqa: E402

from chronus_py.backends.kueue import harness  # noqa: E402

LEASE_SECONDS = 3.0


def test_leader_failover_keeps_promises_and_never_double_starts(
    kube, kube_ns, kube_queues, chronus_kubeconfig, tmp_path
):
    s = make_setup(kube, kube_ns, kube_queues, chronus_kubeconfig)
    s.add_nodes("a", "b")  # room for the Job submitted after the failover beside the kept one
    lease = f"--kueue-lease={harness.NAMESPACE}/leader-{secrets.token_hex(3)}"
    duration = f"--kueue-lease-duration={LEASE_SECONDS:g}"
    one = s.serve(tmp_path, "one", lease, duration).start()
    two = s.serve(tmp_path, "two", lease, duration, origin=one.origin).launch()
    launched = time.monotonic()
    try:
        s.submit(
            "kept",
            run_seconds=600,  # spans the failover: it runs until the test ends it (``finish``)
            notes={"chronus.io/estimate": "10m", "chronus.io/deadline": "+60m"},
        )
        wait(lambda: s.running_nodes("kept"), 60, "kept to run")
        # a lease duration after the standby was launched (mostly spent by kept's start)
        time.sleep(max(LEASE_SECONDS - (time.monotonic() - launched), 0.0))
        assert not two.serving(), "the standby answered while the leader lives"
        pod = s.pods("kept")[0]["metadata"]["uid"]
        promise = wait(lambda: s.promise("kept"), 30, "kept's promise recorded")
        ready_at = s.entry("kept")["lastTransitionTime"]

        one.kill9()
        killed = time.monotonic()
        two.wait_serving(60)
        took = time.monotonic() - killed
        # Lease duration + one retry for the takeover, then the standby's own start (rebuilding
        # from the API server) before it answers: stated in the README as "within ~2x the
        # lease duration plus the start" for this size; a loaded 2-core CI machine gets slack.
        assert took < LEASE_SECONDS * 2 + 20, took
        print(f"takeover: the standby served {took:.1f} s after the leader was killed")

        # the new leader's first round decided with kept running, its commands issued (they
        # are before the next round's): a start of kept again would be that round's
        wait(lambda: two.client.health()["rounds"] >= 2, 30, "the new leader's first rounds")
        kept = s.chronus_id("kept")
        job = two.jobs()[kept]
        assert job["state"] == "running" and job["guaranteed"] is not None
        assert s.promise("kept") == promise
        assert s.entry("kept")["lastTransitionTime"] == ready_at  # not started again
        assert not any(e["job"] == kept for e in two.events("start"))
        assert s.running_nodes("kept")
        s.finish("kept", 1)
        s.submit("next", run_seconds=2, notes={"chronus.io/estimate": "2m"})  # the new leader's
        for name in ("kept", "next"):
            wait(lambda n=name: s.succeeded(n), 90, f"{name} to complete")
        assert {p["metadata"]["uid"] for p in s.pods("kept")} == {pod}
        nxt = s.chronus_id("next")
        wait(lambda: two.jobs()[nxt]["state"] == "finished", 30, "next finished under two")
    finally:
        one.stop()
        two.stop()
