"""Elastic jobs in a scheduling round (``chronus plan`` and ``chronus serve``): each waiting elastic
job gets one size, then the round treats it as a rigid job of that size.

A job may run on the powers of two from ``min_gpus`` to ``max_gpus`` that its (model, global
batch) throughput curve holds (``jobs.elastic_sizes``: never past its fastest size). The policy
picks the size (``Policy.size``, through ``round.choose_size``): by default its *smallest size
that still meets its deadline*, decided per job:
- with a lease plan (Chronus), the smallest size the plan can guarantee now (the admission
  probe, a dry run against the guarantees already given); else the largest size, which competes
  unguaranteed with the best chance;
- without one, the smallest size that meets its first deadline alone from now, restart included;
- a best-effort job takes its largest size, since nothing is gained by waiting on a small one.

A running elastic job keeps the size it runs at: resizing a running job (its checkpoint, restart
and the plan around it) is what ``chronus replay --elastic`` models; a round that resized would
have to stop the job, which the round does not decide on its own.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from chronus_py.jobs.sizes import elastic_sizes
from chronus_py.jobs.throughputs import ThroughputTable


@dataclass(frozen=True, slots=True)
class Elastic:
    """What makes a job elastic: sizes it may run on, their iterations per second, its work."""

    model: str
    batch: int
    sizes: tuple[int, ...]
    rates: tuple[float, ...]
    iterations: float
    iterations_done: float = 0.0

    def rate(self, gpus: int) -> float:
        return self.rates[self.sizes.index(gpus)]

    def seconds(self, gpus: int) -> float:
        """Seconds of work at ``gpus`` GPUs: all its iterations at that size's throughput."""
        return self.iterations / self.rate(gpus)

    def done_seconds(self, gpus: int) -> float:
        return self.iterations_done / self.rate(gpus)

    def up_to(self, gpus: int) -> Elastic | None:
        """The job on a cluster of ``gpus`` GPUs: its sizes that fit (None if none does)."""
        keep = [i for i, n in enumerate(self.sizes) if n <= gpus]
        if not keep:
            return None
        return replace(
            self,
            sizes=tuple(self.sizes[i] for i in keep),
            rates=tuple(self.rates[i] for i in keep),
        )


def elastic_spec(
    table: ThroughputTable,
    model: str,
    batch: int,
    min_gpus: int,
    max_gpus: int,
    iterations: float,
    iterations_done: float = 0.0,
) -> Elastic:
    """The sizes between ``min_gpus`` and ``max_gpus`` the curve of (model, batch) allows; raises
    ValueError (the caller names the field) when there is no curve or no size in the range."""
    curve = table.curve(model, batch)
    if curve is None:
        models = sorted({m for m, _ in table.rates})
        raise ValueError(
            f"no throughput curve for model {model!r} at global batch {batch} in "
            f"{table.source} (models: {', '.join(models)})"
        )
    sizes = [n for n in elastic_sizes(curve, batch, max_gpus) if n >= min_gpus]
    if not sizes:
        measured = sorted(curve)
        raise ValueError(
            f"no power-of-two size in [{min_gpus}, {max_gpus}] that the {model} curve at batch "
            f"{batch} measures and that does not slow it down (measured: {measured})"
        )
    return Elastic(
        model, batch, tuple(sizes), tuple(curve[n] for n in sizes), iterations, iterations_done
    )
