"""The annotations of the Jobs behind newly reserved Workloads, read several at a time.

Why: chronus's annotations are on the user's Job, which Kueue does not copy to the Workload,
so each arrival costs one read of its Job. Read one after the other under the request lock,
the 200-job trace's arrivals held a round for 12 s of every 90 on a loaded machine (issue 24,
session 13). The backend's ``look`` (before the round, off the request lock) reads them here,
a few in flight at once; ``arrivals`` then uses what was read.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Mapping

from chronus_py.backends.base import BackendUnavailable
from chronus_py.backends.kueue.kube import Kube

READERS = 4


class JobNotes:
    """Reads Jobs' annotations through clients of its own, one per reader thread."""

    def __init__(self, make_kube: Callable[[], Kube], *, readers: int = READERS):
        self._make_kube = make_kube
        self._local = threading.local()
        self._kubes: list[Kube] = []
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(readers, thread_name_prefix="kueue-jobs")

    @property
    def reads(self) -> int:
        with self._lock:
            return sum(k.reads for k in self._kubes)

    def read(self, jobs: Mapping[str, tuple[str, str]]) -> dict[str, dict[str, str]]:
        """id -> its Job's annotations ({} for a Job that is gone), for ``jobs`` (id ->
        namespace, Job name); ids whose read failed are left out (read again later)."""
        ids = list(jobs)
        answers = self._pool.map(lambda i: self._one(*jobs[i]), ids)
        return {i: got for i, got in zip(ids, answers) if got is not None}

    def _one(self, namespace: str, name: str) -> dict[str, str] | None:
        kube = getattr(self._local, "kube", None)
        if kube is None:
            kube = self._local.kube = self._make_kube()
            with self._lock:
                self._kubes.append(kube)
        try:
            return kube.job_annotations(namespace, name)
        except BackendUnavailable:
            return None

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        for k in self._kubes:
            k.close()
