"""Exact busy GPUs over time, recorded by wrapping a policy (the engine stays untouched).

The scheduler calls ``policy.prepare`` at every decision instant, after that instant's completions
and before its starts and preemptions, with the free GPU count. So on ``[t_i, t_{i+1})`` the busy
GPUs are those busy at ``prepare(t_{i+1})`` plus the GPUs of the jobs that completed exactly at
``t_{i+1}`` — known once the replay is over. That makes the level, and so hourly GPU time, exact.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Collection, Iterable

import numpy as np

from chronus_py.jobs.state import JobState
from chronus_py.policies.base import Policy, View

HOUR = 3600.0


class BusyRecorder:
    """Behaves as the wrapped policy; remembers (instant, busy GPUs) at each decision point."""

    def __init__(self, policy: Policy):
        self.policy = policy
        self.instants: list[float] = []
        self.busy: list[int] = []

    def __getattr__(self, name: str):
        """Everything but ``prepare`` is the wrapped policy's, so a property the policy
        interface gains (the loop's ``elastic``, ``arrival_window``...) needs nothing here."""
        if name == "policy":  # not set yet (unpickling): no recursion through this method
            raise AttributeError(name)
        return getattr(self.policy, name)

    def prepare(self, view: View) -> Collection[str]:
        self.instants.append(view.now)
        self.busy.append(view.total_gpus - view.free_gpus)
        return self.policy.prepare(view)

    def levels(self, jobs: Iterable[JobState]) -> tuple[np.ndarray, np.ndarray]:
        """Breakpoints ``t`` (n+1) and busy GPUs on each ``[t[i], t[i+1])`` (n)."""
        ending = defaultdict(int)
        for state in jobs:
            ending[state.finish] += state.gpus
        times = np.asarray(self.instants, dtype=float)
        after = np.array(
            [
                self.busy[i + 1] + ending.get(self.instants[i + 1], 0)
                for i in range(len(self.instants) - 1)
            ],
            dtype=float,
        )
        return times, after


def hourly_busy(times: np.ndarray, level: np.ndarray, origin: float) -> np.ndarray:
    """GPU-seconds busy in each hour since ``origin``, from a piecewise-constant level."""
    if len(level) == 0:
        return np.zeros(0)
    end = times[-1]
    edges = origin + HOUR * np.arange(int(np.ceil((end - origin) / HOUR)) + 1)
    cumulative = np.concatenate([[0.0], np.cumsum(level * np.diff(times))])
    at_edges = np.interp(np.clip(edges, times[0], end), times, cumulative)
    return np.diff(at_edges)
