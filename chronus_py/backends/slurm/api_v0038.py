"""slurmrestd's ``openapi/v0.0.38`` (Slurm 22.05 to 23.11): its JSON to and from the model.

Tested on Debian 12's Slurm 22.05. Numbers and times are plain integers, ``job_state`` a
string, a node's state a string plus ``state_flags``; GPUs are ``gres`` (``gpu:N``) on submit
and release; a release names its nodes in ``nodelist``; ``begin_time`` takes ``"now"``; the
script sits beside ``job``, the environment is an object. Replies carry no warnings.
"""

from __future__ import annotations

import math
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

_EXCLUSIVE = {"none", "user", "mcs", "topo"}
"""A job's ``shared`` when sbatch --exclusive[=user|mcs|topo] keeps others off its nodes."""


class RestV0038:
    version = "v0.0.38"
    plugin = "openapi/v0.0.38"

    def job(self, j: Mapping[str, Any]) -> SlurmJob:
        nodes = str(j.get("nodes") or "")
        return SlurmJob(
            id=int(j["job_id"]),
            name=str(j.get("name") or ""),
            state=str(j.get("job_state") or ""),
            reason=str(j.get("state_reason") or ""),
            comment=str(j.get("comment") or ""),
            user=str(j.get("user_name") or ""),
            account=str(j.get("account") or ""),
            partition=str(j.get("partition") or ""),
            submit_time=float(j.get("submit_time") or 0),
            start_time=float(j.get("start_time") or 0),
            end_time=float(j.get("end_time") or 0),
            restart_cnt=int(j.get("restart_cnt") or 0),
            node_count=int(j.get("node_count") or 1),
            gpus_per_node=gpu_count(str(j.get("tres_per_node") or "")),
            nodes=tuple(expand_hostlist(nodes)),
            placement=placement(nodes, list(j.get("gres_detail") or [])),
            group="array"
            if j.get("array_task_string") or j.get("array_task_id") is not None
            else "heterogeneous"
            if j.get("het_job_id")
            else "",
            exclusive=str(j.get("shared") or "") in _EXCLUSIVE,
            required_nodes=tuple(expand_hostlist(str(j.get("required_nodes") or ""))),
            excluded_nodes=tuple(expand_hostlist(str(j.get("excluded_nodes") or ""))),
            constraint=str(j.get("features") or ""),
            reservation=str(j.get("resv_name") or ""),
            memory_per_node=int(j.get("memory_per_node") or 0),
            dependency=str(j.get("dependency") or ""),
            gpus_per_job=gpu_count(str(j.get("tres_per_job") or "")),
            requeue=j.get("requeue") is not False,
        )

    def node(self, n: Mapping[str, Any]) -> SlurmNode:
        return SlurmNode(
            name=str(n["name"]),
            gpus=gpu_count(str(n.get("gres") or "")),
            state=str(n.get("state") or "").lower(),
            flags=tuple(str(f).upper() for f in n.get("state_flags") or ()),
            reason=str(n.get("reason") or ""),
            partitions=tuple(n.get("partitions") or ()),
            features=tuple(filter(None, str(n.get("features") or "").split(","))),
            memory=int(n.get("real_memory") or 0),
        )

    def reservation(self, r: Mapping[str, Any]) -> SlurmReservation:
        return SlurmReservation(
            name=str(r.get("name") or ""),
            nodes=tuple(expand_hostlist(str(r.get("node_list") or ""))),
            start_time=float(r.get("start_time") or 0),
            end_time=float(r.get("end_time") or 0),
        )

    def partition(self, p: Mapping[str, Any]) -> SlurmPartition:
        minutes = p.get("max_time_limit")  # -1 (or unset): INFINITE
        limited = isinstance(minutes, int) and 0 < minutes < 0xFFFFFFFE
        return SlurmPartition(
            name=str(p.get("name") or ""), max_time=minutes * 60.0 if limited else math.inf
        )

    def submission(self, new: NewJob) -> dict:
        job: dict[str, Any] = {
            "name": new.name,
            "comment": new.comment,
            "hold": True,
            "requeue": True,
            "gres": f"gpu:{new.gpus_per_node}",
            "current_working_directory": new.workdir,
            "standard_output": new.output,
            "environment": dict(new.environment),
        }
        if new.partition is not None:
            job["partition"] = new.partition
        return {"script": new.script, "job": job}

    def change(self, c: JobChange) -> dict:
        out: dict[str, Any] = {}
        if c.hold is not None:
            out["hold"] = c.hold
        if c.comment is not None:
            out["comment"] = c.comment
        if c.nodes is not None:
            out["nodelist"] = ",".join(c.nodes)
        if c.gpus_per_node is not None:
            out["gres"] = f"gpu:{c.gpus_per_node}"
        if c.node_count is not None:  # v0.0.38 refuses maximum_nodes; it takes "min-max"
            out["nodes"] = f"{c.node_count}-{c.node_count}"
        if c.requeue is not None:
            out["requeue"] = c.requeue
        if c.begin_now:
            out["begin_time"] = "now"
        return out

    def refusals(self, reply: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        """The entries of a reply that mean the request was not done as sent."""
        return list(reply.get("errors") or [])
