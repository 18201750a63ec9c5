"""An elastic policy resizes running jobs; no backend resizes one yet (``CANNOT_RESIZE`` in each
backend module), so ``chronus serve`` refuses it at start, and ``--check`` says the same, in one
line naming the backend and why (issue 25, session 12)."""

from __future__ import annotations

import pytest

from chronus_py.backends import BACKENDS, backend_module
from chronus_py.cli import main
from chronus_py.policies import ELASTIC


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_an_elastic_policy_is_refused_at_start_naming_the_backend(backend, tmp_path, capsys):
    why = backend_module(backend).CANNOT_RESIZE
    for policy in ELASTIC:
        argv = ["serve", "--backend", backend, "--policy", policy, "--db", str(tmp_path / "x.db")]
        for extra in ([], ["--check"]):
            assert main([*argv, *extra]) == 2
            captured = capsys.readouterr()
            assert captured.out == ""
            assert captured.err == (
                f"chronus serve: --policy: {policy} resizes running jobs, and backend {backend} "
                f"cannot: {why}\n"
            )
    assert not (tmp_path / "x.db").exists()


def test_the_refusal_holds_for_a_policy_from_a_config_file(tmp_path, capsys):
    (tmp_path / "serve.yaml").write_text("policy: elasticflow\n")
    assert main(["serve", "--config", str(tmp_path / "serve.yaml"), "--check"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("chronus serve: --policy: elasticflow resizes running jobs, and ")
    assert err.count("\n") == 1
