"""``chronus compare`` sweeps elastic policies (issue 15) through the real CLI, on the first 300
rows of a bundled ITP trace: rows with the elastic metrics, a resize-overhead sweep, rigid and
elastic policies side by side, and one-line refusals of what an elastic run cannot take."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from chronus_py.cli import main

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def itp(tmp_path_factory) -> Path:
    lines = (REPO / "traces" / "elasticflow" / "cluster10.csv").read_text().splitlines()
    path = tmp_path_factory.mktemp("itp") / "itp_head.csv"
    path.write_text("\n".join(lines[:300]) + "\n")
    return path


def compare(itp: Path, out: Path, *extra: str) -> int:
    return main(
        ["compare", "--out", str(out), "--traces", str(itp), "--executor", "serial", *extra]
    )


def test_elastic_policies_sweep_beside_a_rigid_one(itp, tmp_path, capsys):
    out = tmp_path / "out"
    policies = "elastic-chronus,elasticflow,elastic-edf,srtf"
    code = compare(
        itp, out, "--policies", policies, "--nodes", "4", "--resize-scale", "0,1", "--no-plots"
    )
    assert code == 0, capsys.readouterr().err
    with open(out / "results.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    elastic = [r for r in rows if r["policy"] != "srtf"]
    assert len(elastic) == 6 and len(rows) == 7  # the rigid run is not multiplied by the scale
    for row in elastic:
        assert row["error"] == ""
        assert 0 < float(row["slo_deadline_ratio"]) <= float(row["elastic_ceiling"]) <= 1
    for row in (r for r in elastic if r["policy"] == "elastic-chronus"):
        assert int(row["guaranteed_jobs"]) > 0 and float(row["guaranteed_miss_ratio"]) == 0.0
    free = {r["policy"]: r for r in elastic if r["resize_scale"] == "0.0"}
    assert float(free["elastic-chronus"]["resize_overhead_share"]) == 0.0
    report = (out / "report.md").read_text()
    assert "## Sweep over resize_scale" in report and "elastic ceiling" in report
    assert "| elastic-edf |" in report and "| srtf |" in report


@pytest.mark.parametrize(
    "extra, message",
    [
        (("--policies", "elastic-chronus", "--sigma", "0.1"), "sigma: elastic policies"),
        (("--policies", "elasticflow", "--load", "2"), "load: elastic policies"),
        (("--policies", "elastic-edf", "--resize-scale", "-1"), "resize_scale: must be >= 0"),
        (("--policies", "elastic-chronus", "--throughputs", "/no/such"), "throughputs: no such"),
    ],
)
def test_what_an_elastic_run_cannot_take_is_refused(itp, tmp_path, capsys, extra, message):
    assert compare(itp, tmp_path / "out", *extra) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_a_resize_overhead_sweep_is_plotted(itp, tmp_path, capsys):
    """The README's elastic grid (``--resize-scale 0,1`` with plots on) ended in a KeyError
    traceback after every run was made: the sweep plot had no axis title for
    ``resize_scale``, and neither report.md nor report.html was written."""
    pytest.importorskip("matplotlib")
    out = tmp_path / "out"
    code = compare(itp, out, "--policies", "elastic-edf", "--nodes", "4", "--resize-scale", "0,1")
    assert code == 0, capsys.readouterr().err
    assert (out / "sweep_resize_scale.png").stat().st_size > 0
    assert "(sweep_resize_scale.png)" in (out / "report.md").read_text()
    assert (out / "report.html").exists()
    # an elastic run keeps no hourly utilisation: no figure, where an empty one was drawn
    assert not (out / "gpu_utilization.png").exists()
    assert "gpu_utilization.png" not in (out / "report.md").read_text()
