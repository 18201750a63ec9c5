from __future__ import annotations

import csv
import json

import pytest

from chronus_py.cli import main
from chronus_py.engine.metrics import JOB_COLUMNS


def test_help_lists_commands(capsys):
    try:
        main(["--help"])
    except SystemExit as exc:
        assert exc.code == 0
    out = capsys.readouterr().out
    assert "replay" in out and "replay a job trace" in out


def test_replay_json_and_out_dir(write, tmp_path, capsys):
    path = write(
        "job_id,submit_time,duration,num_gpu,deadline\na,0,100,1,1000\nb,0,100,1,\nc,0,100,0,\n"
    )
    out = tmp_path / "out"
    assert (
        main(
            [
                "replay",
                "--trace",
                str(path),
                "--policy",
                "fifo",
                "--nodes",
                "1",
                "--gpus-per-node",
                "1",
                "--json",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    metrics = json.loads(captured.out)
    assert metrics["jobs"] == 2 and metrics["dropped_rows"] == 1
    assert metrics["dropped_reasons"] == {"num_gpu is 0": 1}
    assert metrics["slo_deadline_ratio"] == 1.0 and metrics["be_avg_jct"] == 260.0
    assert metrics["gpus"] == 1 and metrics["guaranteed_miss_ratio"] is None
    assert "dropped 1 row(s)" in captured.err
    rows = list(csv.DictReader((out / "jobs.csv").read_text().splitlines()))
    assert [r["job_id"] for r in rows] == ["a", "b"] and rows[0]["met_deadline_index"] == "0"
    assert json.loads((out / "metrics.json").read_text())["jobs"] == 2


def test_bad_trace_is_one_line_exit_2(write, capsys):
    path = write("job_id,submit_time,duration,num_gpu\n1,0,oops,1\n")
    assert main(["replay", "--trace", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"chronus replay: {path}:2: column duration: not a number: 'oops'"


def test_skip_bad_rows_replays_the_rest(write, capsys):
    path = write("job_id,submit_time,duration,num_gpu\n1,0,oops,1\n2,0,10,1\n")
    assert main(["replay", "--trace", str(path), "--skip-bad-rows", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["jobs"] == 1
    assert "1 x column duration: not a number:" in captured.err


def test_job_wider_than_cluster_is_an_input_error(write, capsys):
    path = write("job_id,submit_time,duration,num_gpu\n1,0,10,64\n")
    assert main(["replay", "--trace", str(path), "--nodes", "2"]) == 2
    # one line: the detected format is said only once a script's replay has run
    assert capsys.readouterr().err.splitlines() == [
        "chronus replay: job 1: needs 64 GPUs, the cluster has 16"
    ]


def test_a_load_that_stretches_the_trace_past_any_time_is_an_input_error(write, capsys):
    """--load 1e-300 put the second job's submission at 1e302 s, and the lease plan's slot
    index overflowed (a traceback)."""
    path = write("job_id,submit_time,duration,num_gpu\n1,0,10,1\n2,100,10,1\n")
    assert main(["replay", "--trace", str(path), "--load", "1e-300"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "chronus replay: --load: 1e-300 puts the last submission at 1e+302 s, past the 1e+15 s "
        "any time may be"
    )


CONFIG = "tests/placement/configs/rack-2x2.yaml"


def test_replay_on_a_hived_cluster_with_tenant_map(write, tmp_path, capsys):
    path = write(
        "job_id,submit_time,duration,num_gpu,tenant\na,0,100,8,x\nb,0,100,16,y\nc,5,100,8,x\n"
    )
    tenants = tmp_path / "tenants.yaml"
    tenants.write_text("x: vcA\ndefault: vcB\n")
    out = tmp_path / "out"
    assert (
        main(
            [
                "replay",
                "--trace",
                str(path),
                "--cluster",
                CONFIG,
                "--tenant-map",
                str(tenants),
                "--json",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["gpus"] == 32 and metrics["jobs"] == 3
    rows = {r["job_id"]: r for r in csv.DictReader((out / "jobs.csv").read_text().splitlines())}
    # vcA holds one rack (16 GPUs): a and c run side by side, b fills vcB's rack.
    assert all(float(r["first_start"]) == float(r["submit"]) for r in rows.values())


@pytest.mark.parametrize("policy", ["chronus", "srtf", "fifo"])
def test_a_job_wider_than_its_virtual_cluster_is_a_one_line_error(write, tmp_path, capsys, policy):
    """vcA holds one rack (16 GPUs) of the 32: a 32-GPU job of its tenant fits the cluster but
    never its virtual cluster. Chronus, which wakes at every lease boundary, replayed for ever."""
    path = write("job_id,submit_time,duration,num_gpu,tenant\na,0,100,32,x\nb,0,100,8,x\n")
    tenants = tmp_path / "tenants.yaml"
    tenants.write_text("x: vcA\n")
    args = ["replay", "--trace", str(path), "--cluster", CONFIG, "--tenant-map", str(tenants)]
    assert main([*args, "--policy", policy]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "chronus replay: job a: needs 32 GPUs, which virtual cluster 'vcA' can never place: "
        "give its tenant another one with --tenant-map"
    ]


def test_a_tenant_map_naming_no_virtual_cluster_names_its_entry(write, tmp_path, capsys):
    """It said the tenant had no virtual cluster, as if it were not mapped at all."""
    path = write("job_id,submit_time,duration,num_gpu,tenant\na,0,100,8,x\n")
    tenants = tmp_path / "tenants.yaml"
    tenants.write_text("x: VC1\n")
    args = ["replay", "--trace", str(path), "--cluster", CONFIG, "--tenant-map", str(tenants)]
    assert main(args) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"chronus replay: {tenants}: tenant x: 'VC1' is not a virtual cluster of {CONFIG} "
        "(have: vcA, vcB)"
    ]


def test_unmapped_tenant_is_a_one_line_error(write, capsys):
    path = write("job_id,submit_time,duration,num_gpu,tenant\na,0,100,8,x\n")
    assert main(["replay", "--trace", str(path), "--cluster", CONFIG]) == 2
    assert "tenant 'x' (job a) has no virtual cluster" in capsys.readouterr().err


def test_profiling_pool_order(write, capsys):
    # One profiling GPU: by deadline, b is profiled first (0-300) and ends at 300 + 1000 + 30;
    # in arrival order it waits for a's profile and misses its 1500 s deadline.
    path = write("job_id,submit_time,duration,num_gpu,deadline\na,0,1000,1,\nb,0,1000,1,1500\n")
    ratios = {}
    for order in ("deadline", "fifo"):
        assert (
            main(
                [
                    "replay",
                    "--trace",
                    str(path),
                    "--nodes",
                    "2",
                    "--gpus-per-node",
                    "1",
                    "--json",
                    "--profiling",
                    "--profiling-nodes",
                    "1",
                    "--profiling-order",
                    order,
                ]
            )
            == 0
        )
        ratios[order] = json.loads(capsys.readouterr().out)["slo_deadline_ratio"]
    assert ratios == {"deadline": 1.0, "fifo": 0.0}


def test_replay_takes_every_chronus_setting_and_reports_them(write, capsys):
    path = write(
        "job_id,submit_time,duration,num_gpu,deadline\na,0,3000,10,9000\nb,60,600,2,2000\nc,90,900,1,\n"
    )
    assert (
        main(
            [
                "replay",
                "--trace",
                str(path),
                "--lease",
                "600",
                "--headroom",
                "0.8",
                "--guard",
                "60",
                "--solver",
                "greedy",
                "--gpus-per-node",
                "4",
                "--nodes",
                "4",
                "--json",
            ]
        )
        == 0
    )
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["cluster"] == "4x4" and metrics["policy"] == "chronus"
    assert metrics["settings"]["lease"] == 600.0 and metrics["settings"]["headroom"] == 0.8
    assert metrics["settings"]["guard"] == 60.0 and metrics["settings"]["backend"] == "greedy"


def test_chronus_settings_are_refused_for_other_policies(write, capsys):
    path = write("job_id,submit_time,duration,num_gpu\na,0,100,1\n")
    assert main(["replay", "--trace", str(path), "--policy", "srtf", "--headroom", "0.5"]) == 2
    assert (
        capsys.readouterr().err
        == "chronus replay: --headroom: a Chronus setting that policy srtf does not take\n"
    )


def test_the_selector_rounds_to_the_clusters_nodes():
    """A 10-GPU job holds three 4-GPU nodes in the plan of a 4-GPU-node cluster (12 GPUs), two
    8-GPU nodes on 8-GPU nodes (16)."""
    from chronus_py.jobs.model import DeadlineOption, Job, JobKind
    from chronus_py.jobs.state import JobState
    from chronus_py.selector import ChronusSettings, LeaseSelector

    job = Job(
        "a", "default", 10, 0.0, JobKind.STRICT_SLO, (DeadlineOption(1e5, 1.0),), duration=600.0
    )
    state = JobState(job=job, seq=0, estimate=600.0, overhead=0.0)
    for node_gpus, held in ((4, 12), (8, 16)):
        selector = LeaseSelector(
            ChronusSettings(backend="greedy", headroom=0.0), capacity=64, node_gpus=node_gpus
        )
        selector.new_lease({}, 0.0)
        selector.admit_arrivals([state], 0.0)
        assert selector.guarantees["a"].at == 1e5
        assert int(selector.plan.used.max()) == held


RENAMED = "jid,t,iters,net,due,bs,g,secs\na,0,1000,bert,20,64,4,5\nb,1,3000,gpt2,1,128,1,30\n"
RENAMED_COLUMNS = (
    "id=jid,submit=t,iterations=iters,model=net,deadline=due,batch=bs,gpus=g,duration=secs"
)


def test_elastic_replay_maps_columns_and_writes_what_the_rigid_out_writes(write, tmp_path, capsys):
    path = write(RENAMED)
    out = tmp_path / "out"
    argv = ["replay", "--trace", str(path), "--elastic", "--nodes", "1"]
    argv += ["--columns", RENAMED_COLUMNS, "--time-unit", "min", "--json", "--out", str(out)]
    assert main(argv) == 0
    captured = capsys.readouterr()
    metrics = json.loads(captured.out)
    assert metrics["policy"] == "elastic-chronus" and metrics["jobs"] == 2
    assert metrics["cluster"] == "1x8" and metrics["dropped_rows"] == 0
    assert "format plain (--columns): id=jid" in captured.err
    rows = list(csv.DictReader((out / "jobs.csv").read_text().splitlines()))
    header = next(csv.reader((out / "jobs.csv").read_text().splitlines()))
    assert header[: len(JOB_COLUMNS)] == list(JOB_COLUMNS)  # the rigid replay's columns first
    # times were minutes: a's deadline is 20 min, met on 8 GPUs; b (deadline at its submission)
    # is declined and never runs: its row has no start, and the report draws the rest
    a, b = rows
    assert a["deadlines"] == "1200" and a["met_deadline_index"] == "0" and a["gpus"] == "8"
    assert b["first_start"] == b["finish"] == "" and b["met_deadline_index"] == ""
    assert json.loads((out / "metrics.json").read_text())["jobs"] == 2
    assert "elastic-chronus on trace.csv" in (out / "report.html").read_text()


def test_elastic_replay_with_a_wrong_mapping_is_one_line(write, capsys):
    path = write(RENAMED)
    columns = RENAMED_COLUMNS.replace("bs", "batch_size")
    assert main(["replay", "--trace", str(path), "--elastic", "--columns", columns]) == 2
    err = capsys.readouterr().err
    assert err == f"chronus replay: {path}:1: column batch_size: missing from header\n"


def test_elastic_replay_refuses_rigid_only_options_by_name(write, capsys):
    path = write(RENAMED)
    argv = ["replay", "--trace", str(path), "--elastic", "--columns", RENAMED_COLUMNS]
    assert main([*argv, "--slowdown"]) == 2
    err = capsys.readouterr().err
    assert err == "chronus replay: --elastic: does not combine with --slowdown yet\n"
    assert main([*argv, "--elastic-backend", "cpsat", "--elastic", "elastic-edf"]) == 2
    assert "--elastic-backend: only elastic-chronus has one" in capsys.readouterr().err


def test_elastic_replay_refuses_the_estimate_stages_saying_why(write, capsys):
    path = write(RENAMED)
    argv = ["replay", "--trace", str(path), "--elastic", "--columns", RENAMED_COLUMNS]
    for flags in (["--estimates", "realistic"], ["--estimate-sigma", "0.2"], ["--profiling"]):
        assert main([*argv, *flags]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"chronus replay: {flags[0]}: refused with --elastic: ")
        assert "iterations on its throughput curve" in err and err.count("\n") == 1


def test_elastic_lease_planners_take_lease_and_headroom_and_any_overhead_model(write, capsys):
    path = write(RENAMED)
    base = ["replay", "--trace", str(path), "--nodes", "1", "--columns", RENAMED_COLUMNS]
    base += ["--time-unit", "min", "--json"]
    assert main(base + ["--elastic", "elasticflow", "--lease", "120", "--headroom", "0.5"]) == 0
    assert json.loads(capsys.readouterr().out)["policy"] == "elasticflow"
    assert main(base + ["--elastic", "--overhead", "chronus-restart"]) == 0
    assert json.loads(capsys.readouterr().out)["jobs"] == 2
    assert main(base + ["--elastic", "elastic-edf", "--lease", "120"]) == 2
    err = capsys.readouterr().err
    assert (
        err == "chronus replay: --lease: a Chronus setting that policy elastic-edf does not take\n"
    )


def test_a_bad_setting_names_its_flag_in_rigid_and_elastic_replays(write, capsys):
    """One check for both kinds: the flag, not ``--policy``, and a lease of at most 366 days (a
    1e308-second lease gave elastic Chronus a slot grid that overflowed to no guarantee)."""
    path = write(RENAMED)
    base = ["replay", "--trace", str(path), "--nodes", "1", "--columns", RENAMED_COLUMNS]
    for kind in (["--policy", "chronus"], ["--elastic"], ["--elastic", "elasticflow"]):
        assert main(base + kind + ["--lease", "-5"]) == 2
        assert capsys.readouterr().err == "chronus replay: --lease: must be > 0, got -5.0\n"
        assert main(base + kind + ["--lease", "1e308"]) == 2
        assert capsys.readouterr().err == (
            "chronus replay: --lease: must be <= 31,622,400 seconds (366 days)\n"
        )
        assert main(base + kind + ["--headroom", "3"]) == 2
        assert capsys.readouterr().err == "chronus replay: --headroom: must be <= 1, got 3.0\n"
