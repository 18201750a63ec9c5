"""Which jobs a lease plan books in a given lease, without reading every booking.

Why: when a lease begins while the service's re-plan computes in a forked child, the committed
plan is told (``LeaseSelector.lease_began``) and re-tiers the jobs it booked in that lease. Found
by reading every booking, that read 6,024 tuples in a request's call, and with the child alive
each one read (a reference count written) cost the copy of its page: 46-85 ms of CPU at 10 s
leases (issue 27, session 14), and 10-14 ms before every fork. A re-plan read from the child
arrives as runs of consecutive leases (``policies/replanned.py``), so the jobs booked in a
lease are a comparison of two small arrays. A plan built in this process (the service's first,
before any re-plan was read) is indexed by each booking's first and last lease, read once
(:meth:`BookedByLease.spanning`): the service's first ``lease_began`` is before its first fork,
so the reads after the fork find the index (issue 27, session 16). Jobs booked since
(``LeaseSelector._book``) are kept aside with their first and last lease.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class BookedByLease:
    """Runs of booked leases of the bookings mapping ``booked`` (valid while the plan holds
    that very mapping: a re-plan in the same process replaces it): run ``r`` covers
    ``jobs[owners[r]]``'s bookings from lease ``starts[r]`` up to ``ends[r]`` (excluded), all
    of them or a superset (a booking's span, gaps included); ``since`` the jobs booked into
    the mapping after, with the span of their booking."""

    booked: dict[str, tuple[int, ...]]
    jobs: list[str]
    owners: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    since: dict[str, tuple[int, int]] = field(default_factory=dict)

    @classmethod
    def spanning(cls, booked: dict[str, tuple[int, ...]]) -> BookedByLease:
        """The index of ``booked`` by the span of each booking (one read of each)."""
        spans = [(job, leases[0], leases[-1] + 1) for job, leases in booked.items() if leases]
        jobs = [job for job, _, _ in spans]
        starts = np.fromiter((s for _, s, _ in spans), dtype=np.int64, count=len(spans))
        ends = np.fromiter((e for _, _, e in spans), dtype=np.int64, count=len(spans))
        return cls(booked, jobs, np.arange(len(jobs)), starts, ends)

    def holds(self, booked: dict[str, tuple[int, ...]]) -> bool:
        return booked is self.booked

    def add(self, job: str, first: int, last: int) -> None:
        """``job`` booked (again) from lease ``first`` to ``last`` (included)."""
        self.since[job] = (first, last + 1)

    def candidates(self, lease: int) -> set[str]:
        """Jobs that may be booked in ``lease``: every one whose run covers it, and those
        booked since whose span does (a job given back since, or booked around it, may be
        among them: the caller checks)."""
        hits = self.owners[(self.starts <= lease) & (lease < self.ends)].tolist()
        jobs = self.jobs
        found = {jobs[i] for i in hits}
        found.update(job for job, (first, end) in self.since.items() if first <= lease < end)
        return found
