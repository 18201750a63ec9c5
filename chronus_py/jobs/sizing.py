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

The job is the one :class:`~chronus_py.jobs.model.Job`: its curve (``sizes``, ``rates``) and work
(``iterations``) are its fields, as in an elastic replay; :func:`curve_sizes` checks a range
against the throughput tables and gives them, and the round plans the job at its size in
seconds (``Job.seconds``).

A running elastic job keeps the size it runs at: resizing a running job (its checkpoint, restart
and the plan around it) is what ``chronus replay --elastic`` models; a round that resized would
have to stop the job, which the round does not decide on its own.
"""

from __future__ import annotations

from chronus_py.jobs.sizes import elastic_sizes
from chronus_py.jobs.throughputs import ThroughputTable


def curve_sizes(
    table: ThroughputTable, model: str, batch: int, min_gpus: int, max_gpus: int
) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """The sizes between ``min_gpus`` and ``max_gpus`` the curve of (model, batch) allows, and
    their iterations per second (a :class:`~chronus_py.jobs.model.Job`'s ``sizes`` and
    ``rates``); raises ValueError (the caller names the field) when there is no curve or no
    size in the range."""
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
    return tuple(sizes), tuple(curve[n] for n in sizes)
