"""Thread-name presets: which task names of a training framework belong to which tier.

scx_layered sees only what the kernel sees: a thread's ``comm`` (at most 15 bytes, set with
``pthread_setname_np``/``prctl(PR_SET_NAME)``) and its process leader's comm. The presets list
names the frameworks set themselves, with the place each comes from, so they can be checked
against a new release. A name is a comm prefix; ``pcomm:NAME`` matches the process name instead
(every thread of that process). A job may replace a tier's names (``thread_names``), e.g. to add
its checkpoint agent, whose name no framework fixes.

Tiers (Meta's four layers, the fourth being "everything else"):
``critical`` -- kernel launch, trainer main, comms and accelerator monitoring;
``data`` -- data loading and transforms; ``support`` -- checkpointing, rendezvous, launchers.

Sources (PyTorch 2.x, NCCL 2.x):

* ``pt_main_thread``: ``torch/csrc/Module.cpp`` (``THPModule_initExtension``,
  ``c10::setThreadName("pt_main_thread")`` at ``import torch``): the Python main thread, which
  launches the forward pass. Threads it starts later without a name of their own inherit it
  (OpenMP workers, Python threads, NCCL threads unless ``NCCL_SET_THREAD_NAME=1``).
* ``pt_autograd_``: ``torch/csrc/autograd/engine.cpp`` (``"pt_autograd_" + device``): the
  per-device backward threads, which launch the backward kernels.
* ``cuda-EvtHandlr``: the CUDA driver's event-handler thread, as listed by ``ps -T`` and Nsight
  Systems (libcuda does not document it).
* ``pt_nccl_``: ``torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp``: ``pt_nccl_watchdg`` (the
  watchdog) and ``pt_nccl_heartbt`` (heartbeat monitor).
* ``NCCL ``: NCCL ``ncclSetThreadName`` ("NCCL Proxy ..", "NCCL Service ..", "NCCL IbAsync ..",
  ...); only set when ``NCCL_SET_THREAD_NAME=1`` (default off).
* ``pcomm:pt_data_worker``: ``torch/utils/data/_utils/worker.py`` (``_worker_loop``,
  ``torch.multiprocessing._set_thread_name("pt_data_worker")``): DataLoader worker processes.
* ``pt_data_pin``: ``torch/utils/data/_utils/pin_memory.py`` (``_pin_memory_loop``): the
  pin-memory thread.
* ``pcomm:pt_elastic``: ``torch/distributed/run.py`` (``run``): the torchrun agent process.
* ``pt_tcpstore``: ``torch/csrc/distributed/c10d/TCPStore*.cpp`` (``pt_tcpstore``,
  ``pt_tcpstore_uv``): the rendezvous store daemon.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

TIERS = ("critical", "data", "support")
MAX_COMM_NAME = 15  # bytes; the task comm buffer is 16 with the NUL


@dataclass(frozen=True, slots=True)
class ThreadPreset:
    description: str
    critical: tuple[str, ...] = ()
    data: tuple[str, ...] = ()
    support: tuple[str, ...] = ()


PRESETS: dict[str, ThreadPreset] = {
    "pytorch": ThreadPreset(
        "PyTorch trainer, autograd, CUDA driver and torchrun/TCPStore threads",
        critical=("pt_main_thread", "pt_autograd_", "cuda-EvtHandlr"),
        support=("pcomm:pt_elastic", "pt_tcpstore"),
    ),
    "nccl": ThreadPreset(
        "PyTorch's NCCL watchdog/heartbeat and NCCL's own named threads",
        critical=("pt_nccl_", "NCCL "),
    ),
    "dataloader": ThreadPreset(
        "torch.utils.data DataLoader worker processes and the pin-memory thread",
        data=("pcomm:pt_data_worker", "pt_data_pin"),
    ),
}
DEFAULT_PRESET = "pytorch+nccl+dataloader"


def resolve_thread_names(
    preset: str, overrides: Mapping[str, Sequence[str]] | None = None
) -> dict[str, tuple[str, ...]]:
    """Names per tier for ``preset`` ("pytorch", or several joined with "+"), with ``overrides``
    replacing whole tiers. Raises ValueError naming the bad preset, tier or name."""
    names: dict[str, list[str]] = {t: [] for t in TIERS}
    for part in preset.split("+"):
        part = part.strip()
        if part not in PRESETS:
            raise ValueError(f"unknown preset {part!r} (known: {', '.join(PRESETS)})")
        for tier in TIERS:
            for name in getattr(PRESETS[part], tier):
                if name not in names[tier]:
                    names[tier].append(name)
    for tier, values in (overrides or {}).items():
        if tier not in TIERS:
            raise ValueError(f"unknown tier {tier!r} in thread_names (tiers: {', '.join(TIERS)})")
        if not isinstance(values, (list, tuple)) or not all(isinstance(v, str) for v in values):
            raise ValueError(f"thread_names.{tier} must be a list of names")
        names[tier] = list(dict.fromkeys(values))
    for tier, values in names.items():
        for name in values:
            check_name(name, f"thread_names.{tier}")
    return {t: tuple(v) for t, v in names.items()}


def check_name(name: object, where: str) -> None:
    if not isinstance(name, str):
        raise ValueError(f"{where}: {name!r} is not a string")
    _, text = split_name(name)
    if not text:
        raise ValueError(f"{where}: empty name")
    if "\0" in text:
        raise ValueError(f"{where}: {name!r} holds a NUL byte")
    if len(text.encode("utf-8")) > MAX_COMM_NAME:
        raise ValueError(
            f"{where}: {text!r} is longer than {MAX_COMM_NAME} bytes, the kernel's comm limit"
        )


def split_name(name: str) -> tuple[str, str]:
    """ "pcomm:foo" -> ("PcommPrefix", "foo"); "comm:foo" or "foo" -> ("CommPrefix", "foo")."""
    if name.startswith("pcomm:"):
        return "PcommPrefix", name[len("pcomm:") :]
    if name.startswith("comm:"):
        return "CommPrefix", name[len("comm:") :]
    return "CommPrefix", name
