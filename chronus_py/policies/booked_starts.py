"""A lease plan's booked start times, converted per job when asked.

Why lazily: at 30 s leases, 8,500 guarantees of hours of work book about 7 million leases, and
turning every one into a start time took 2.4 s of CPU. The service asks for the plan under the
request lock at each re-plan's commit (to log the numbers behind a withdrawn promise, for the
few jobs withdrawn) and for one job's row in the web view; neither needs the other jobs'
times. The bookings are tuples, replaced and never changed in place, so a copy of the mapping
(not of the tuples) is a snapshot that later bookings do not alter.
"""

from __future__ import annotations

from typing import Iterator, Mapping


class BookedStarts(Mapping[str, tuple[float, ...]]):
    """Job -> the start times of the leases booked for it, from a snapshot of the bookings
    (job -> lease indices) and the lease length."""

    __slots__ = ("_booked", "_lease")

    def __init__(self, booked: Mapping[str, tuple[int, ...]], lease: float):
        self._booked = dict(booked)
        self._lease = lease

    def __getitem__(self, job: str) -> tuple[float, ...]:
        lease = self._lease
        return tuple(k * lease for k in self._booked[job])

    def __iter__(self) -> Iterator[str]:
        return iter(self._booked)

    def __len__(self) -> int:
        return len(self._booked)

    def __contains__(self, job: object) -> bool:
        return job in self._booked
