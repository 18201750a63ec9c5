"""slurmrestd's ``openapi/slurmctld`` data parsers v0.0.40 to v0.0.45 (Slurm 23.11 to 26.05):
their JSON to and from the model.

Tested: v0.0.40, v0.0.41 and v0.0.42 on Slurm 24.11. v0.0.43 (25.11), v0.0.44 (25.11, 26.05) and
v0.0.45 (26.05) are spoken as their published parsers say: every field used here is spelled and
shaped the same from v0.0.40 to v0.0.45 (Slurm's ``src/plugins/data_parser/v0.0.4x/parsers.c``).

What differs from v0.0.38: GPUs are ``tres_per_node: "gres/gpu:N"``; a release names its nodes
in ``required_nodes`` (a list) and its node count in ``minimum_nodes``/``maximum_nodes``; the
script sits in ``job``; the environment is a list of ``K=V``; times and counts are
``{"set", "infinite", "number"}`` objects; ``job_state`` and a node's ``state`` are lists of
flags, the base state among them. And a reply reports what the server did not take as sent in
``warnings`` (an unknown or deprecated field is *ignored*, not refused; a failed update is a
warning too): :meth:`RestV0040.refusals` counts those as errors, so a misspelt field can never
make a job run without its GPUs or on another node.
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping

from chronus_py.backends.slurm.model import (
    JobChange,
    NewJob,
    SlurmJob,
    SlurmNode,
    SlurmPartition,
    SlurmReservation,
    expand_hostlist,
    gpu_count,
    placement,
)

_JOB_BASE = {
    "PENDING",
    "RUNNING",
    "SUSPENDED",
    "COMPLETED",
    "CANCELLED",
    "FAILED",
    "TIMEOUT",
    "NODE_FAIL",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
    "OUT_OF_MEMORY",
}
# Flags that name the job's state over its base, in the order Slurm's own job_state_string()
# prefers them (a finishing job is RUNNING with COMPLETING: it still holds its GPUs).
_JOB_OVER_BASE = ("COMPLETING", "CONFIGURING", "RESIZING", "STOPPED", "SIGNALING")
_EXCLUSIVE = {"none", "user", "mcs", "topo"}  # ``shared`` of sbatch --exclusive[=user|mcs|topo]
_NODE_BASE = {"INVALID", "UNKNOWN", "DOWN", "IDLE", "ALLOCATED", "ERROR", "MIXED", "FUTURE"}

# Warnings that say the request was not done as sent: a field ignored (unknown, deprecated,
# removed, of the wrong type) or a refused update. "Job is in held state" on a held submission
# is what chronus asked for.
_REFUSAL = re.compile(
    r"ignor|deprecat|expected openapi type|unable to convert|non-zero return", re.IGNORECASE
)
_HELD = re.compile(r"held state", re.IGNORECASE)


def number(value: Any) -> float:
    """A v0.0.40+ number: ``{"set": true, "infinite": false, "number": 7}`` (or a plain number,
    as some fields stay); 0 when not set, infinity when infinite."""
    if isinstance(value, Mapping):
        if value.get("infinite"):
            return math.inf
        if not value.get("set", True):
            return 0.0
        value = value.get("number")
    return float(value or 0)


def _set(value: Any) -> bool:
    """Whether a v0.0.40+ number is given (``{"set": false}`` when not: an array task id)."""
    return isinstance(value, Mapping) and bool(value.get("set")) or isinstance(value, int)


def _time(value: Any) -> float:
    t = number(value)
    return t if math.isfinite(t) else 0.0


def _memory(value: Any) -> int:
    """MB per node a job asks for (0: not asked; infinite, ``--mem=0``, counts as not asked:
    the whole node, which any node has)."""
    mb = number(value)
    return int(mb) if math.isfinite(mb) else 0


def _names(value: Any) -> tuple[str, ...]:
    """A list of names, or one comma-separated string of them (as v0.0.38 spelled them)."""
    if isinstance(value, str):
        value = value.split(",")
    return tuple(str(v) for v in value or () if v)


def job_state(flags: Any) -> str:
    """The state, as v0.0.38 spelled it, of a v0.0.40+ ``job_state`` list of flags."""
    if isinstance(flags, str):
        flags = [flags]
    flags = [str(f).upper() for f in flags or ()]
    for over in _JOB_OVER_BASE:
        if over in flags:
            return over
    base = [f for f in flags if f in _JOB_BASE]
    return base[0] if base else (flags[0] if flags else "")


class RestV0040:
    """One of v0.0.40 to v0.0.45 (the same shapes): ``version`` is the one spoken."""

    plugin = "openapi/slurmctld"

    def __init__(self, version: str):
        self.version = version

    def job(self, j: Mapping[str, Any]) -> SlurmJob:
        nodes = str(j.get("nodes") or "")
        count = number(j.get("node_count"))
        return SlurmJob(
            id=int(j["job_id"]),
            name=str(j.get("name") or ""),
            state=job_state(j.get("job_state")),
            reason=str(j.get("state_reason") or ""),
            comment=str(j.get("comment") or ""),
            user=str(j.get("user_name") or ""),
            account=str(j.get("account") or ""),
            partition=str(j.get("partition") or ""),
            submit_time=_time(j.get("submit_time")),
            start_time=_time(j.get("start_time")),
            end_time=_time(j.get("end_time")),
            restart_cnt=int(number(j.get("restart_cnt"))),
            node_count=int(count) if math.isfinite(count) and count > 0 else 1,
            gpus_per_node=gpu_count(str(j.get("tres_per_node") or "")),
            nodes=tuple(expand_hostlist(nodes)),
            placement=placement(nodes, list(j.get("gres_detail") or [])),
            group="array"
            if j.get("array_task_string") or _set(j.get("array_task_id"))
            else "heterogeneous"
            if number(j.get("het_job_id"))
            else "",
            exclusive=bool({str(f).lower() for f in j.get("shared") or ()} & _EXCLUSIVE),
            required_nodes=tuple(expand_hostlist(str(j.get("required_nodes") or ""))),
            excluded_nodes=tuple(expand_hostlist(str(j.get("excluded_nodes") or ""))),
            constraint=str(j.get("features") or ""),
            reservation=str(j.get("resv_name") or ""),
            memory_per_node=_memory(j.get("memory_per_node")),
            dependency=str(j.get("dependency") or ""),
            gpus_per_job=gpu_count(str(j.get("tres_per_job") or "")),
            requeue=j.get("requeue") is not False,
        )

    def node(self, n: Mapping[str, Any]) -> SlurmNode:
        states = [str(s).upper() for s in n.get("state") or ()]
        base = [s for s in states if s in _NODE_BASE]
        partitions = n.get("partitions") or ()
        if isinstance(partitions, str):
            partitions = partitions.split(",")
        return SlurmNode(
            name=str(n["name"]),
            gpus=gpu_count(str(n.get("gres") or "")),
            state=(base[0] if base else "unknown").lower(),
            flags=tuple(s for s in states if s not in _NODE_BASE),
            reason=str(n.get("reason") or ""),
            partitions=tuple(partitions),
            features=_names(n.get("features")),
            memory=int(number(n.get("real_memory"))),
        )

    def reservation(self, r: Mapping[str, Any]) -> SlurmReservation:
        return SlurmReservation(
            name=str(r.get("name") or ""),
            nodes=tuple(expand_hostlist(str(r.get("node_list") or ""))),
            start_time=_time(r.get("start_time")),
            end_time=number(r.get("end_time")),  # infinite: for ever
        )

    def partition(self, p: Mapping[str, Any]) -> SlurmPartition:
        minutes = number((p.get("maximums") or {}).get("time"))  # not set: no limit either
        return SlurmPartition(
            name=str(p.get("name") or ""), max_time=minutes * 60.0 if minutes > 0 else math.inf
        )

    def submission(self, new: NewJob) -> dict:
        job: dict[str, Any] = {
            "script": new.script,
            "name": new.name,
            "comment": new.comment,
            "hold": True,
            "requeue": True,
            "tres_per_node": f"gres/gpu:{new.gpus_per_node}",
            "current_working_directory": new.workdir,
            "standard_output": new.output,
            "environment": [f"{k}={v}" for k, v in new.environment.items()],
        }
        if new.partition is not None:
            job["partition"] = new.partition
        return {"job": job}

    def change(self, c: JobChange) -> dict:
        out: dict[str, Any] = {}
        if c.hold is not None:
            out["hold"] = c.hold
        if c.comment is not None:
            out["comment"] = c.comment
        if c.nodes is not None:
            out["required_nodes"] = list(c.nodes)
        if c.gpus_per_node is not None:
            out["tres_per_node"] = f"gres/gpu:{c.gpus_per_node}"
        if c.node_count is not None:
            out["minimum_nodes"] = out["maximum_nodes"] = c.node_count
        if c.requeue is not None:
            out["requeue"] = c.requeue
        if c.begin_now:
            out["begin_time"] = "now"
        return out

    def refusals(self, reply: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        """The errors of a reply, and its warnings that say a field was ignored or an update
        refused."""
        out = list(reply.get("errors") or [])
        for w in reply.get("warnings") or []:
            text = str(w.get("description") or "")
            if _REFUSAL.search(text) and not _HELD.search(text):
                out.append({"error": text, "source": w.get("source", "")})
        return out
