"""``chronus serve --check`` validates what ``serve`` would refuse at start (README: "``--check``
(validate and exit)"): a ``--cluster`` HiveD config that cannot be read or loaded was printed as
``config OK`` on the sim backend, and ``serve`` with the same options then stopped on it."""

from __future__ import annotations

import subprocess
import sys


def serve(workdir, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "chronus_py", "serve", *args],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_check_refuses_a_missing_cluster_config(tmp_path):
    done = serve(tmp_path, "--cluster", "missing.yaml", "--check")
    assert done.returncode == 2, done.stdout
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "chronus serve: missing.yaml: cannot read: No such file or directory"
    ]


def test_check_refuses_a_cluster_config_that_is_not_hived(tmp_path):
    (tmp_path / "hived.yaml").write_text("physicalCluster: 3\n")
    done = serve(tmp_path, "--cluster", "hived.yaml", "--check")
    assert done.returncode == 2, done.stdout
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("chronus serve: hived.yaml")


def test_check_still_passes_a_good_cluster_config(tmp_path):
    (tmp_path / "hived.yaml").write_text(
        "physicalCluster:\n"
        "  cellTypes:\n"
        "    NODE: {childCellType: GPU, childCellNumber: 4, isNodeLevel: true}\n"
        "  physicalCells:\n"
        "    - {cellType: NODE, cellAddress: n0}\n"
        "virtualClusters:\n"
        "  team-a: {virtualCells: [{cellType: NODE, cellNumber: 1}]}\n"
    )
    done = serve(tmp_path, "--cluster", "hived.yaml", "--check")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("config OK\n")
    assert "cluster: hived.yaml" in done.stdout
    assert not (tmp_path / "chronus.db").exists()


def test_check_refuses_the_sim_backends_bad_flags_as_serve_does(tmp_path):
    """``--speed 0``, ``--nodes 0`` and a trace that is not there printed 'config OK', and
    ``serve`` with the same flags then refused them."""
    for args, line in [
        (("--speed", "0"), "chronus serve: --speed: must be a positive number, got 0.0"),
        (("--nodes", "0"), "chronus serve: --nodes/--gpus-per-node: must be positive"),
        (("--trace", "nosuch"), "chronus serve: nosuch: no such trace file or bundled trace name"),
    ]:
        done = serve(tmp_path, *args, "--check")
        assert done.returncode == 2, (args, done.stdout)
        assert done.stderr.splitlines() == [line]


def test_check_reports_the_sim_cluster_and_writes_nothing(tmp_path):
    done = serve(tmp_path, "--nodes", "3", "--gpus-per-node", "4", "--speed", "60", "--check")
    assert done.returncode == 0, done.stderr
    assert "backend_check:\n  nodes: 3\n  gpus: 12\n  speed: 60.0\n  trace_jobs: 0\n" in done.stdout
    assert list(tmp_path.iterdir()) == []
