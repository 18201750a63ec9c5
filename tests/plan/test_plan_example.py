"""``chronus plan`` on examples/state.yaml: the decisions, determinism, and --layers-dir."""

from __future__ import annotations

import json
import shutil

import yaml
from plan_helpers import EXAMPLE, REPO

from chronus_py.cli import main


def plan_json(capsys, *argv) -> tuple[dict, str]:
    assert main(["plan", *map(str, argv)]) == 0
    out = capsys.readouterr().out
    return json.loads(out), out


def test_example_plans_as_documented(capsys):
    plan, _ = plan_json(capsys, EXAMPLE)
    assert list(plan) == [
        "now",
        "policy",
        "lease_end",
        "next_decision",
        "decisions",
        "lease_plan",
        "solver",
        "host_layers",
    ]
    assert plan["now"] == 7200 and plan["policy"] == "chronus" and plan["lease_end"] == 8400
    decisions = {d["job"]: d for d in plan["decisions"]}
    assert [d["job"] for d in plan["decisions"]] == [
        "llama-ft",
        "bert-sweep",
        "resnet-eval",
        "vit-urgent",
        "mnist-quick",
        "resnet-train",
    ]
    assert {j: d["action"] for j, d in decisions.items()} == {
        "llama-ft": "continue",
        "bert-sweep": "preempt",
        "resnet-eval": "continue",
        "vit-urgent": "start",
        "mnist-quick": "start",
        "resnet-train": "wait",
    }
    assert decisions["llama-ft"]["placement"] == {"gpu-a01": list(range(8))}
    assert decisions["vit-urgent"]["placement"] == {"gpu-a02": list(range(8))}
    assert decisions["mnist-quick"]["placement"] == {"gpu-b01": [2]}
    assert (
        decisions["bert-sweep"]["placement"] == {} and decisions["resnet-train"]["placement"] == {}
    )
    guaranteed = {j for j, d in decisions.items() if d["guaranteed"]}
    # The example's headroom leaves no room to guarantee the new 8-GPU job this late, but it has
    # less GPU-time left than the best-effort job, so it takes that job's GPUs.
    assert guaranteed == {"llama-ft", "resnet-train"} == set(plan["lease_plan"])
    assert "by remaining GPU-time" in decisions["vit-urgent"]["reason"]
    assert (
        decisions["vit-urgent"]["deadline"] == 9600 and decisions["bert-sweep"]["deadline"] is None
    )
    assert decisions["resnet-train"]["deadline"] == 36000
    assert "needs 4 GPUs, 1 free" in decisions["resnet-train"]["reason"]
    # Leases are reported by their start times; the running guaranteed job's plan starts now.
    assert plan["lease_plan"]["llama-ft"][0] == 7200
    assert all(t >= 7200 and t % 1200 == 0 for ts in plan["lease_plan"].values() for t in ts)
    assert plan["solver"]["rounds"] == 1 and plan["solver"]["demoted"] == []
    assert plan["host_layers"] == []


def test_same_input_gives_byte_identical_output(capsys):
    _, first = plan_json(capsys, EXAMPLE)
    _, second = plan_json(capsys, EXAMPLE)
    assert first == second


def test_json_state_plans_like_yaml(tmp_path, capsys):
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    data = yaml.safe_load(EXAMPLE.read_text())
    path = tmp_path / "examples" / "state.json"
    path.write_text(json.dumps(data))
    _, from_json = plan_json(capsys, path)
    _, from_yaml = plan_json(capsys, EXAMPLE)
    assert from_json == from_yaml


def test_timings_only_when_asked(capsys):
    plan, _ = plan_json(capsys, EXAMPLE, "--timings")
    assert (
        set(plan["timings"]) == {"solve_s", "round_s", "total_s"} and plan["timings"]["total_s"] > 0
    )


def test_layers_dir_writes_opted_in_hosts_only(tmp_path, capsys):
    out = tmp_path / "layers"
    plan, _ = plan_json(capsys, EXAMPLE, "--layers-dir", out)
    # gpu-a01: llama-ft; gpu-b01: mnist-quick starts beside the opted-out resnet-eval;
    # gpu-a02 has no host model in the state file.
    assert sorted(p.name for p in out.iterdir()) == [
        "gpu-a01.env",
        "gpu-a01.json",
        "gpu-b01.env",
        "gpu-b01.json",
    ]
    assert plan["host_layers"] == ["gpu-a01", "gpu-b01"]
    assert (out / "gpu-a01.env").read_text() == (
        'SCX_SCHEDULER=scx_layered\nSCX_FLAGS="--enable-gpu-support '
        'f:/etc/scx_layered/gpu-a01.json"\n'
    )
    b01 = json.loads((out / "gpu-b01.json").read_text())
    text = json.dumps(b01)
    assert "mnist-quick" in text and "resnet-eval" not in text
    assert "llama-ft" in (out / "gpu-a01.json").read_text()


def test_opted_out_job_and_stale_files(tmp_path, capsys):
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    path = tmp_path / "examples" / "state.yaml"
    out = tmp_path / "layers"
    plan_json(capsys, path, "--layers-dir", out)
    assert (out / "gpu-b01.json").exists()
    data = yaml.safe_load(path.read_text())
    for job in data["pending"]:
        if job["id"] == "mnist-quick":
            job["opt_in"] = False
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    plan, _ = plan_json(capsys, path, "--layers-dir", out)
    # gpu-b01 now runs only opted-out jobs: no config, and the previous round's files are gone.
    assert plan["host_layers"] == ["gpu-a01"]
    assert sorted(p.name for p in out.iterdir()) == ["gpu-a01.env", "gpu-a01.json"]


def test_other_policies_have_no_lease_plan(tmp_path, capsys):
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    path = tmp_path / "examples" / "state.yaml"
    data = yaml.safe_load(path.read_text())
    data["policy"] = "srtf"
    for key in ("solver", "headroom", "lease"):
        data.pop(key, None)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    plan, _ = plan_json(capsys, path)
    assert plan["lease_end"] is None and plan["lease_plan"] == {} and plan["solver"] is None
    decisions = {d["job"]: d for d in plan["decisions"]}
    # Guarantees come from the state file even when the policy does not plan leases.
    assert decisions["llama-ft"]["guaranteed"] and not decisions["vit-urgent"]["guaranteed"]
    assert decisions["mnist-quick"]["action"] == "start"
    assert decisions["mnist-quick"]["reason"] == "fits, in srtf order"
