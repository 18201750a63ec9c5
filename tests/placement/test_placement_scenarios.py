"""``chronus cells run``: every scenario under scenarios/ passes; the output and exit codes follow
docs/cell-scenarios.md exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chronus_py.cli import main

HERE = Path(__file__).parent
SCENARIOS = sorted((HERE / "scenarios").glob("*.yaml"))
RACK = (HERE / "configs" / "rack-2x2.yaml").as_posix()


def run(capsys, path) -> tuple[int, list[dict], str]:
    code = main(["cells", "run", str(path)])
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines()], err


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_scenario_passes(capsys, path):
    code, records, err = run(capsys, path)
    assert [r for r in records if "failed" in r] == []
    assert code == 0, err
    assert [r["step"] for r in records] == list(range(1, len(records) + 1))


def scenario(tmp_path, text: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(f"cluster: {RACK}\n" + text)
    return path


def test_records_have_the_spec_shapes(capsys, tmp_path):
    path = scenario(
        tmp_path,
        """
steps:
  - {op: allocate, job: b1, vc: vcB, priority: 0, pods: [{gpus: 1, count: 1}]}
  - {op: allocate, job: x, vc: vcB, pods: [{gpus: 16}]}
  - {op: release, job: b1}
  - {op: set_bad, node: n3}
  - {op: set_healthy, node: n3}
  - {op: check}
  - {op: allocate, job: e, vc: nope, pods: [{gpus: 1}]}
""",
    )
    code, records, _ = run(capsys, path)
    assert code == 0
    assert records[0] == {
        "step": 1,
        "op": "allocate",
        "job": "b1",
        "outcome": "placed",
        "pods": [{"node": "n0", "gpus": [0]}],
        "preempted": [],
        "downgraded": [],
    }
    assert records[1]["outcome"] == "wait" and set(records[1]) == {
        "step",
        "op",
        "job",
        "outcome",
        "reason",
    }
    assert records[2] == {"step": 3, "op": "release", "job": "b1", "outcome": "ok"}
    assert records[3] == {"step": 4, "op": "set_bad", "node": "n3", "outcome": "ok"}
    assert records[5]["free"]["V100-RACK"] == 2 and records[5]["outcome"] == "ok"
    assert records[6]["outcome"] == "error" and "nope" in records[6]["reason"]


def test_pods_are_listed_in_request_order(capsys, tmp_path):
    path = scenario(
        tmp_path,
        """
steps:
  - {op: allocate, job: g, vc: vcA, pods: [{gpus: 1}, {gpus: 4}, {gpus: 2}]}
""",
    )
    _, records, _ = run(capsys, path)
    assert [len(p["gpus"]) for p in records[0]["pods"]] == [1, 4, 2]


def test_unmet_expectations_exit_1_and_say_why(capsys, tmp_path):
    path = scenario(
        tmp_path,
        """
steps:
  - op: allocate
    job: a
    vc: vcA
    pods: [{gpus: 2}]
    expect: {outcome: placed, nodes: [n1], gpus: {n0: [6, 7]}, pod_within: V100-SWITCH, preempted:
    [x]}
  - {op: check, expect: {free: {V100-RACK: 2}}}
