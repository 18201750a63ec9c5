"""Host model (YAML), sysfs discovery against fake trees and this machine, and the CLI commands."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from layers_helpers import EXAMPLE_HOSTS

from chronus_py.cli import main
from chronus_py.errors import InputError
from chronus_py.layers.discover import discover_host
from chronus_py.layers.host import HostTopology, format_cpulist, parse_cpulist

# -- host YAML ---------------------------------------------------------------------------------


def test_cpulist_round_trip():
    assert parse_cpulist("0-3,8,10-11") == (0, 1, 2, 3, 8, 10, 11)
    assert format_cpulist([11, 0, 1, 2, 3, 8, 10]) == "0-3,8,10-11"
    assert parse_cpulist("") == ()
    for bad in ("3-1", "a", "1-", "1,,2"):
        with pytest.raises(ValueError):
            parse_cpulist(bad)


@pytest.mark.parametrize(
    "path",
    [EXAMPLE_HOSTS / "1socket-4gpu.yaml", EXAMPLE_HOSTS / "2socket-8gpu.yaml"],
    ids=lambda p: p.name,
)
def test_example_hosts_load_and_round_trip(path):
    host = HostTopology.from_yaml(path)
    again = HostTopology.from_mapping(yaml.safe_load(host.to_yaml()))
    assert again == host
    assert host.threads_per_core == 2


def test_example_host_shapes():
    two = HostTopology.from_yaml(EXAMPLE_HOSTS / "2socket-8gpu.yaml")
    one = HostTopology.from_yaml(EXAMPLE_HOSTS / "1socket-4gpu.yaml")
    assert (len(two.nodes), len(two.cpus), len(two.gpus)) == (2, 224, 8)
    assert [two.node_of_gpu(i) for i in range(8)] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert (len(one.nodes), len(one.llcs), len(one.gpus)) == (1, 8, 4)


def test_llcs_default_to_one_per_node():
    host = HostTopology.from_mapping({"name": "x", "numa_nodes": {0: "0-3", 1: [4, 5]}})
    assert (
        host.llcs == {0: (0, 1, 2, 3), 1: (4, 5)} and host.gpus == () and host.threads_per_core == 1
    )


@pytest.mark.parametrize(
    "data,field",
    [
        ({"numa_nodes": {0: "0-3"}}, "name"),
        ({"name": "x"}, "numa_nodes"),
        ({"name": "x", "numa_nodes": {0: "0-3", 1: "3-4"}}, "numa_nodes.1"),
        ({"name": "x", "numa_nodes": {0: "0-x"}}, "numa_nodes.0"),
        ({"name": "x", "numa_nodes": {0: "0-3"}, "llcs": {0: "0-2"}}, "llcs"),
        ({"name": "x", "numa_nodes": {0: "0-3"}, "smt_siblings": ["0"]}, "smt_siblings[0]"),
        ({"name": "x", "numa_nodes": {0: "0-3"}, "smt_siblings": ["0,9"]}, "smt_siblings[0]"),
        (
            {"name": "x", "numa_nodes": {0: "0-3"}, "gpus": [{"index": 0, "numa_node": 1}]},
            "gpus[0].numa_node",
        ),
        (
            {"name": "x", "numa_nodes": {0: "0-3"}, "gpus": [{"index": 0, "numa_node": 0}] * 2},
            "gpus[1].index",
        ),
        (
            {
                "name": "x",
                "numa_nodes": {0: "0-3"},
                "gpus": [{"index": 0, "numa_node": 0, "vendor": "NV"}],
            },
            "gpus[0].vendor",
        ),
        ({"name": "x", "numa_nodes": {0: "0-3"}, "cpus": 4}, "cpus"),
    ],
)
def test_bad_host_yaml_names_the_key(data, field):
    with pytest.raises(InputError) as info:
        HostTopology.from_mapping(data, source="h.yaml")
    assert info.value.field == field
    assert str(info.value).startswith(f"h.yaml: {field}: ")


def test_unreadable_host_yaml(tmp_path):
    bad = tmp_path / "h.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(InputError, match="not valid YAML"):
        HostTopology.from_yaml(bad)
    with pytest.raises(InputError, match="cannot read"):
        HostTopology.from_yaml(tmp_path / "missing.yaml")


# -- discovery ---------------------------------------------------------------------------------


def fake_sysfs(root: Path, *, nodes, llc_ids=None, smt=None, gpus=(), hostname="fake01"):
    """Write the files discover reads: nodes = {node: [cpus]}, llcs follow ``llc_ids``
    ({cpu: (llc id, [cpus sharing it])}); gpus = [(pci, vendor, class, numa_node,
    local_cpulist)]."""
    sysdir = root / "sys/devices/system"
    all_cpus = sorted(c for cpus in nodes.values() for c in cpus)
    (sysdir / "cpu").mkdir(parents=True)
    (sysdir / "cpu/online").write_text(format_cpulist(all_cpus) + "\n")
    for node, cpus in nodes.items():
        (sysdir / f"node/node{node}").mkdir(parents=True)
        (sysdir / f"node/node{node}/cpulist").write_text(format_cpulist(cpus) + "\n")
    for cpu in all_cpus:
        base = sysdir / f"cpu/cpu{cpu}"
        if llc_ids is not None:
            ident, shared = llc_ids[cpu]
            (base / "cache/index3").mkdir(parents=True)
            (base / "cache/index3/shared_cpu_list").write_text(format_cpulist(shared) + "\n")
            (base / "cache/index3/id").write_text(f"{ident}\n")
        (base / "topology").mkdir(parents=True, exist_ok=True)
        siblings = next((g for g in (smt or []) if cpu in g), [cpu])
        (base / "topology/thread_siblings_list").write_text(format_cpulist(siblings) + "\n")
    for pci, vendor, klass, numa, local in gpus:
        dev = root / "sys/bus/pci/devices" / pci
        dev.mkdir(parents=True)
        (dev / "vendor").write_text(vendor + "\n")
        (dev / "class").write_text(klass + "\n")
        (dev / "numa_node").write_text(f"{numa}\n")
        if local is not None:
            (dev / "local_cpulist").write_text(local + "\n")
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/sys/kernel/hostname").write_text(hostname + "\n")
    return root


def test_discover_two_socket_host_with_gpus(tmp_path):
    nodes = {0: [0, 1, 4, 5], 1: [2, 3, 6, 7]}
    llcs = {c: (10 + n, cpus) for n, cpus in nodes.items() for c in cpus}
    gpus = [
        ("0000:1b:00.0", "0x10de", "0x030200", 0, None),
        ("0000:1c:00.1", "0x10de", "0x040300", 0, None),  # the GPU's audio function
        ("0000:02:00.0", "0x1a03", "0x030000", -1, None),  # BMC VGA
        ("0000:9d:00.0", "0x10de", "0x030200", -1, "2-3,6-7"),  # firmware did not say
        ("0000:c3:00.0", "0x1002", "0x038000", 1, None),
        ("0000:00:02.0", "0x8086", "0x030000", 0, None),  # integrated graphics
    ]
    fake_sysfs(tmp_path, nodes=nodes, llc_ids=llcs, smt=[[0, 4], [1, 5], [2, 6], [3, 7]], gpus=gpus)
    found = discover_host(tmp_path)
    host = found.host
    assert host.name == "fake01"
    assert host.nodes == {0: (0, 1, 4, 5), 1: (2, 3, 6, 7)}
    assert host.llcs == {10: (0, 1, 4, 5), 11: (2, 3, 6, 7)}
    assert host.smt_siblings == ((0, 4), (1, 5), (2, 6), (3, 7))
    assert [(g.index, g.pci, g.numa_node, g.vendor) for g in host.gpus] == [
        (0, "0000:1b:00.0", 0, "nvidia"),
        (1, "0000:9d:00.0", 1, "nvidia"),
        (2, "0000:c3:00.0", 1, "amd"),
    ]
    assert found.notes == ()


def test_discover_without_gpus_numa_or_l3(tmp_path):
    fake_sysfs(tmp_path, nodes={0: [0, 1, 2, 3]})
    found = discover_host(tmp_path, name="cpuonly")
    assert found.host.name == "cpuonly" and found.host.gpus == ()
    assert found.host.llcs == {0: (0, 1, 2, 3)}
    assert any("no L3 cache information" in n for n in found.notes)


def test_discover_numbers_llcs_when_ids_are_missing_or_shared(tmp_path):
    nodes = {0: [0, 1, 2, 3]}
    fake_sysfs(
        tmp_path,
        nodes=nodes,
        llc_ids={0: (0, [0, 1]), 1: (0, [0, 1]), 2: (0, [2, 3]), 3: (0, [2, 3])},
    )
    assert discover_host(tmp_path).host.llcs == {0: (0, 1), 1: (2, 3)}


def test_discover_gpu_with_unknown_node_gets_a_note(tmp_path):
    fake_sysfs(
        tmp_path, nodes={0: [0], 1: [1]}, gpus=[("0000:01:00.0", "0x10de", "0x030200", -1, None)]
    )
    found = discover_host(tmp_path)
    assert found.host.gpus[0].numa_node == 0
    assert "NUMA node unknown" in found.notes[-1]


def test_discover_falls_back_to_online_cpus_without_numa(tmp_path):
    (tmp_path / "sys/devices/system/cpu").mkdir(parents=True)
    (tmp_path / "sys/devices/system/cpu/online").write_text("0-5\n")
    assert discover_host(tmp_path, name="n").host.nodes == {0: tuple(range(6))}


def test_discover_with_nothing_to_read_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="no NUMA node or CPU information"):
        discover_host(tmp_path)


def test_discover_this_machine():
    if not Path("/sys/devices/system/cpu").is_dir():
        pytest.skip("not a Linux host with sysfs")
    host = discover_host("/").host
    assert (
        len(host.cpus) >= 1 and set(host.llcs) and all(g.numa_node in host.nodes for g in host.gpus)
    )


# -- CLI ---------------------------------------------------------------------------------------


def test_cli_host_discover_prints_yaml_that_loads(capsys):
    if not Path("/sys/devices/system/cpu").is_dir():
        pytest.skip("not a Linux host with sysfs")
    assert main(["host", "discover", "--name", "me"]) == 0
    host = HostTopology.from_mapping(yaml.safe_load(capsys.readouterr().out))
    assert host.name == "me"


def test_cli_host_discover_writes_file_from_fake_root(tmp_path, capsys):
    fake_sysfs(
        tmp_path / "root", nodes={0: [0, 1]}, gpus=[("0000:01:00.0", "0x10de", "0x030200", 0, None)]
    )
    out = tmp_path / "h.yaml"
    assert main(["host", "discover", "--root", str(tmp_path / "root"), "-o", str(out)]) == 0
    assert HostTopology.from_yaml(out).gpus[0].pci == "0000:01:00.0"
    assert "1 GPU(s)" in capsys.readouterr().err


def test_cli_host_discover_bad_root_exits_2(tmp_path, capsys):
    assert main(["host", "discover", "--root", str(tmp_path)]) == 2
    assert "no NUMA node or CPU information" in capsys.readouterr().err


def test_cli_validate_exit_codes(tmp_path, capsys):
    good = tmp_path / "good.json"
    good.write_text('[{"name": "rest", "matches": [[]], "kind": {"Open": {}}}]')
    bad = tmp_path / "bad.json"
    bad.write_text(
        '[{"name": "rest", "matches": [[]], "kind": {"Open": {"protected": true, "perf": 1.0}}}]'
    )
    assert main(["layers", "validate", str(good)]) == 0
    assert main(["layers", "validate", str(bad)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "layer[0].kind.Open.protected: `protected` belongs to Confined and Grouped, not Open; "
        "scx_layered ignores it here",
        "layer[0].kind.Open.perf: invalid type: floating point `1.0`, expected u64; write `1`",
    ]
    assert main(["layers", "validate", str(bad), "--lenient"]) == 1  # the float is a parse error
    lenient = tmp_path / "lenient.json"
    lenient.write_text('[{"name": "rest", "matches": [[]], "kind": {"Open": {"protected": true}}}]')
    assert main(["layers", "validate", str(lenient), "--lenient"]) == 0
    assert capsys.readouterr().out.startswith("warning: layer[0].kind.Open.protected:")
    syntax = tmp_path / "syntax.json"
    syntax.write_text("[{")
    assert main(["layers", "validate", str(syntax)]) == 1


def test_cli_validate_unreadable_inputs_exit_2(tmp_path, capsys):
    good = tmp_path / "good.json"
    good.write_text('[{"name": "rest", "matches": [[]], "kind": {"Open": {}}}]')
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe[")
    assert main(["layers", "validate", str(tmp_path / "missing.json")]) == 2
    assert main(["layers", "validate", str(binary)]) == 2
    assert main(["layers", "validate", str(good), "--scx-version", "one"]) == 2
    assert main(["layers", "validate", str(good), "--host", str(tmp_path / "nohost.yaml")]) == 2
    err = capsys.readouterr().err
    assert "missing.json: cannot read" in err and "not a version" in err


def test_cli_validate_with_host_and_version(tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text(
        '[{"name": "a", "matches": [[{"NumaNode": 1}]], "kind": {"Confined": {"util_range": [0.1, '
        "0.5], "
        '"nodes": [1]}}}, {"name": "rest", "matches": [[]], "kind": {"Open": {}}}]'
    )
    two = str(EXAMPLE_HOSTS / "2socket-8gpu.yaml")
    one = str(EXAMPLE_HOSTS / "1socket-4gpu.yaml")
    assert main(["layers", "validate", str(cfg), "--host", two]) == 0
    assert main(["layers", "validate", str(cfg), "--host", one]) == 1
    assert main(["layers", "validate", str(cfg), "--host", one, "--lenient"]) == 0
    assert main(["layers", "validate", str(cfg), "--scx-version", "1.0.20", "--lenient"]) == 1


def test_cli_emit_prints_config_or_says_nothing_to_do(tmp_path, capsys):
    host = str(EXAMPLE_HOSTS / "1socket-4gpu.yaml")
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text("jobs:\n  - {id: a, gpus: [0], cgroup: t/a}\n")
    assert main(["layers", "emit", "--host", host, "--jobs", str(jobs), "--no-gpu-matchers"]) == 0
    captured = capsys.readouterr()
    assert '"l4_rest"' in captured.out and "UsedGpuTid" not in captured.out
    assert 'SCX_FLAGS="f:/etc/scx_layered/gpu-1s4g-01.json"' in captured.err
    jobs.write_text("jobs:\n  - {id: a, gpus: [0], opt_in: false}\n")
    assert main(["layers", "emit", "--host", host, "--jobs", str(jobs)]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and "no opted-in job" in captured.err


@pytest.mark.parametrize(
    "body,why",
    [
        ("jobs: 3\n", "jobs: expected a mapping"),
        ("jobs:\n  - {id: a, gpus: [0], color: red}\n", "jobs[0].color: unknown key"),
        ("jobs:\n  - {id: a, gpus: 0}\n", "jobs[0].gpus: required"),
        ("jobs:\n  - {id: a, gpus: [7]}\n", "job a.gpus: host has no GPU 7"),
        (
            "jobs:\n  - {id: a, gpus: [0], opt_in: maybe}\n",
            "jobs[0].opt_in: expected true or false",
        ),
        ("jobs: [\n", "not valid YAML"),
    ],
)
def test_cli_emit_bad_jobs_exit_2(tmp_path, capsys, body, why):
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(body)
    assert (
        main(
            [
                "layers",
                "emit",
                "--host",
                str(EXAMPLE_HOSTS / "1socket-4gpu.yaml"),
                "--jobs",
                str(jobs),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert why in err and len(err.strip().splitlines()) == 1
