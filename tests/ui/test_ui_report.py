"""``chronus replay --out`` and ``chronus compare --out`` write report.html: the replayed
schedule drawn over a window, with the metrics and the plots already there."""

from __future__ import annotations

import re

from chronus_py.cli import main
from chronus_py.ui import report

TRACE = (
    "job_id,submit_time,duration,num_gpu,deadline\n"
    "a,0,3600,2,5000\nb,0,1800,2,\nc,600,3600,2,9000\nd,7200,600,1,\n"
)


def test_replay_report_draws_the_schedule(write, tmp_path, capsys):
    out = tmp_path / "out"
    trace = write(TRACE)
    argv = ["replay", "--trace", str(trace), "--nodes", "1", "--gpus-per-node", "4"]
    assert main([*argv, "--out", str(out)]) == 0
    html = (out / "report.html").read_text()
    # Deadline jobs a and c each get a bar with its deadline mark; the cluster lane stacks all.
    assert html.count("<title>a: 2 GPUs") == 1 and html.count("<title>c: 2 GPUs") == 1
    assert len(re.findall(r"<title>deadline</title>", html)) == 2
    assert "GPUs in use" in html and "slo_deadline_ratio" in html
    assert not re.search(r'(?:src|href)="(?:https?:)?//', html)  # opens offline
    # Another window, drawn again from jobs.csv: the 2h..3h window has only job d.
    assert report.main([str(out), "--from-hour", "2", "--hours", "1"]) == 0
    html = (out / "report.html").read_text()
    assert "<title>a: " not in html and "hours 2 to 3" in html


def test_jobs_csv_gives_each_deadline_exactly(write, tmp_path):
    # Before: a deadline at 12,204,630 s was written 1.22046e+07, 30 s early when read back.
    out = tmp_path / "out"
    trace = write(
        "job_id,submit_time,duration,num_gpu,deadline\na,0,60,1,\nb,12200000,600,1,12204630\n"
    )
    argv = ["replay", "--trace", str(trace), "--nodes", "1", "--gpus-per-node", "4"]
    assert main([*argv, "--out", str(out)]) == 0
    rows = {r.split(",")[0]: r.split(",") for r in (out / "jobs.csv").read_text().splitlines()}
    assert rows["b"][6] == "12204630"


def test_report_of_a_bad_jobs_csv_is_one_line(tmp_path, capsys):
    (tmp_path / "metrics.json").write_text('{"gpus": 4}')
    (tmp_path / "jobs.csv").write_text(
        "job_id,submit,first_start,finish,gpus,kind,deadlines,met_deadline_index,guaranteed,"
        "preemptions,restarts\na,0,zero,10,1,strict,,,False,0,1\n"
    )
    assert report.main([str(tmp_path)]) == 2
    assert (
        capsys.readouterr().err.strip()
        == f"{tmp_path / 'jobs.csv'}:2: first_start: expected a number"
    )


def test_compare_report_has_a_timeline_and_the_plots(write, tmp_path):
    out = tmp_path / "out"
    trace = write(TRACE)
    argv = ["compare", "--out", str(out), "--traces", str(trace), "--policies", "fifo,edf"]
    assert main([*argv, "--nodes", "1", "--executor", "serial"]) == 0
    html = (out / "report.html").read_text()
    assert "<svg" in html and "GPUs in use" in html
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert pngs and all(f'src="{p}"' in html for p in pngs)
