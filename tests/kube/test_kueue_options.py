"""``chronus serve --backend kueue`` refuses bad options in one line, before it needs a cluster:
a bad flag with a kubeconfig that does not even exist names the flag, and a kubeconfig that is
not one names the file; none of these needs a control plane. ``--check`` refuses what ``serve``
would, and on the real control plane names chronus's AdmissionChecks."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest
import yaml

pytest.importorskip("lightkube")

from chronus_py.backends.kueue import harness  # noqa: E402
from chronus_py.backends.kueue.backend import FIELD_MANAGER, KueueBackend  # noqa: E402
from chronus_py.backends.kueue.kube import Kube, config  # noqa: E402
from chronus_py.cli import main  # noqa: E402

MISSING = "/nonexistent/kubeconfig"


def serve(capsys, tmp_path, *flags: str) -> tuple[int, str]:
    code = main(
        ["serve", "--backend=kueue", f"--db={tmp_path / 'c.db'}", "--listen=127.0.0.1:0", *flags]
    )
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    return code, err


@pytest.mark.parametrize(
    "flag, expected",
    [
        ("--kueue-lease=no-slash", "--kueue-lease: expected NAMESPACE/NAME, got 'no-slash'"),
        ("--kueue-lease=/name", "--kueue-lease: expected NAMESPACE/NAME, got '/name'"),
        ("--kueue-node-selector=gpu", "--kueue-node-selector: expected key=value, got 'gpu'"),
        ("--kueue-poll=0", "--kueue-poll: must be > 0, got 0.0"),
    ],
)
def test_a_bad_flag_is_refused_without_a_cluster(capsys, tmp_path, flag, expected):
    code, err = serve(capsys, tmp_path, f"--kubeconfig={MISSING}", flag)
    assert code == 2
    assert err.splitlines()[-1].endswith(expected), err


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "just a string\n",
            "not a kubeconfig: expected a YAML mapping with clusters, contexts and users, got str",
        ),
        ("- a\n- list\n", "got list"),
        ("", "got nothing"),
        ("clusters: [\n", "not a kubeconfig: not valid YAML"),
        ("contexts: []\n", "not a usable kubeconfig: no 'clusters'"),
    ],
)
def test_a_kubeconfig_that_is_not_one_names_the_file(capsys, tmp_path, text, expected):
    path = tmp_path / "kubeconfig"
    path.write_text(text)
    code, err = serve(capsys, tmp_path, f"--kubeconfig={path}")
    assert code == 2
    (line,) = err.splitlines()
    assert str(path) in line and expected in line, line


def test_a_missing_kubeconfig_names_the_file(capsys, tmp_path):
    code, err = serve(capsys, tmp_path, f"--kubeconfig={MISSING}")
    assert code == 2
    assert err.splitlines()[-1].endswith(
        f"{MISSING}: cannot read the kubeconfig: No such file or directory"
    ), err


def test_check_refuses_a_bad_flag_without_a_cluster(capsys, tmp_path):
    """``--check`` printed 'config OK' for ``--kueue-poll 0``, which ``serve`` then refused."""
    code, err = serve(capsys, tmp_path, f"--kubeconfig={MISSING}", "--kueue-poll=0", "--check")
    assert code == 2
    assert err.splitlines()[-1].endswith("--kueue-poll: must be > 0, got 0.0"), err


def test_check_asks_the_api_server_for_chronus_s_admission_checks(setup, capsys, tmp_path):
    """On the real control plane: the API server reached with the controller's own
    least-privilege kubeconfig, and the test's AdmissionCheck named as chronus's; nothing is
    written."""
    code = setup.check_config(tmp_path)
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.startswith("config OK\n")
    assert f"controller: chronus.io/{setup.ns}\n  admission_checks:\n  - {setup.check}\n" in out
    assert list(tmp_path.iterdir()) == []


def test_missing_rbac_is_one_line_at_start(kube, kube_ns, tmp_path):
    """An account the manifest's ClusterRole was applied to without ``list``/``watch`` on Nodes,
    without the Workloads' status and without Pods (a ClusterRole from before chronus read
    them): ``--check`` and ``serve`` both refuse in one line naming the account and each
    missing permission. Before, ``--check`` said 'config OK', and
    ``serve`` waited five minutes for a first list of Nodes that was forbidden, then said it
    took too long (and a missing status permission failed every start, one log line a round)."""
    docs = yaml.safe_load_all((harness.DEPLOY / "controller.yaml").read_text())
    (role,) = [d for d in docs if d and d["kind"] == "ClusterRole"]
    rules = []
    for rule in role["rules"]:
        if rule["resources"] in (["workloads/status"], ["pods"]):
            continue
        if rule["resources"] == ["nodes"]:
            rule = {**rule, "verbs": ["get", "patch"]}
        rules.append(rule)
    name = f"chronus-{kube_ns}"
    kube.apply(
        {**role, "metadata": {"name": name}, "rules": rules},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": name,
            },
            "subjects": [{"kind": "ServiceAccount", "name": "limited", "namespace": kube_ns}],
        },
    )
    try:
        config = kube.service_account_kubeconfig(kube_ns, "limited", tmp_path / "limited")
        expected = (
            f"--kubeconfig: system:serviceaccount:{kube_ns}:limited may not patch "
            "workloads/status.kueue.x-k8s.io, list nodes, watch nodes, list pods, watch pods "
            "(deploy/kueue/"
        )
        lease = [f"--kueue-lease={kube_ns}/leader", "--check"]  # no Role for Leases there
        done = subprocess.run(
            [sys.executable, "-m", "chronus_py", "serve", "--backend=kueue"]
            + [f"--kubeconfig={config}", f"--db={tmp_path / 'c.db'}", *lease],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2, (done.stdout, done.stderr)
        assert done.stderr.strip().endswith(
            f"watch pods, get leases.coordination.k8s.io in namespace {kube_ns}, create "
            f"leases.coordination.k8s.io in namespace {kube_ns}, update "
            f"leases.coordination.k8s.io in namespace {kube_ns} (deploy/kueue/controller.yaml's "
            "ClusterRole and Role grant what chronus needs)"
        ), done.stderr
        for extra in (["--check"], []):
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "chronus_py",
                    "serve",
                    "--backend=kueue",
                    f"--kubeconfig={config}",
                    f"--db={tmp_path / 'c.db'}",
                    "--listen=127.0.0.1:0",
                    *extra,
                ],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 2, (extra, done.stdout, done.stderr)
            (line,) = done.stderr.strip().splitlines()
            assert expected in line, (extra, line)
    finally:
        for kind in ("clusterrolebindings", "clusterroles"):
            kube.api("DELETE", f"/apis/rbac.authorization.k8s.io/v1/{kind}/{name}", ok=(200, 404))


def test_check_refuses_a_controller_name_no_admission_check_has(setup, capsys, caplog, tmp_path):
    """A ``--kueue-controller-name`` no AdmissionCheck names (a typo, or the check not applied)
    leaves every Workload of chronus's ClusterQueue waiting for ever: ``--check`` said
    'config OK' with an empty list. ``serve`` itself starts (the check may be applied after
    it) and says it in its log."""
    typo = f"chronus.io/{setup.ns}-typo"
    code = main(
        [
            "serve",
            "--backend=kueue",
            f"--kubeconfig={setup.kubeconfig}",
            f"--kueue-controller-name={typo}",
            f"--db={tmp_path / 'c.db'}",
            "--check",
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    (line,) = err.splitlines()
    said = (
        f"--kueue-controller-name: no AdmissionCheck has controllerName {typo}, so no Workload "
        "would wait for chronus: apply deploy/kueue/admissioncheck.yaml (the cluster's checks "
        "name: "
    )
    assert said in line, line
    assert f"chronus.io/{setup.ns}," in line or line.endswith(f"chronus.io/{setup.ns})"), line

    kube = Kube(config(str(setup.kubeconfig)), manager=FIELD_MANAGER)
    with caplog.at_level(logging.WARNING, logger="chronus.kueue"):
        KueueBackend(kube, controller=typo).close()
    (warned,) = [r for r in caplog.records if "kueue_no_admission_check" in r.getMessage()]
    assert f"no AdmissionCheck has controllerName {typo}" in warned.getMessage()
