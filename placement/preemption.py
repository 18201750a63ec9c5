"""Preemption policy: which priorities may be evicted in which order, and lazy downgrades.

Victims are always whole gangs (evicting one pod of a gang kills the gang, as in HiveD). A
guaranteed job first tries to evict only opportunistic jobs (threshold 0), then its own VC's jobs
one priority level at a time, lowest first, so the victims have the lowest priority that works.

Lazy preemption: a guaranteed victim that allows it is first *downgraded* (its VC binding is
released and its GPUs count as opportunistic) and the preemptor placed again; if the preemptor
then fits elsewhere the victim keeps running, otherwise it is evicted like any opportunistic job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from placement.binding import Tenants
from placement.cells import Cell
from placement.jobs import Job, Ledger


def thresholds(jobs: Iterable[Job], vc: str, priority: int) -> list[int]:
    """Usable-below priorities for the preemption passes of a ``priority`` job of ``vc``."""
    own = sorted({j.priority + 1 for j in jobs if j.vc == vc and 0 <= j.priority < priority})
    return [0, *own]


@dataclass
class Downgrade:
    """What a lazy downgrade changed, so that it can be undone exactly."""

    job: Job
    priority: int
    regions: dict[Cell, int]
    unbound: list[Cell]


def downgrade(job: Job, ledger: Ledger, tenants: Tenants) -> Downgrade:
    tenant = tenants.by_name[job.vc]
    regions, job.regions = job.regions, {}
    unbound = []
    for region, k in regions.items():
        tenant.refs[region] -= k
        if tenant.refs[region] == 0:
            tenants.unbind(tenant, region)
            unbound.append(region)
    record = Downgrade(job, job.priority, regions, unbound)
    ledger.reprioritise(job, -1)
    return record


def undo(record: Downgrade, ledger: Ledger, tenants: Tenants) -> None:
    tenant = tenants.by_name[record.job.vc]
    for region in record.unbound:
        tenants.bind(tenant, region)
    for region, k in record.regions.items():
        tenant.refs[region] += k
    record.job.regions = record.regions
    ledger.reprioritise(record.job, record.priority)
