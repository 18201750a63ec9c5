"""``chronus compare`` end to end on a small trace: files, report, resume, failures, bad input."""

import csv
from pathlib import Path

import pytest

from chronus_py.cli import main


def rows(out: Path) -> list[dict]:
    with open(out / "results.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def args(trace: Path, out: Path, *extra: str) -> list[str]:
    return [
        "compare",
        "--out",
        str(out),
        "--traces",
        str(trace),
        "--policies",
        "fifo,srtf,edf",
        "--nodes",
        "2",
        "--load",
        "0.5,1",
        "--executor",
        "serial",
        *extra,
    ]


def test_compare_writes_table_report_and_resumes(tiny_trace, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(args(tiny_trace, out, "--no-plots")) == 0
    first = rows(out)
    assert len(first) == 6 and {r["policy"] for r in first} == {"fifo", "srtf", "edf"}
    assert {r["load"] for r in first} == {"0.5", "1.0"}
    report = (out / "report.md").read_text()
    assert "## Sweep over load" in report and "| edf |" in report
    assert "6 run(s) made, 0 already" in capsys.readouterr().out

    assert main(args(tiny_trace, out, "--no-plots", "--load", "0.5,1,2")) == 0
    assert "3 run(s) made, 6 already" in capsys.readouterr().out
    second = rows(out)
    assert second[:6] == first and len(second) == 9
    assert len((out / "series.jsonl").read_text().splitlines()) == 9


def test_failed_run_is_recorded_then_retried(tiny_trace, tmp_path, capsys):
    out = tmp_path / "out"
    missing = tmp_path / "later.csv"  # exists (a missing file is refused before any run) but is bad
    missing.write_text("a,b\n1,2\n")
    argv = [
        "compare",
        "--out",
        str(out),
        "--traces",
        f"{tiny_trace},{missing}",
        "--policies",
        "srtf",
        "--nodes",
        "2",
        "--executor",
        "serial",
        "--no-plots",
    ]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "FAILED" in err and "later.csv" in err
    failed = [r for r in rows(out) if r["error"]]
    assert len(failed) == 1 and "missing from header" in failed[0]["error"]
    assert "## Failed runs" in (out / "report.md").read_text()

    missing.write_text(tiny_trace.read_text())
    assert main(argv) == 0
    assert "1 run(s) made, 1 already" in capsys.readouterr().out
    assert [r["error"] for r in rows(out)] == ["", ""]


def test_plots_are_drawn(tiny_trace, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "out"
    assert main(args(tiny_trace, out)) == 0
    names = {p.name for p in out.glob("*.png")}
    assert names == {
        "deadline_ratio.png",
        "preemptions.png",
        "be_jct_cdf.png",
        "daily_deadline_ratio.png",
        "gpu_utilization.png",
        "sweep_load.png",
    }
    report = (out / "report.md").read_text()
    assert all(f"({name})" in report for name in names)


def test_config_file_and_overrides(tiny_trace, tmp_path, capsys):
    config = tmp_path / "grid.yaml"
    config.write_text(f"traces: [{tiny_trace}]\npolicies: [fifo, las]\nnodes: [2]\nload: [3]\n")
    out = tmp_path / "out"
    assert (
        main(
            [
                "compare",
                "--config",
                str(config),
                "--policies",
                "las",
                "--out",
                str(out),
                "--executor",
                "serial",
                "--no-plots",
            ]
        )
        == 0
    )
    (row,) = rows(out)
    assert row["policy"] == "las" and row["load"] == "3.0"


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--policies", "nope"], "unknown policy 'nope'"),
        (["--load", "-1"], "load: must be > 0"),
        (["--ray-address", "auto"], "--ray-address: only applies with --executor ray"),
        (["--workers", "0"], "--workers: must be positive"),
    ],
)
def test_bad_input_is_one_line(tiny_trace, tmp_path, capsys, extra, message):
    assert main(args(tiny_trace, tmp_path / "out", *extra)) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and err.startswith("chronus compare:")


def test_results_from_another_layout_are_refused(tiny_trace, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.csv").write_text("run,trace\nx,y\n")
    assert main(args(tiny_trace, out)) == 2
    assert "results.csv:1:" in capsys.readouterr().err


def test_compare_sweeps_every_replay_option(tiny_trace, tmp_path, capsys):
    """The profiling stage and a HiveD cluster (with its tenant map) are grid axes like any other:
    each run is the replay ``chronus replay`` would make with the same options."""
    config = Path(__file__).resolve().parents[1] / "placement" / "configs" / "rack-2x2.yaml"
    tenants = tmp_path / "tenants.yaml"
    tenants.write_text("default: vcA\n")
    out = tmp_path / "out"
    argv = [
        "compare",
        "--out",
        str(out),
        "--traces",
        str(tiny_trace),
        "--policies",
        "srtf,chronus",
        "--nodes",
        "4",
        "--profiling",
        "off,on",
        "--cluster",
        str(config),
        "--tenant-map",
        str(tenants),
        "--executor",
        "serial",
        "--no-plots",
    ]
    assert main(argv) == 0
    table = rows(out)
    assert len(table) == 4 and {r["profiling"] for r in table} == {"False", "True"}
    assert all(r["cluster"] == str(config) and not r["error"] for r in table)
    assert {r["gpus"] for r in table} == {"32"}
    # The same run through chronus replay gives the same metrics.
    profiled = next(r for r in table if r["policy"] == "srtf" and r["profiling"] == "True")
    assert (
        main(
            [
                "replay",
                "--trace",
                str(tiny_trace),
                "--policy",
                "srtf",
                "--profiling",
                "--cluster",
                str(config),
                "--tenant-map",
                str(tenants),
                "--json",
            ]
        )
        == 0
    )
    import json

    alone = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert float(profiled["slo_deadline_ratio"]) == pytest.approx(alone["slo_deadline_ratio"])
    assert float(profiled["be_avg_jct"]) == pytest.approx(alone["be_avg_jct"])


def test_missing_trace_is_refused_before_any_run(tiny_trace, tmp_path, capsys):
    out = tmp_path / "out"
    argv = [
        "compare",
        "--out",
        str(out),
        "--traces",
        f"{tiny_trace},{tmp_path / 'nope.csv'}",
        "--policies",
        "srtf",
        "--nodes",
        "2",
        "--executor",
        "serial",
        "--no-plots",
    ]
    assert main(argv) == 2
    assert "nope.csv: no such trace file" in capsys.readouterr().err
    assert not out.exists()
