"""Emitter: goldens for the example hosts, the strict validator over random placements on random
hosts, and the emitter's own input errors."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from layers_helpers import EXAMPLE_HOSTS, GOLDEN, make_host

from chronus_py.cli import main
from chronus_py.errors import InputError
from chronus_py.layers.emit import PlacedJob, emit_host_layers, normalize_cgroup
from chronus_py.layers.host import HostTopology
from chronus_py.layers.jobs_file import read_jobs
from chronus_py.layers.validate import validate_layers

UPDATE = os.environ.get("CHRONUS_UPDATE_GOLDEN") == "1"

SCENARIOS = [
    # (golden name, host file, jobs file, extra CLI args)
    (
        "gpu-2s8g-01",
        EXAMPLE_HOSTS / "2socket-8gpu.yaml",
        EXAMPLE_HOSTS / "jobs-2socket-8gpu.yaml",
        [],
    ),
    ("gpu-1s4g-01", EXAMPLE_HOSTS / "1socket-4gpu.yaml", GOLDEN / "jobs-1socket-4gpu.yaml", []),
    (
        "gpu-2s8g-01-span",
        EXAMPLE_HOSTS / "2socket-8gpu.yaml",
        GOLDEN / "jobs-2socket-8gpu-span.yaml",
        [],
    ),
    (
        "gpu-2s8g-01-span-1.0.20",
        EXAMPLE_HOSTS / "2socket-8gpu.yaml",
        GOLDEN / "jobs-2socket-8gpu-span.yaml",
        ["--scx-version", "1.0.20"],
    ),
]


def _compare(path, text):
    if UPDATE:
        path.write_text(text)
    assert path.read_text() == text, (
        f"{path.name} differs; rerun with CHRONUS_UPDATE_GOLDEN=1 if intended"
    )


@pytest.mark.parametrize("name,host_file,jobs_file,extra", SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_example_hosts_match_goldens(name, host_file, jobs_file, extra, tmp_path, capsys):
    out = tmp_path / "out.json"
    code = main(
        [
            "layers",
            "emit",
            "--host",
            str(host_file),
            "--jobs",
            str(jobs_file),
            "-o",
            str(out),
            *extra,
        ]
    )
    assert code == 0
    _compare(GOLDEN / f"{name}.json", out.read_text())
    env_line = capsys.readouterr().err.strip().removeprefix("/etc/default/scx: ")
    _compare(GOLDEN / f"{name}.env", env_line + "\n")
    host = HostTopology.from_yaml(host_file)
    version = extra[1] if extra else None
    layers = emit_host_layers(host, read_jobs(str(jobs_file)), scx_version=version)
    assert (
        validate_layers(out.read_text(), host=host, scx_version=version, flags=layers.flags) == []
    )
    assert code == main(
        [
            "layers",
            "validate",
            str(out),
            "--host",
            str(host_file),
            f"--flags={' '.join(layers.flags)}",
        ]
    )


def test_two_socket_golden_keeps_each_job_on_its_gpus_node():
    host = HostTopology.from_yaml(EXAMPLE_HOSTS / "2socket-8gpu.yaml")
    out = emit_host_layers(host, read_jobs(str(EXAMPLE_HOSTS / "jobs-2socket-8gpu.yaml")))
    by_name = {layer["name"]: layer for layer in out.config}
    assert [layer["name"] for layer in out.config] == [
        "l1_critical_n0",
        "l1_critical_n1",
        "l2_data_n0",
        "l2_data_n1",
        "l3_support",
        "l4_rest",
    ]
    assert by_name["l1_critical_n0"]["kind"]["Grouped"]["nodes"] == [0]
    assert "llama-70b" in by_name["l1_critical_n0"]["comment"]
    assert "bert-ft" in by_name["l1_critical_n1"]["comment"]
    assert "resnet-sweep" not in out.to_json()  # opted out: left to the catch-all
    assert out.flags == ("--enable-gpu-support",)
    assert (
        out.env_line("/etc/scx_layered/x.json")
        == 'SCX_FLAGS="--enable-gpu-support f:/etc/scx_layered/x.json"'
    )
    assert out.env_file().startswith("SCX_SCHEDULER=scx_layered\nSCX_FLAGS=")


def test_spanning_job_gets_numa_groups_and_a_fallback():
    host = HostTopology.from_yaml(EXAMPLE_HOSTS / "2socket-8gpu.yaml")
    job = PlacedJob("j", (2, 3, 4), cgroup="a/j")
    new = emit_host_layers(host, [job]).config
    assert [{"CgroupPrefix": "a/j/"}, {"CommPrefix": "pt_main_thread"}, {"NumaNode": 0}] in new[0][
        "matches"
    ]
    assert [{"CgroupPrefix": "a/j/"}, {"CommPrefix": "pt_main_thread"}] in new[1]["matches"]
    old = emit_host_layers(host, [job], scx_version="1.0.20").config
    assert "NumaNode" not in json.dumps(old)
    assert old[0]["kind"]["Grouped"]["nodes"] == [0]  # main node: two of its three GPUs
    assert old[1]["name"] == "l2_data_n0"


def test_no_opted_in_job_means_no_config():
    host = make_host()
    assert emit_host_layers(host, []) is None
    assert emit_host_layers(host, [PlacedJob("a", (0,), opt_in=False)]) is None


def test_gpu_matchers_only_for_nvidia_jobs_with_cgroups():
    assert emit_host_layers(make_host(), [PlacedJob("a", (0,), cgroup="x")]).flags == (
        "--enable-gpu-support",
    )
    assert emit_host_layers(make_host(), [PlacedJob("a", (0,))]).flags == ()
    assert emit_host_layers(make_host(vendor="amd"), [PlacedJob("a", (0,), cgroup="x")]).flags == ()
    assert (
        emit_host_layers(make_host(), [PlacedJob("a", (0,), cgroup="x")], gpu_matchers=False).flags
        == ()
    )


@pytest.mark.parametrize(
    "jobs,why",
    [
        ([PlacedJob("a", (9,))], "host has no GPU 9"),
        ([PlacedJob("a", (0,)), PlacedJob("b", (0,), opt_in=False)], "also placed for job a"),
        ([PlacedJob("a", ())], "at least one GPU"),
        ([PlacedJob("a", (0,), preset="tensorflow")], "unknown preset 'tensorflow'"),
        ([PlacedJob("a", (0,), thread_names={"critical": ["x" * 16]})], "longer than 15 bytes"),
        ([PlacedJob("a", (0,), thread_names={"urgent": ["x"]})], "unknown tier 'urgent'"),
        ([PlacedJob("a", (0,), cgroup="/")], "root cgroup"),
        ([PlacedJob("a", (0,)), PlacedJob("a", (1,))], "listed twice"),
    ],
)
def test_bad_jobs_are_one_line_input_errors(jobs, why):
    with pytest.raises(InputError, match=why):
        emit_host_layers(make_host(), jobs)


def test_too_old_or_bad_target_version_is_refused():
    with pytest.raises(InputError, match="too old"):
        emit_host_layers(make_host(), [PlacedJob("a", (0,))], scx_version="1.0.12")
    with pytest.raises(InputError, match="not a version"):
        emit_host_layers(make_host(), [PlacedJob("a", (0,))], scx_version="latest")


def test_cgroup_paths_are_normalized():
    assert normalize_cgroup("/sys/fs/cgroup/kubepods.slice/pod1") == "kubepods.slice/pod1/"
    assert normalize_cgroup("/training.slice/j.scope/") == "training.slice/j.scope/"
    assert normalize_cgroup("a") == "a/"


def test_config_path_with_spaces_is_refused():
    out = emit_host_layers(make_host(), [PlacedJob("a", (0,))])
    with pytest.raises(InputError):
        out.env_line("/etc/my configs/a.json")


def test_many_jobs_without_cgroups_share_groups():
    host = make_host(nodes=1, gpus_per_node=8)
    out = emit_host_layers(host, [PlacedJob(f"j{i}", (i,)) for i in range(8)])
    assert len(out.config[0]["matches"]) == 5  # the five critical names, once each
    assert out.config[0]["comment"].endswith("jobs j0, j1, j2, j3, j4, j5, j6, j7")


def test_or_group_overflow_splits_layers():
    host = make_host(nodes=1, gpus_per_node=8)
    jobs = [PlacedJob(f"j{i}", (i,), cgroup=f"t/j{i}") for i in range(8)]
    out = emit_host_layers(host, jobs)
    names = [layer["name"] for layer in out.config]
    assert names[:2] == ["l1_critical_n0", "l1_critical_n0_2"]  # 8 jobs x 6 groups > 32
    assert validate_layers(out.config, host=host, flags=out.flags) == []


# -- property: every emitted config validates strictly -----------------------------------------

NAME = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_-0123456789 ", min_size=1, max_size=15)


@st.composite
def hosts(draw):
    nodes = draw(st.integers(1, 4))
    cpus = draw(st.integers(1, 48))
    smt = draw(st.booleans()) and cpus % 2 == 0
    llcs = draw(st.integers(1, 3))
    numa, llc_map, smt_groups, first = {}, {}, [], 0
    for n in range(nodes):
        ids = list(range(first, first + cpus))
        first += cpus
        numa[n] = ids
        per = max(1, cpus // llcs)
        chunks = [ids[i : i + per] for i in range(0, cpus, per)]
        for chunk in chunks:
            llc_map[len(llc_map)] = chunk
        if smt:
            half = cpus // 2
            smt_groups += [[ids[i], ids[i + half]] for i in range(half)]
    gpu_nodes = draw(st.lists(st.integers(0, nodes - 1), min_size=1, max_size=8))
    vendor = draw(st.sampled_from(["nvidia", "nvidia", "amd"]))
    gpus = [{"index": i, "numa_node": n, "vendor": vendor} for i, n in enumerate(sorted(gpu_nodes))]
    data = {"name": "h", "numa_nodes": numa, "gpus": gpus, "llcs": llc_map}
    if smt:
        data["smt_siblings"] = [",".join(map(str, g)) for g in smt_groups]
    return HostTopology.from_mapping(data)


@st.composite
def placements(draw, host):
    indices = [g.index for g in host.gpus]
    order = draw(st.permutations(indices))
    jobs, i = [], 0
    while i < len(order) and len(jobs) < 6:
        size = draw(st.integers(1, len(order) - i))
        overrides = draw(
            st.dictionaries(
                st.sampled_from(["critical", "data", "support"]),
                st.lists(st.one_of(NAME, NAME.map(lambda s: "pcomm:" + s)), max_size=4),
                max_size=2,
            )
        )
        jobs.append(
            PlacedJob(
                job_id=f"job{len(jobs)}",
                gpus=tuple(order[i : i + size]),
                cgroup=draw(
                    st.one_of(
                        st.none(),
                        st.sampled_from(["k8s.slice/pod", "/training.slice/x.scope", "a/b/c/"]).map(
                            lambda p, n=len(jobs): f"{p}{n}"
                        ),
                    )
                ),
                preset=draw(
                    st.sampled_from(
                        ["pytorch", "pytorch+nccl+dataloader", "nccl", "dataloader+pytorch"]
                    )
                ),
                thread_names=overrides,
                opt_in=draw(st.booleans()) or draw(st.booleans()),
            )
        )
        i += size
    return jobs


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_emitted_config_validates_strictly(data):
    host = data.draw(hosts())
    jobs = data.draw(placements(host))
    version = data.draw(st.sampled_from([None, "1.0.13", "1.0.20", "1.0.21", "1.1.2"]))
    out = emit_host_layers(host, jobs, scx_version=version)
    matched = [j for j in jobs if j.opt_in and (any(_names(j).values()) or _gpu_matcher(host, j))]
    if out is None:
        assert not matched
        return
    assert validate_layers(out.to_json(), host=host, scx_version=version, flags=out.flags) == []
    assert out.config[-1]["matches"] == [[]] and len(out.config) <= 16
    text = out.to_json()
    for job in jobs:
        if job.cgroup is not None:
            assert (normalize_cgroup(job.cgroup) in text) == (job in matched)
    assert ("UsedGpuTid" in text) == (out.flags == ("--enable-gpu-support",))


def _gpu_matcher(host, job):
    return job.cgroup is not None and all(host.gpu(i).vendor == "nvidia" for i in job.gpus)


def _names(job):
    from chronus_py.layers.presets import resolve_thread_names

    return resolve_thread_names(job.preset, job.thread_names)
