"""Limits that scale with work, not with values: huge counts are refused before anything is built,
and far-future times cost no more memory than times near zero."""

from __future__ import annotations

import json
import re
import resource
import time
from pathlib import Path

import pytest

from chronus_py.cli import main
from chronus_py.round import advance, build_scheduler
from chronus_py.selector.admission import SLACK_LEASES, LeaseSelector
from chronus_py.state_file import load_state

REPO = Path(__file__).resolve().parents[2]
RACK = REPO / "tests/placement/configs/rack-2x2.yaml"

STATE = """now: {now}
lease: 1200
policy: chronus
solver: {{backend: greedy}}
cluster: {{nodes: 2, gpus_per_node: 8}}
running:
  - {{id: a, gpus: 8, submit: {t0}, placement: {{node0: [0, 1, 2, 3, 4, 5, 6, 7]}},
     estimate_seconds: 14400, progress_seconds: 6150, deadlines: [{{at: {d1}}}],
     guaranteed_deadline: {d1}}}
pending:
  - {{id: c, gpus: 8, submit: {t1}, estimate_seconds: 1800, deadlines: [{{at: {d2}}}]}}
  - {{id: d, gpus: 4, submit: {t1}, estimate_seconds: 1800, deadlines: [{{at: {d3}}}]}}
"""


def state(tmp_path, offset: float, d3: str | None = None) -> Path:
    path = tmp_path / f"s{len(list(tmp_path.iterdir()))}.yaml"
    path.write_text(
        STATE.format(
            now=offset + 7200,
            t0=offset,
            t1=offset + 3000,
            d1=offset + 15600,
            d2=offset + 9600,
            d3=d3 or offset + 36000,
        )
    )
    return path


def plan(capsys, path: Path) -> dict:
    assert main(["plan", str(path)]) == 0
    return json.loads(capsys.readouterr().out)


def decisions(out: dict) -> list[tuple]:
    return [(d["job"], d["action"], d["guaranteed"]) for d in out["decisions"]]


def test_epoch_milliseconds_plan_like_small_times(tmp_path, capsys):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    near = plan(capsys, state(tmp_path, 0))
    far = plan(capsys, state(tmp_path, 1_700_000_000_000 - 1_700_000_000_000 % 1200))
    assert decisions(near) == decisions(far)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 200


def test_selector_arrays_follow_the_work_not_the_times(tmp_path):
    # a deadline 3 million years out: 8e10 leases of 20 minutes
    scheduler = build_scheduler(load_state(state(tmp_path, 1_700_000_000_000, d3="1.0e+14")))
    advance(scheduler, 1_700_000_007_200)
    selectors = [v for v in vars(scheduler.policy).values() if isinstance(v, LeaseSelector)]
    assert selectors and all(s.plan.used.size <= 2 * (SLACK_LEASES + 64) for s in selectors)


def test_deadline_far_beyond_any_horizon_plans(tmp_path, capsys):
    out = plan(capsys, state(tmp_path, 0, d3="1.0e+15"))
    assert {d["job"] for d in out["decisions"]} == {"a", "c", "d"}


def test_deadline_at_1e308_is_refused_cleanly(tmp_path, capsys):
    assert main(["plan", str(state(tmp_path, 0, d3="1.0e+308"))]) == 2
    assert "pending[1].deadlines[0].at: must be <= 1e+15" in capsys.readouterr().err


@pytest.mark.parametrize(
    "cluster,why",
    [
        ("{nodes: 100000000, gpus_per_node: 8}", "cluster.nodes: must be <= 100,000"),
        ("{nodes: 2, gpus_per_node: 100000}", "cluster.gpus_per_node: must be <= 1,024"),
    ],
)
def test_cluster_sizes_are_bounded(tmp_path, capsys, cluster, why):
    path = tmp_path / "s.yaml"
    path.write_text(f"now: 0\ncluster: {cluster}\n")
    started = time.perf_counter()
    assert main(["plan", str(path)]) == 2
    assert why in capsys.readouterr().err and time.perf_counter() - started < 5


def test_time_beyond_the_bound_is_refused(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text("now: 1.0e+300\ncluster: {nodes: 1}\n")
    assert main(["plan", str(path)]) == 2
    assert "now: must be <= 1e+15" in capsys.readouterr().err


def scenario(tmp_path, steps: str, cluster: str | None = None) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(f"cluster: {cluster or RACK}\nsteps:\n{steps}")
    return path


def test_pod_count_is_bounded(tmp_path, capsys):
    path = scenario(
        tmp_path, "  - {op: allocate, job: j, vc: vcA, pods: [{gpus: 1, count: 1000000000}]}\n"
    )
    started = time.perf_counter()
    assert main(["cells", "run", str(path)]) == 2
    assert "pods[0].count: must be <= 100,000" in capsys.readouterr().err
    assert time.perf_counter() - started < 5


def test_huge_hived_tree_is_refused_before_it_is_built(tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text(
        re.sub(
            r"childCellType: V100-NODE, childCellNumber: 2",
            "childCellType: V100-NODE, childCellNumber: 100000",
            RACK.read_text(),
        )
    )
    started = time.perf_counter()
    assert main(["cells", "run", str(scenario(tmp_path, "  - {op: check}\n", str(config)))]) == 2
    err = capsys.readouterr().err
    assert "more than 1,000,000 GPUs" in err and time.perf_counter() - started < 5


def test_replay_cluster_size_is_bounded(capsys):
    assert main(["replay", "--nodes", "100000000"]) == 2
    assert "at most 100,000 nodes" in capsys.readouterr().err


def test_huge_hived_nodes_are_refused(tmp_path, capsys):
    """A childCellNumber of 1:20:30 (YAML 1.1 sexagesimal: 4830) made 19,320-GPU nodes and a
    scenario that ran for minutes (found by benchmarks/fuzz.py)."""
    config = tmp_path / "c.yaml"
    config.write_text(
        RACK.read_text().replace(
            "childCellType: V100, childCellNumber: 2",
            "childCellType: V100, childCellNumber: 1:20:30",
        )
    )
    assert main(["cells", "run", str(scenario(tmp_path, "  - {op: check}\n", str(config)))]) == 2
    assert "a node of 19,320 GPUs; the limit is 1,024" in capsys.readouterr().err
