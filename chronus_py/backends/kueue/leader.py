"""Leader election on a ``coordination.k8s.io/v1`` Lease, so two replicas of the controller never
decide at the same time.

The rules are client-go's: the holder renews the Lease every ``retry`` seconds; another replica
takes it once ``duration`` seconds have passed since the last renewal it saw (measured on its own
clock, from when it saw the Lease change, so clocks need not agree); a write is an update at the
Lease's resourceVersion, so of two replicas racing for it one wins and the other gets a conflict.

Safety against a double start rests on the holder stopping before anyone may take over: a
holder that could not renew for ``renew_deadline`` (< ``duration``) seconds stops deciding
(``held`` turns False, every backend command checks it) and the process exits, to come back as a
standby. A holder killed outright (SIGKILL) simply stops renewing; the standby takes over
``duration`` to ``duration + retry`` seconds after the last renewal, then rebuilds from the
cluster (``backend.py``). A standby blocks in :meth:`LeaderElector.acquire`: its HTTP server
does not answer until it leads, so a Service in front of the replicas reaches the leader only.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from datetime import datetime, timezone

from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease

from chronus_py.backends.base import BackendUnavailable
from chronus_py.backends.kueue.kube import Kube

log = logging.getLogger("chronus.kueue")


def identity() -> str:
    """This replica's name in the Lease: the Pod's name (its hostname) and the process id."""
    return f"{socket.gethostname()}_{os.getpid()}"


class LeaderElector:
    def __init__(
        self,
        kube: Kube,
        *,
        namespace: str,
        name: str,
        duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry: float = 2.0,
        me: str | None = None,
        on_lost=None,
    ):
        if not retry < renew_deadline < duration:
            raise ValueError("leader election needs retry < renew deadline < lease duration")
        self.kube = kube
        self.namespace, self.name = namespace, name
        self.duration, self.renew_deadline, self.retry = duration, renew_deadline, retry
        self.me = me or identity()
        self.on_lost = on_lost or (lambda: os._exit(1))
        self._renewed = -float("inf")  # monotonic time of our last successful renewal
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def held(self) -> bool:
        """Whether this replica may act: it renewed the Lease less than ``renew_deadline`` ago."""
        return time.monotonic() - self._renewed < self.renew_deadline

    def require(self) -> None:
        if not self.held:
            raise BackendUnavailable("kueue: this replica no longer holds the leader Lease")

    def acquire(self) -> None:
        """Block until this replica holds the Lease, then keep renewing it in a thread."""
        seen: tuple[str | None, float] = (None, time.monotonic())  # (resourceVersion, when seen)
        waiting_logged = False
        while not self._try(seen):
            lease = self._get()
            version = None if lease is None else lease.metadata.resourceVersion
            if version != seen[0]:
                seen = (version, time.monotonic())
            if not waiting_logged and lease is not None:
                holder = lease.spec.holderIdentity if lease.spec else None
                log.info(json.dumps({"event": "standby", "leader": holder, "me": self.me}))
                waiting_logged = True
            time.sleep(self.retry)
        log.info(json.dumps({"event": "leader", "me": self.me, "lease": self.name}))
        self._thread = threading.Thread(target=self._renew_loop, name="lease", daemon=True)
        self._thread.start()

    def _get(self) -> Lease | None:
        try:
            return self.kube.lease(self.namespace, self.name)
        except BackendUnavailable:
            return None

    def _try(self, seen: tuple[str | None, float]) -> bool:
        """One attempt to take or renew the Lease."""
        try:
            lease = self.kube.lease(self.namespace, self.name)
        except BackendUnavailable:
            return False
        now = datetime.now(timezone.utc)
        if lease is None:
            body = Lease(
                metadata=ObjectMeta(name=self.name, namespace=self.namespace),
                spec=LeaseSpec(
                    holderIdentity=self.me,
                    leaseDurationSeconds=max(int(round(self.duration)), 1),
                    acquireTime=now,
                    renewTime=now,
                    leaseTransitions=0,
                ),
            )
            return self._write(body, create=True)
        spec = lease.spec or LeaseSpec()
        mine = spec.holderIdentity == self.me
        expired = (
            lease.metadata.resourceVersion == seen[0]
            and time.monotonic() - seen[1] >= self.duration
        )
        if not (mine or not spec.holderIdentity or expired):
            return False
        if not mine:
            spec.leaseTransitions = (spec.leaseTransitions or 0) + 1
            spec.acquireTime = now
        spec.holderIdentity = self.me
        spec.leaseDurationSeconds = max(int(round(self.duration)), 1)
        spec.renewTime = now
        lease.spec = spec
        return self._write(lease, create=False)

    def _write(self, lease: Lease, *, create: bool) -> bool:
        started = time.monotonic()
        try:
            ok = self.kube.write_lease(lease, create=create) is not None
        except BackendUnavailable:
            return False
        if ok:
            self._renewed = started
        return ok

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.retry):
            if self._try((None, time.monotonic())):
                continue
            if not self.held:
                log.error(json.dumps({"event": "leader_lost", "me": self.me}))
                self.on_lost()
                return

    def release(self) -> None:
        """Stop renewing and hand the Lease over at once (a clean shutdown)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if not self.held:
            return
        try:
            lease = self.kube.lease(self.namespace, self.name)
            if lease is not None and lease.spec and lease.spec.holderIdentity == self.me:
                lease.spec.holderIdentity = None
                lease.spec.renewTime = None
                self.kube.write_lease(lease, create=False)
        except BackendUnavailable:
            pass
        self._renewed = -float("inf")