""",
    )
    code, records, err = run(capsys, path)
    assert code == 1
    assert records[0]["failed"] == [
        "nodes: expected ['n1'], got ['n0']",
        "gpus: expected n0: [6, 7], got n0: [0, 1]",
        "preempted: expected ['x'], got []",
    ]
    assert records[1]["failed"] == ["free: expected V100-RACK: 2, got V100-RACK: 1"]
    assert err.strip() == "chronus cells: 2 of 2 steps did not meet their expectations"


@pytest.mark.parametrize(
    "steps, message",
    [
        (
            "  - {op: allocate, vc: vcA, pods: [{gpus: 1}]}",
            "step 1 (allocate): job: required: a name",
        ),
        (
            "  - {op: allocate, job: a, pods: [{gpus: 0}]}",
            "step 1 (allocate): pods[0].gpus: must be an integer >= 1, got 0",
        ),
        (
            "  - {op: allocate, job: a, pods: [{gpus: 1}], color: red}",
            "step 1 (allocate): color: unknown key",
        ),
        (
            "  - {op: dance}",
            "step 1: op: must be one of allocate, release, set_bad, set_healthy, check, "
            "got 'dance'",
        ),
        ("  - {op: set_bad, node: n9}", "step 1 (set_bad): node: unknown node 'n9'"),
        (
            "  - {op: release, job: ghost}",
            "step 1: job: 'ghost' is not allocated by an earlier step",
        ),
        (
            "  - {op: check, expect: {free: {V100-POD: 1}}}",
            "step 1 (check): expect.free: unknown cell type 'V100-POD'",
        ),
        (
            "  - {op: allocate, job: a, pods: [{gpus: 1}], expect: {outcome: done}}",
            "step 1 (allocate): expect.outcome: must be error | placed | wait, got 'done'",
        ),
        (
            "  - {op: allocate, job: a, pods: [{gpus: 1}], expect: {job_within: RACK}}",
            "step 1 (allocate): expect.job_within: unknown cell type 'RACK'",
        ),
    ],
)
def test_malformed_steps_exit_2_in_one_line(capsys, tmp_path, steps, message):
    path = scenario(tmp_path, "steps:\n" + steps + "\n")
    code, records, err = run(capsys, path)
    assert code == 2 and records == []
    assert err == f"chronus cells: {path}: {message}\n"


def test_malformed_files_exit_2(capsys, tmp_path):
    bad_yaml = tmp_path / "y.yaml"
    bad_yaml.write_text("steps: [\n")
    code, _, err = run(capsys, bad_yaml)
    assert code == 2 and err.startswith(f"chronus cells: {bad_yaml}:2: not valid YAML")

    unknown = tmp_path / "u.yaml"
    unknown.write_text(f"cluster: {RACK}\nstepz: []\n")
    code, _, err = run(capsys, unknown)
    assert code == 2 and err == f"chronus cells: {unknown}: stepz: unknown key\n"

    (tmp_path / "configs").mkdir()
    (tmp_path / "scen").mkdir()
    invalid = HERE / "configs" / "design-suite7-invalid.yaml"
    (tmp_path / "configs" / invalid.name).write_text(invalid.read_text())
    target = tmp_path / "scen" / "c.yaml"  # the cluster path is relative to the scenario file
    target.write_text("cluster: ../configs/design-suite7-invalid.yaml\nsteps: [{op: check}]\n")
    code, _, err = run(capsys, target)
    assert code == 2
    assert (
        err.startswith("chronus cells: ")
        and "design-suite7-invalid.yaml: virtualClusters: insufficient" in err
    )
    assert err.count("\n") == 1


def test_inline_cluster_and_healthy_list(capsys, tmp_path):
    path = tmp_path / "inline.yaml"
    path.write_text("""
cluster:
  physicalCluster:
    cellTypes: {NODE: {childCellType: G, childCellNumber: 2, isNodeLevel: true}}
    physicalCells: [{cellType: NODE, cellAddress: a}, {cellType: NODE, cellAddress: b}]
  virtualClusters: {default: {virtualCells: [{cellType: NODE, cellNumber: 2}]}}
healthy: [b]
steps:
  - {op: allocate, job: j, pods: [{gpus: 2}], expect: {nodes: [b]}}
  - {op: allocate, job: k, pods: [{gpus: 1}], expect: {outcome: wait}}
""")
    code, records, _ = run(capsys, path)
    assert code == 0 and records[0]["pods"] == [{"node": "b", "gpus": [0, 1]}]

    broken = tmp_path / "broken.yaml"
    broken.write_text(
        "cluster: {physicalCluster: {cellTypes: {}, physicalCells: []}}\nsteps: [{op: check}]\n"
    )
    code, _, err = run(capsys, broken)
    assert (
        code == 2
        and err
        == f"chronus cells: {broken}: cluster.physicalCluster.physicalCells: must be a non-empty "
        f"list of cells\n"
    )
