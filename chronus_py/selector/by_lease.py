"""Which jobs a lease plan books in a given lease, without reading every booking.

Why: when a lease begins while the service's re-plan computes in a forked child, the committed
plan is told (``LeaseSelector.lease_began``) and re-tiers the jobs it booked in that lease. Found
by reading every booking, that read 6,024 tuples in a request's call, and with the child alive
each one read (a reference count written) cost the copy of its page: 46-85 ms of CPU at 10 s
leases (issue 27, session 14), and 10-14 ms before every fork. A re-plan read from the child
arrives as runs of consecutive leases (``policies/replanned.py``), so the jobs booked in a
lease are a comparison of two small arrays; jobs booked since (``LeaseSelector._book``) are
kept aside and checked one by one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class BookedByLease:
    """Runs of booked leases of the bookings mapping ``booked`` (valid while the plan holds
    that very mapping: a re-plan in the same process replaces it): run ``r`` books
    ``jobs[owners[r]]`` from lease ``starts[r]`` up to ``ends[r]`` (excluded); ``since`` the
    jobs booked into the mapping after."""

    booked: dict[str, tuple[int, ...]]
    jobs: list[str]
    owners: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    since: set[str] = field(default_factory=set)

    def holds(self, booked: dict[str, tuple[int, ...]]) -> bool:
        return booked is self.booked

    def candidates(self, lease: int) -> set[str]:
        """Jobs that may be booked in ``lease``: every one whose run covers it, and those
        booked since (a job given back since may be among them: the caller checks)."""
        hits = self.owners[(self.starts <= lease) & (lease < self.ends)].tolist()
        jobs = self.jobs
        return {jobs[i] for i in hits} | self.since
