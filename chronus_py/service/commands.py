"""A round's backend commands, carried out after the round has decided and outside the request
lock, and the one lock every backend call goes through.

Why: a command is a few requests to the cluster manager (three to the kube-apiserver for a Kueue
start, REST calls to slurmrestd for Slurm). A round that started 60 Workloads issued them all
while holding the lock every request takes, so a cheap read such as ``GET /v1/cluster`` waited
up to 14.7 s (benchmarks/RESULTS.md, "Issue 24: scale"). A round is now five steps
(``Service.take_arrivals``, ``act``, ``decide``, ``act``, ``record``); only ``act`` runs without
the request lock, and it touches nothing but the backend and the queue below.

The design is deliberately plain:

- one queue of commands, in the order the round decided them (preempts before the starts that
  use the freed GPUs), drained in that order by the scheduling loop's own thread; the loop runs
  the next round only after ``record``, so two rounds' commands never interleave;
- one re-entrant lock (:attr:`SerialBackend.lock`) around every backend call, from the loop or a
  request, and around the queue. A request that ends a job (a cancellation) takes it, drops the
  job's queued commands and calls the backend, all in one hold: either the job's start was
  carried out before, and the cancellation stops a running job (as when a cancellation came
  after a round before), or the start is never issued. A backend call thus waits for at most
  the one command in flight, never for a round's batch;
- the clock (``now``, ``wall_seconds_until``) is arithmetic on fields fixed at start in every
  backend (``clock.CompressedTime``, the sim's anchor), so it is called without the lock.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from chronus_py.jobs.model import Job

CLOCK = frozenset({"now", "wall_seconds_until"})


@dataclass(frozen=True, slots=True)
class Command:
    """One backend command a round decided: ``submit`` (an arrival the round admitted, with
    its job and fields), ``preempt`` or ``start`` (with its placement), the reason for the
    decision log, and the round's instant."""

    action: str
    job_id: str
    placement: Mapping[str, tuple[int, ...]] | None
    reason: str
    at: float
    job: Job | None = None
    fields: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Outcome:
    """A command ``act`` issued, and the error the backend raised (None: it took effect)."""

    command: Command
    error: Exception | None = None


class SerialBackend:
    """The backend with every call but the clock's made under :attr:`lock`: backends keep
    mutable state (the sim's world, Kueue's copies of Workloads, a REST session) and were
    written for one caller at a time, which the request lock used to guarantee."""

    def __init__(self, backend: Any):
        self.inner = backend
        self.lock = threading.RLock()

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.inner, name)
        if name in CLOCK or not callable(value):
            return value
        # wrapped once and kept (found before ``__getattr__`` from then on): a backend's
        # methods are fixed for its life, and a wrapper built per call was 3-5% of the
        # server's GIL time under churn (issue 27, session 14)
        locked = self.__dict__[name] = _locked(value, self.lock)
        return locked


def _locked(fn: Callable[..., Any], lock: threading.RLock) -> Callable[..., Any]:
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        with lock:
            return fn(*args, **kwargs)

    return call
