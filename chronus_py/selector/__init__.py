"""The Chronus lease selector: guarantees against a lease plan, SRTF for everything else."""

from chronus_py.selector.admission import LeaseSelector, SelectorStats, Tier
from chronus_py.selector.leases import lease_of, leases_needed
from chronus_py.selector.settings import ChronusSettings

__all__ = ["LeaseSelector", "ChronusSettings", "SelectorStats", "Tier", "lease_of", "leases_needed"]
