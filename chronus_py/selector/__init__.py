"""The Chronus lease selector: guarantees against a lease plan, SRTF for everything else."""
from chronus_py.selector.admission import LeaseSelector, SelectorStats, Tier
from chronus_py.selector.leases import DEFAULT_LEASE, lease_of, leases_needed, round_up_gpus
from chronus_py.selector.settings import LeaseSettings

__all__ = ["LeaseSelector", "LeaseSettings", "SelectorStats", "Tier", "DEFAULT_LEASE", "lease_of",
           "leases_needed", "round_up_gpus"]
