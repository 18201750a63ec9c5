"""The jobs file of ``chronus layers emit``: which jobs hold which GPUs of one host, read at the
edge like every input (one line naming file and key on any problem).

    jobs:
      - {id: j1, gpus: [0, 1, 2, 3], cgroup: training.slice/j1.scope, preset: pytorch+nccl}
      - {id: j2, gpus: [4, 5], thread_names: {support: ["pcomm:ckpt_agent"]}, opt_in: false}
"""

from __future__ import annotations

from chronus_py.errors import InputError
from chronus_py.inputs import load_yaml
from chronus_py.layers.emit import PlacedJob
from chronus_py.layers.presets import DEFAULT_PRESET

_JOB_KEYS = {"id", "gpus", "cgroup", "preset", "thread_names", "opt_in"}


def read_jobs(path: str) -> list[PlacedJob]:
    """The jobs YAML of ``emit`` -> PlacedJob list; errors name the file and the job's key."""
    data = load_yaml(path, what="jobs file")
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
        raise InputError(path, "expected a mapping with a `jobs:` list", field="jobs")
    jobs = []
    for i, item in enumerate(data["jobs"]):
        where = f"jobs[{i}]"
        if not isinstance(item, dict):
            raise InputError(path, "expected a mapping with id and gpus", field=where)
        extra = sorted(set(map(str, item)) - _JOB_KEYS)
        if extra:
            raise InputError(
                path,
                f"unknown key (expected {', '.join(sorted(_JOB_KEYS))})",
                field=f"{where}.{extra[0]}",
            )
        job_id, gpus = item.get("id"), item.get("gpus")
        if not isinstance(job_id, (str, int)) or isinstance(job_id, bool) or str(job_id) == "":
            raise InputError(path, "required: a job id", field=f"{where}.id")
        if not isinstance(gpus, list) or not all(
            isinstance(g, int) and not isinstance(g, bool) for g in gpus
        ):
            raise InputError(path, "required: a list of host GPU indices", field=f"{where}.gpus")
        cgroup, preset = item.get("cgroup"), item.get("preset", DEFAULT_PRESET)
        names, opt_in = item.get("thread_names") or {}, item.get("opt_in", True)
        if cgroup is not None and not isinstance(cgroup, str):
            raise InputError(path, "expected a cgroup path string", field=f"{where}.cgroup")
        if not isinstance(preset, str):
            raise InputError(
                path, "expected a preset name such as pytorch+nccl", field=f"{where}.preset"
            )
        if not isinstance(names, dict) or not all(isinstance(v, list) for v in names.values()):
            raise InputError(path, "expected tier -> list of names", field=f"{where}.thread_names")
        if not isinstance(opt_in, bool):
            raise InputError(path, "expected true or false", field=f"{where}.opt_in")
        jobs.append(
            PlacedJob(
                job_id=str(job_id),
                gpus=tuple(gpus),
                cgroup=cgroup,
                preset=preset,
                thread_names={str(k): tuple(v) for k, v in names.items()},
                opt_in=opt_in,
            )
        )
    return jobs
