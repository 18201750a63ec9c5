"""A plain ``pip install chronus-py`` (no ``kube`` extra) runs every command but the kueue
backend: the ``serve`` parser, which every command builds, must not import ``lightkube``; and
``--backend kueue`` then says what to install in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NO_KUBE = "import sys; sys.modules['lightkube'] = None; "  # any import of it raises ImportError


def run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", NO_KUBE + code], cwd=ROOT, capture_output=True, text=True
    )


def test_the_cli_parses_without_the_kube_extra():
    done = run("from chronus_py.cli import build_parser; build_parser().parse_args(['replay'])")
    assert done.returncode == 0, done.stderr


def test_the_kueue_backend_without_the_kube_extra_says_what_to_install(tmp_path):
    done = run(
        "from chronus_py.cli import main; "
        "sys.exit("
        f"main(['serve', '--backend', 'kueue', '--db', {str(tmp_path / 'c.db')!r}]))"
    )
    assert done.returncode != 0
    assert "pip install 'chronus-py[kube]'" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr


def test_another_import_error_of_the_kueue_backend_names_its_module(tmp_path):
    """Only a missing module of the kube extra means "install the extra": a module of chronus's
    own (or of another package) that fails to import says so, naming it, in one line."""
    broken = "import sys; sys.modules['chronus_py.backends.kueue.watch'] = None; "
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            broken + "from chronus_py.cli import main; "
            f"sys.exit(main(['serve', '--backend', 'kueue', '--db', {str(tmp_path / 'c.db')!r}]))",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1, done.stderr
    assert "chronus_py.backends.kueue.watch" in done.stderr, done.stderr
    assert "chronus-py[kube]" not in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
