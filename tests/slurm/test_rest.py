"""The REST layers against the real slurmrestd: every API version it offers that chronus speaks
(v0.0.38 on Slurm 22.05; v0.0.40, v0.0.41, v0.0.42 on 24.11), the choice of one at start-up,
warnings that mean an ignored field, the one-line answer to a server chronus cannot speak to,
and ``--check``."""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

import pytest

from chronus_py.backends.slurm import backend, rest
from chronus_py.backends.slurm.model import JobChange, NewJob
from chronus_py.backends.slurm.rest import LAYERS, SlurmError, SlurmRest, SlurmUnreachable
from chronus_py.errors import InputError


def spoken(lab) -> list[str]:
    versions = [v for v in SlurmRest(f"unix:{lab.socket}").offered() if v in LAYERS]
    assert versions, f"slurmrestd offers nothing chronus speaks: {lab.release}"
    return versions


def test_the_preferred_version_is_chosen(lab):
    r = SlurmRest(f"unix:{lab.socket}")
    offered = r.offered()
    assert r.version == next(v for v in LAYERS if v in offered)
    assert r.release() == lab.release
    if lab.release.startswith("22.05"):
        assert r.version == "v0.0.38"
    else:  # 24.11 offers v0.0.40-42: the newest tested one
        assert offered == ["v0.0.40", "v0.0.41", "v0.0.42"] and r.version == "v0.0.42"


def test_every_offered_version_submits_releases_and_reads_back(lab):
    for version in spoken(lab):
        r = SlurmRest(f"unix:{lab.socket}", version=version)
        nodes = {n.name: n for n in r.nodes()}
        assert {n: (x.gpus, x.state, x.partitions) for n, x in nodes.items()} == {
            "n1": (4, "idle", ("gpu",)),
            "n2": (4, "idle", ("gpu",)),
        }, version
        sid = r.submit(
            NewJob(
                name=f"layer-{version}",
                comment="layer test",
                script='#!/bin/sh\necho "gpus $CUDA_VISIBLE_DEVICES $MARK"\nsleep 30\n',
                gpus_per_node=1,
                workdir=str(lab.root / "jobs"),
                output=f"{lab.root / 'jobs'}/layer-%j.out",
                environment={"PATH": "/usr/bin:/bin", "MARK": version},
                partition="gpu",
            )
        )
        job = r.job(sid)
        assert job.held and job.gpus_per_node == 1 and job.node_count == 1, (version, job)
        assert job.comment == "layer test" and job.submit_time > 0 and job.start_time >= 0
        # released onto n2 with 2 GPUs per node: both must take effect, nothing ignored
        r.update(sid, JobChange(hold=False, nodes=("n2",), gpus_per_node=2))
        for _ in range(100):
            job = r.job(sid)
            if job.state == "RUNNING" and job.placement:
                break
            time.sleep(0.1)
        assert job.state == "RUNNING" and job.nodes == ("n2",), (version, job)
        assert job.gpus_per_node == 2 and len(job.placement["n2"]) == 2, (version, job)
        assert job.start_time > 0 and job.restart_cnt == 0
        r.cancel(sid)


def test_a_field_slurm_ignores_is_an_error(lab):
    # v0.0.40+ answer 200 and say in "warnings" that a field was ignored (v0.0.38's "gres" or
    # "nodelist" on 24.11 made jobs run without GPUs, or elsewhere): chronus refuses that.
    sid = lab.sbatch("--hold", "--gres=gpu:1")
    for version in spoken(lab):
        r = SlurmRest(f"unix:{lab.socket}", version=version)
        bogus = {"nodelist": "n2", "gres": "gpu:2"} if version != "v0.0.38" else {"bogus": 1}
        with pytest.raises(SlurmError):
            r.call("POST", "update", f"job/{sid}", bogus)
        assert r.job(sid).held and r.job(sid).gpus_per_node == 1, version


