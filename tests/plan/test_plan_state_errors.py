"""Bad state files: one line ``chronus plan: FILE: key.path: why``, exit 2, nothing on stdout."""

from __future__ import annotations

import pytest
from plan_helpers import REPO, base, write_state

from chronus_py.cli import main

EXAMPLES = REPO / "examples"


def _set(state: dict, path: str, value) -> dict:
    """Set (or, with value ..., delete) a dotted path such as ``pending.0.deadlines``."""
    *parents, last = path.split(".")
    node = state
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    key = int(last) if isinstance(node, list) else last
    if value is ...:
        del node[key]
    else:
        node[key] = value
    return state


CASES = [
    ("now", ..., "now: required"),
    ("now", -1, "now: must be >= 0, got -1"),
    ("now", "soon", "now: expected a number, got 'soon'"),
    ("lease", 0, "lease: must be > 0, got 0"),
    (
        "policy",
        "magic",
        "policy: unknown policy 'magic' (have: chronus, edf, fifo, las, srtf, srtf-gpu)",
    ),
    (
        "extra",
        1,
        "extra: unknown key (expected one of: now, policy, lease, headroom, guard, margin, "
        "objective, solver, cluster, "
        "hosts, throughputs, running, pending)",
    ),
    ("headroom", 1.5, "headroom: must be <= 1, got 1.5"),
    ("headroom", -0.1, "headroom: must be >= 0, got -0.1"),
    ("headroom", "most", "headroom: expected a number, got 'most'"),
    (
        "solver",
        {"backend": "gurobi"},
        "solver.backend: unknown 'gurobi' (have: cpsat, cbc, greedy)",
    ),
    ("solver", {"time_limit_s": -1}, "solver.time_limit_s: must be > 0, got -1"),
    ("cluster", ..., "cluster: required"),
    (
        "cluster",
        {"gpus_per_node": 8},
        "cluster: give nodes (+ gpus_per_node), a nodes list, hived: PATH or an inline HiveD "
        "config",
    ),
    ("cluster.nodes", 0, "cluster.nodes: must be >= 1, got 0"),
    (
        "cluster",
        {"nodes": [{"name": "x", "gpus": 4}, {"name": "x", "gpus": 4}]},
        "cluster.nodes[1].name: duplicate node name 'x'",
    ),
    (
        "cluster",
        {"nodes": [{"name": "x", "gpus": 0}]},
        "cluster.nodes[0].gpus: must be >= 1, got 0",
    ),
    (
        "cluster",
        {"nodes": [{"name": "x", "gpus": 4}], "gpus_per_node": 4},
        "cluster.gpus_per_node: only applies when nodes is a count",
    ),
    (
        "cluster.gpu_per_node",
        4,
        "cluster.gpu_per_node: unknown key (expected one of: nodes, gpus_per_node)",
    ),
    ("hosts", {"node9": "h.yaml"}, "hosts.node9: unknown node 'node9' (the cluster has 2 nodes)"),
    ("running", {"id": "a"}, "running: expected a list of jobs"),
    (
        "running.0.placement",
        ...,
        "running[0].placement: required for a running job: node -> GPU indices",
    ),
    (
        "running.0.placement",
        {"node7": [0, 1]},
        "running[0].placement.node7: unknown node 'node7' (the cluster has 2 nodes)",
    ),
    (
        "running.0.placement",
        {"node0": [0, 4]},
        "running[0].placement.node0: node node0 has no GPU 4",
    ),
    ("running.0.placement", {"node0": [0, -1]}, "running[0].placement.node0: must be >= 0, got -1"),
    ("running.0.placement", {"node0": [0]}, "running[0].placement: holds 1 GPUs, but gpus is 2"),
    (
        "running.0.placement",
        {"node0": [1, 1]},
        "running[0].placement.node0: GPU 1 is also placed for job a",
    ),
    (
        "running.0.placement",
        {"node0": []},
        "running[0].placement.node0: expected a non-empty list of GPU indices",
    ),
    (
        "running.0.guaranteed_deadline",
        5000,
        "running[0].guaranteed_deadline: 5000 is not the `at` of one of its deadlines",
    ),
    ("running.0.progress_seconds", -5, "running[0].progress_seconds: must be >= 0, got -5"),
    (
        "pending.0.placement",
        {"node0": [2]},
        "pending[0].placement: unknown key (expected one of: id, gpus, submit, "
        "estimate_seconds, profile, progress_seconds, deadlines, guaranteed_deadline, tenant, "
        "model, cgroup, preset, "
        "thread_names, opt_in, elastic)",
    ),
    ("pending.0.id", "a", "pending[0].id: duplicate id 'a' (also running[0])"),
    ("pending.0.id", True, "pending[0].id: required: a string or integer id"),
    ("pending.0.gpus", 9, "pending[0].gpus: 9 is more than the cluster's 8 GPUs"),
    ("pending.0.gpus", 0, "pending[0].gpus: must be >= 1, got 0"),
    ("pending.0.gpus", 2.5, "pending[0].gpus: expected an integer, got 2.5"),
    ("pending.0.gpus", ..., "pending[0].gpus: required"),
    ("pending.0.submit", 1001, "pending[0].submit: must be <= now (1000)"),
    ("pending.0.submit", True, "pending[0].submit: expected a number, got True"),
    ("pending.0.deadlines", [{"at": 50}], "pending[0].deadlines[0].at: must be >= submit (100)"),
    (
        "pending.0.deadlines",
        [{"at": 5000}, {"at": 4000}],
        "pending[0].deadlines[1].at: must be later than pending[0].deadlines[0].at "
        "(tightest first)",
    ),
    (
        "pending.0.deadlines",
        [{"at": 5000, "value": -1}],
        "pending[0].deadlines[0].value: must be > 0, got -1",
    ),
    (
        "pending.0.deadlines",
        [{"when": 5000}],
        "pending[0].deadlines[0].when: unknown key (expected one of: at, value)",
    ),
    (
        "pending.0.deadlines",
        "5000",
        "pending[0].deadlines: expected a list of {at, value} (tightest first)",
    ),
    (
        "pending.1.guaranteed_deadline",
        3000,
        "pending[1].guaranteed_deadline: a job without deadlines cannot be guaranteed",
    ),
    ("pending.0.estimate_seconds", 0, "pending[0].estimate_seconds: must be > 0, got 0"),
    (
        "pending.0.profile",
        {"file": "p.json", "iterations": 5},
        "pending[0]: give at most one of estimate_seconds and profile",
    ),
    ("pending.1.opt_in", "yes", "pending[1].opt_in: expected true or false, got 'yes'"),
    (
        "pending.1.preset",
        "tensorflow",
        "pending[1].preset: unknown preset 'tensorflow' (known: pytorch, nccl, dataloader)",
    ),
    ("pending.1.cgroup", 5, "pending[1].cgroup: expected a non-empty string, got 5"),
    ("pending.1.tenant", "", "pending[1].tenant: expected a non-empty string, got ''"),
    ("pending.1", ["c"], "pending[1]: expected a mapping"),
]


