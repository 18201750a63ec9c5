"""Which Kueue API chronus speaks: ``kueue.x-k8s.io/v1beta2`` where Kueue serves it (0.15 and
later), else ``v1beta1`` (Kueue 0.14), found at start (``kube.Kube.kueue``); an API server that
serves neither is one line at start, for ``serve`` and ``serve --check`` alike. The lab runs
the Kueue ``$CHRONUS_TEST_KUEUE`` names (``lab.KUEUES``), so these tests check the version the
running Kueue serves: ``.ci/run`` runs them on both."""

from __future__ import annotations

import pytest

pytest.importorskip("lightkube")

from chronus_py.backends.kueue.backend import FIELD_MANAGER  # noqa: E402
from chronus_py.backends.kueue.kube import NO_KUEUE, Kube, config  # noqa: E402
from chronus_py.backends.kueue.lab import ControlPlane  # noqa: E402
from chronus_py.cli import main  # noqa: E402


def test_the_version_the_running_kueue_serves_is_found_and_v1beta2_preferred(
    setup, capsys, tmp_path
):
    """Kueue 0.17 serves both versions (v1beta1 converted by its webhook): chronus takes
    v1beta2. Kueue 0.14 serves only v1beta1: chronus takes that, and reads its own check.
    ``serve --check`` says which."""
    kube = Kube(config(str(setup.kubeconfig)), manager=FIELD_MANAGER)
    try:
        assert kube.kueue.api_version == setup.cp.kueue_api
        checks = {c["metadata"]["name"]: c for c in kube.admission_checks()}
        assert checks[setup.check]["apiVersion"] == setup.cp.kueue_api
        assert checks[setup.check]["spec"]["controllerName"] == f"chronus.io/{setup.ns}"
    finally:
        kube.close()
    code = setup.check_config(tmp_path)
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"\n  kueue_api: {setup.cp.kueue_api}\n" in out, out


def test_an_api_server_without_kueue_is_one_line_at_start(tmp_path, capsys, control_plane):
    """An API server with no Kueue installed (a private one, etcd and kube-apiserver only):
    ``serve --check`` and ``serve`` both refuse in one line saying which API is missing,
    rather than 'cannot reach the API server' over a failed list."""
    bare = ControlPlane(tmp_path / "bare", cache=control_plane.cache, kueue=control_plane.kueue)
    try:
        bare.start(with_kueue=False)
        for extra in (["--check"], ["--listen=127.0.0.1:0"]):
            code = main(
                [
                    "serve",
                    "--backend=kueue",
                    f"--kubeconfig={bare.kubeconfig}",
                    f"--db={tmp_path / 'c.db'}",
                    *extra,
                ]
            )
            err = capsys.readouterr().err.strip()
            assert code == 2, err
            assert len(err.splitlines()) == 1, err
            assert err.endswith(f"--kubeconfig: {NO_KUEUE}"), err
    finally:
        bare.stop()