def test_a_server_chronus_cannot_speak_to_is_one_line(lab, tmp_path, monkeypatch):
    """On 22.05, slurmrestd started with an old plugin (v0.0.37): the fix is the v0.0.38 one.
    Every plugin of 24.11 serves a version chronus speaks, so there the other side is an older
    chronus (one that speaks only v0.0.38): the fix is to upgrade chronus."""
    if lab.release.startswith("22.05"):
        sock = lab.start_other_slurmrestd("rest-old", "-s", "openapi/v0.0.37")
        try:
            db = tmp_path / "chronus.db"
            out = subprocess.run(
                [sys.executable, "-m", "chronus_py", "serve", "--backend", "slurm"]
                + ["--slurmrestd", f"unix:{sock}", "--db", str(db), "--listen", "127.0.0.1:0"],
                env=lab.env,
                capture_output=True,
                text=True,
                timeout=60,
            )
        finally:
            lab.stop_process("rest-old")
        assert out.returncode != 0 and not db.exists()
        (line,) = out.stderr.strip().splitlines()
        assert "offers v0.0.37" in line and f"(Slurm {lab.release})" in line
        assert "chronus speaks v0.0.38, v0.0.40" in line
        assert line.endswith("start slurmrestd with -s openapi/v0.0.38")
    else:
        monkeypatch.setattr(rest, "LAYERS", {"v0.0.38": LAYERS["v0.0.38"]})
        with pytest.raises(SlurmUnreachable) as err:
            SlurmRest(f"unix:{lab.socket}").version  # noqa: B018
        line = str(err.value)
        assert "offers v0.0.40, v0.0.41, v0.0.42" in line and f"(Slurm {lab.release})" in line
        assert "chronus speaks v0.0.38:" in line and line.endswith("upgrade chronus-py")


def test_a_slurmrestd_restarted_with_other_versions_is_asked_again(lab):
    # The version chosen at start-up was kept: after slurmrestd came back serving others (a
    # Slurm upgrade, another -s or -d), every call was "HTTP 404 without a JSON answer" until
    # chronus was restarted.
    old22 = lab.release.startswith("22.05")
    first, then = (
        (("-s", "openapi/v0.0.38"), ("-s", "openapi/v0.0.37"))
        if old22
        else (("-s", "openapi/slurmctld", "-d", "data_parser/v0.0.42"),)
        + (("-s", "openapi/slurmctld", "-d", "data_parser/v0.0.40"),)
    )
    sock = lab.start_other_slurmrestd("rest-swap", *first)
    try:
        r = SlurmRest(f"unix:{sock}", retries=0)
        assert len(r.nodes()) == 2 and r.version == ("v0.0.38" if old22 else "v0.0.42")
        lab.stop_process("rest-swap")
        lab.start_other_slurmrestd("rest-swap", *then)
        with pytest.raises(SlurmUnreachable, match=f"it no longer serves {r.version}; chronus"):
            r.nodes()
        if old22:  # nothing 22.05 offers instead: the one line that says what to start
            with pytest.raises(SlurmUnreachable, match="offers v0.0.37; chronus speaks"):
                r.nodes()
        else:
            assert len(r.nodes()) == 2 and r.version == "v0.0.40"
    finally:
        lab.stop_process("rest-swap")


def serve(lab, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "chronus_py", "serve", "--backend", "slurm", *args],
        env=lab.env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_asks_slurmrestd_and_writes_nothing(lab, tmp_path):
    db = tmp_path / "chronus.db"
    out = serve(lab, "--slurmrestd", f"unix:{lab.socket}", "--db", str(db), "--check")
    assert out.returncode == 0, out.stderr
    version = SlurmRest(f"unix:{lab.socket}").version
    assert f"api: {version}" in out.stdout and f"slurm: {lab.release}" in out.stdout
    assert "nodes: 2" in out.stdout and not db.exists()
    out = serve(lab, "--slurmrestd", f"unix:{tmp_path}/none.sock", "--db", str(db), "--check")
    assert out.returncode != 0 and not db.exists()
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith(f"chronus serve: --slurmrestd: no socket at {tmp_path}/none.sock"), line


def test_topology_must_name_slurms_nodes(lab):
    p = argparse.ArgumentParser()
    backend.add_arguments(p)
    ns = p.parse_args(["--slurmrestd", f"unix:{lab.socket}", "--partition", "gpu"])
    backend.from_args(ns, db_path=None, nodes=[("n1", 4), ("n2", 4)])
    for nodes, why in (
        ([("n1", 4), ("n2", 4), ("n3", 4)], "nodes n3 are not in Slurm"),
        ([("n1", 4)], "Slurm nodes n2 are in no cell"),
        ([("n1", 4), ("n2", 8)], "node n2 has 8 GPUs here but 4 in Slurm"),
    ):
        with pytest.raises(InputError) as err:
            backend.from_args(ns, db_path=None, nodes=nodes)
        assert str(err.value).startswith("--cluster") and why in str(err.value)