@pytest.mark.parametrize(
    "path,value,message", CASES, ids=[c[2].split(":")[0] + f"#{i}" for i, c in enumerate(CASES)]
)
def test_bad_key_is_one_line_naming_it(tmp_path, capsys, path, value, message):
    state = _set(base(), path, value)
    file = write_state(tmp_path, state)
    assert main(["plan", str(file)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"chronus plan: {file}: {message}\n"


def test_an_id_read_as_a_number_says_to_quote_it(tmp_path, capsys):
    """``id: 1e5`` is a number in YAML 1.2 (and so here): a hash-like id must be quoted."""
    text = write_state(tmp_path, base()).read_text()
    path = tmp_path / "ids.yaml"
    path.write_text(text.replace("id: ", "id: 1e5 #", 1))
    assert main(["plan", str(path)]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith(f"chronus plan: {path}: ")
        and "read as the number 100000.0: quote the id" in err
    )


def test_the_base_state_is_valid(tmp_path, capsys):
    assert main(["plan", str(write_state(tmp_path, base()))]) == 0


@pytest.mark.parametrize(
    "key, value, message",
    [
        (
            "solver",
            {"backend": "greedy"},
            "solver: only the chronus policy plans leases (policy is fifo)",
        ),
        ("headroom", 0.5, "headroom: only the chronus policy plans leases (policy is fifo)"),
    ],
)
def test_lease_settings_need_the_chronus_policy(tmp_path, capsys, key, value, message):
    state = base()
    state.pop("lease", None)
    state.update(policy="fifo", **{key: value})
    file = write_state(tmp_path, state)
    assert main(["plan", str(file)]) == 2
    assert capsys.readouterr().err == f"chronus plan: {file}: {message}\n"


def test_unreadable_and_malformed_files(tmp_path, capsys):
    missing = tmp_path / "nope.yaml"
    assert main(["plan", str(missing)]) == 2
    assert (
        capsys.readouterr().err
        == f"chronus plan: {missing}: cannot read: No such file or directory\n"
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text("now: 5\ncluster: [\n")
    assert main(["plan", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"chronus plan: {bad}:3: not valid YAML") and err.count("\n") == 1
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{"now": 5,}')
    assert main(["plan", str(bad_json)]) == 2
    assert capsys.readouterr().err.startswith(f"chronus plan: {bad_json}:1: not valid JSON")
    top = tmp_path / "list.yaml"
    top.write_text("- 1\n")
    assert main(["plan", str(top)]) == 2
    assert capsys.readouterr().err == f"chronus plan: {top}: expected a mapping\n"


def test_profile_problems_name_the_key_or_the_profile(tmp_path, capsys):
    state = base()
    del state["pending"][0]["estimate_seconds"]
    state["pending"][0]["profile"] = {"file": "missing.json", "iterations": 10}
    file = write_state(tmp_path, state)
    assert main(["plan", str(file)]) == 2
    assert capsys.readouterr().err.startswith(
        f"chronus plan: {tmp_path / 'missing.json'}: cannot read"
    )
    (tmp_path / "p.json").write_text('{"format": "other"}')
    state["pending"][0]["profile"] = {"file": "p.json", "iterations": 10}
    file = write_state(tmp_path, state)
    assert main(["plan", str(file)]) == 2
    assert (
        capsys.readouterr().err
        == f'chronus plan: {tmp_path / "p.json"}: not a profile (expected "format": '
        f'"chronus-profile/1")\n'
    )
    state["pending"][0]["profile"] = {"file": "p.json", "iterations": 0}
    file = write_state(tmp_path, state)
    (tmp_path / "p.json").write_text((EXAMPLES / "profiles/resnet50.json").read_text())
    assert main(["plan", str(file)]) == 2
    assert (
        capsys.readouterr().err
        == f"chronus plan: {file}: pending[0].profile.iterations: must be >= 1, got 0\n"
    )


def test_host_model_must_cover_the_nodes_gpus(tmp_path, capsys):
    host = EXAMPLES / "hosts/1socket-4gpu.yaml"
    state = base()
    state["cluster"] = {"nodes": 2, "gpus_per_node": 8}
    state["hosts"] = {"node1": str(host)}
    file = write_state(tmp_path, state)
    assert main(["plan", str(file)]) == 2
    assert capsys.readouterr().err == (
        f"chronus plan: {file}: hosts.node1: host gpu-1s4g-01 ({host}) has no GPU 4, "
        "which node node1 has\n"
    )
