"""Chronus's informational writes on Workloads, off the round's path.

Why: on a loaded control plane an API write costs the controller half a second or more, and a
round used to issue them one after the other before the next round could begin: the records of
a batch of arrivals, every new guarantee's record, every changed check message. A start that
was due waited behind them, and in compressed time (the 200-job trace at 30x and 120x, issue
24) that wait broke the guarantees the plan had made. Here those writes are queued per Workload
and issued by a few worker threads; the round's decisions (starts, preemptions, refusals) are
written by the caller at once (:meth:`Writes.claim`), ahead of anything queued.

The rules that keep it correct:

- **Per Workload, one write at a time, in order**: chronus's records (annotations) before its
  check message, so a promise a user can read is one a new leader can rebuild.
- **Records are content, not edits**: what chronus wants its annotations on a Workload to be
  (:meth:`want_records`) replaces whatever was queued before (coalesced), and is written whole
  by a server-side apply; content equal to what the API server has is never written.
- **A decision supersedes what is queued**: :meth:`claim` waits for the Workload's write in
  flight, drops its queued message (a ``Pending`` message landing after a start's ``Ready``
  would undo the start) and lets the caller write itself; queued records stay wanted, and the
  caller's own records, built from them, carry them.
- **Nothing is lost silently**: a records write that fails stays wanted and is queued again at
  the next round (:meth:`retry`); a message write that fails is reported (``on_failed``) so the
  next publish writes it again; a Workload that is gone (404) is dropped.
- **Decisions first at the API server too**: while a decision is being written, and for
  ``LINGER`` seconds after (a round's starts come one after the other), the workers send
  nothing new (:meth:`urgent`): on a loaded control plane the API server and Kueue, not the
  controller, are the bottleneck, and a start sent beside queued messages waits among them.
- **Only while leading**: each write checks ``may_write`` first (the leader Lease held).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter, deque
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

from chronus_py.backends.base import BackendUnavailable
from chronus_py.backends.kueue import workloads as wls
from chronus_py.backends.kueue.kube import Conflict, Kube

log = logging.getLogger("chronus.kueue")
WORKERS = 2  # writes in flight at once: the API server overlaps them; more only queue there
RETRIES = 2  # fresh reads after a running Workload's message met a conflict
LINGER = 0.3  # wall seconds the queue stays held after a decision's write (the next is near)


@dataclass(frozen=True)
class Message:
    """A check status to apply; ``still_ready`` for a ``Ready`` entry: applied only at the
    resourceVersion ``version`` (or the one a records write just returned, if the Workload is
    still reserved and ``Ready`` there), never onto a Workload Kueue has evicted meanwhile."""

    status: dict
    text: str
    version: str | None = None
    still_ready: frozenset[str] = frozenset()


class Writes:
    """The queue of informational writes, keyed by chronus id (``namespace/name``)."""

    def __init__(
        self,
        make_kube: Callable[[], Kube],
        *,
        on_written: Callable[[dict], None],
        on_failed: Callable[[str], None],
        may_write: Callable[[], bool],
        workers: int = WORKERS,
    ):
        self._make_kube = make_kube
        self._on_written = on_written
        self._on_failed = on_failed
        self._may_write = may_write
        self._cond = threading.Condition()
        self._wanted: dict[str, tuple[str, str, dict[str, str]]] = {}  # id -> ns, name, records
        self._messages: dict[str, tuple[str, str, Message]] = {}  # id -> ns, name, message
        self._queue: deque[str] = deque()
        self._queued: set[str] = set()
        self._busy: set[str] = set()
        self._stop = False
        self._urgent = 0  # decisions being written now
        self._urgent_until = 0.0  # monotonic: the queue is held until then
        self._kubes: list[Kube] = []
        self._threads = [
            threading.Thread(target=self._work, name=f"kueue-writes-{i}", daemon=True)
            for i in range(workers)
        ]
        for t in self._threads:
            t.start()

    # -- what the backend reads --------------------------------------------------------------------
    def wanted(self) -> dict[str, dict[str, str]]:
        """Records chronus wants but the API server may not have yet, by id (a copy)."""
        with self._cond:
            return {k: dict(v[2]) for k, v in self._wanted.items()}

    def wanted_of(self, job_id: str) -> dict[str, str] | None:
        with self._cond:
            got = self._wanted.get(job_id)
            return None if got is None else dict(got[2])

    def message(self, job_id: str) -> str | None:
        """The text of the check message queued or in flight for ``job_id``, if any."""
        with self._cond:
            got = self._messages.get(job_id)
            return None if got is None else got[2].text

    @property
    def writes(self) -> Counter[str]:
        out: Counter[str] = Counter()
        with self._cond:
            for k in self._kubes:
                out.update(k.writes)
        return out

    # -- what the backend asks -----------------------------------------------------------------
    def want_records(self, job_id: str, namespace: str, name: str, records: dict[str, str]) -> None:
        with self._cond:
            self._wanted[job_id] = (namespace, name, dict(records))
            self._enqueue(job_id)

    def want_message(self, job_id: str, namespace: str, name: str, message: Message) -> None:
        with self._cond:
            self._messages[job_id] = (namespace, name, message)
            self._enqueue(job_id)

    def retry(self) -> None:
        """Queue again the records of every Workload whose write failed (once a round)."""
        with self._cond:
            for job_id in self._wanted:
                self._enqueue(job_id)

    @contextmanager
    def urgent(self) -> Iterator[None]:
        """Hold the queue while a decision (start, preemption) is written, and ``LINGER``
        seconds after it: the API server serves the round's decisions first."""
        with self._cond:
            self._urgent += 1
        try:
            yield
        finally:
            with self._cond:
                self._urgent -= 1
                self._urgent_until = time.monotonic() + LINGER
                self._cond.notify_all()

    @contextmanager
    def claim(self, job_id: str) -> Iterator[dict[str, str] | None]:
        """Hold ``job_id`` for a write of the caller's (a decision): wait for its write in flight,
        drop its queued message, and give the records still wanted (None: none). The caller
        writes records that include them; :meth:`written` then forgets them."""
        with self._cond:
            while job_id in self._busy:
                self._cond.wait()
            self._busy.add(job_id)
            self._messages.pop(job_id, None)
            wanted = self._wanted.get(job_id)
        try:
            yield None if wanted is None else dict(wanted[2])
        finally:
            with self._cond:
                self._busy.discard(job_id)
                if job_id in self._wanted or job_id in self._messages:
                    self._enqueue(job_id)
                self._cond.notify_all()

    def written(self, job_id: str, records: dict[str, str] | None = None) -> None:
        """The API server took ``records``, so they are no longer wanted unless newer ones
        replaced them meanwhile (a worker's write); None: a write of the caller's under
        :meth:`claim`, built on the records wanted, which it supersedes whatever they are (a
        queued write of them after it would take back what it added)."""
        with self._cond:
            got = self._wanted.get(job_id)
            if got is not None and (records is None or got[2] == records):
                del self._wanted[job_id]

    def forget(self, job_ids: set[str]) -> None:
        """Workloads that are gone: nothing is written for them any more."""
        with self._cond:
            for job_id in job_ids:
                self._wanted.pop(job_id, None)
                self._messages.pop(job_id, None)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until nothing is queued or in flight (a clean shutdown, tests)."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._queue and not self._busy, timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Write what is queued (for up to ``timeout`` s), then stop the workers."""
        self.wait_idle(timeout)
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        for t in self._threads:
            t.join(timeout=1.0)
        for k in self._kubes:
            k.close()

    # -- the workers ---------------------------------------------------------------------------
    def _enqueue(self, job_id: str) -> None:
        if job_id not in self._queued:
            self._queued.add(job_id)
            self._queue.append(job_id)
            self._cond.notify()

    def _work(self) -> None:
        kube = self._make_kube()
        with self._cond:
            self._kubes.append(kube)
        while True:
            with self._cond:
                job_id = None
                while job_id is None:
                    if self._stop:
                        return
                    held = self._urgent_until - time.monotonic()
                    if self._urgent or held > 0:
                        self._cond.wait(max(held, 0.05))
                        continue
                    job_id = self._take()
                    if job_id is None:
                        self._cond.wait()
                wanted = self._wanted.get(job_id)
                message = self._messages.pop(job_id, None)
            try:
                self._write(kube, job_id, wanted, message)
            finally:
                with self._cond:
                    self._busy.discard(job_id)
                    if job_id in self._messages:
                        self._enqueue(job_id)
                    self._cond.notify_all()

    def _take(self) -> str | None:
        """The first queued id not in flight (marked in flight), or None."""
        for _ in range(len(self._queue)):
            job_id = self._queue.popleft()
            if job_id in self._busy:
                self._queue.append(job_id)
                continue
            self._queued.discard(job_id)
            if job_id not in self._wanted and job_id not in self._messages:
                continue
            self._busy.add(job_id)
            return job_id
        return None

    def _write(
        self,
        kube: Kube,
        job_id: str,
        wanted: tuple[str, str, dict[str, str]] | None,
        message: tuple[str, str, Message] | None,
    ) -> None:
        if not self._may_write():
            if message is not None:
                self._on_failed(job_id)
            return
        got = None
        try:
            if wanted is not None:
                ns, name, records = wanted
                got = kube.apply_records(ns, name, records)
                if got is None:  # the Workload is gone
                    self.forget({job_id})
                    return
                self._on_written(got)
                self.written(job_id, records)
            if message is None:
                return
            ns, name, msg = message
            if not msg.still_ready:
                self._on_written(kube.apply_workload_status(ns, name, msg.status))
                return
            version = msg.version
            for attempt in range(RETRIES + 1):
                if got is not None:
                    entry = wls.check_entry(got, msg.still_ready) or {}
                    if entry.get("state") != "Ready" or not wls.reserved(got):
                        self._on_failed(job_id)  # no longer running: the next publish says so
                        return
                    version = wls.meta(got).get("resourceVersion")
                try:
                    written = kube.apply_workload_status(
                        ns, name, msg.status, resource_version=version
                    )
                except Conflict:
                    # Kueue wrote it meanwhile (it admits a Workload right after its Ready):
                    # read it once more and write again if it still runs
                    if attempt == RETRIES:
                        raise
                    got = kube.workload(ns, name)
                    if got is None:
                        self.forget({job_id})
                        return
                    continue
                self._on_written(written)
                return
        except Conflict:
            self._on_failed(job_id)  # changed meanwhile: written again from the newer copy
        except BackendUnavailable as exc:
            event = {"event": "kueue_write_failed", "job": job_id, "error": str(exc)}
            log.warning(json.dumps(event))
            if message is not None:
                self._on_failed(job_id)
