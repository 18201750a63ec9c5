"""What a new user trips over first: --version, help texts, links, progress output, compare's
early refusal, and an emitted layer config that validates without a warning."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from chronus_py.cli import build_parser, main
from chronus_py.cli.progress import ProgressBar
from chronus_py.policies import POLICIES

REPO = Path(__file__).resolve().parents[2]
HOSTS = REPO / "examples" / "hosts"


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and re.fullmatch(r"chronus \S+\n", capsys.readouterr().out)


def help_text(*command: str) -> str:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[command[0]]
    return sub.format_help()


def test_compare_help_lists_every_policy():
    text = " ".join(help_text("compare").split())
    assert all(name in text for name in POLICIES)


def test_links_in_readme_and_help_point_into_the_repo():
    readme = (REPO / "README.md").read_text()
    for target in re.findall(r"\]\(([^)#]+)\)", readme):
        if "://" not in target:
            assert (REPO / target).exists(), target
    assert "../" not in readme.replace("../..", "")
    assert "docs/metrics.md" in " ".join(help_text("replay").split())
    assert (REPO / "docs" / "metrics.md").is_file()


def test_progress_bar_reaches_100_percent_and_ends_its_line(monkeypatch):
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    bar = ProgressBar("replay")
    bar(3, 10)
    bar.finish(10)
    bar.finish(10)
    assert err.getvalue().endswith("] 10/10\n") and err.getvalue().count("\n") == 1


def test_emitted_config_validates_without_warnings(tmp_path, capsys):
    out = tmp_path / "layers.json"
    assert (
        main(
            [
                "layers",
                "emit",
                "--host",
                str(HOSTS / "2socket-8gpu.yaml"),
                "--jobs",
                str(HOSTS / "jobs-2socket-8gpu.yaml"),
                "-o",
                str(out),
            ]
        )
        == 0
    )
    assert "UsedGpu" in out.read_text()
    capsys.readouterr()
    assert main(["layers", "validate", str(out), "--host", str(HOSTS / "2socket-8gpu.yaml")]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and "(0 error(s), 0 warning(s))" in captured.err
    assert main(["layers", "validate", str(out), "--flags=--verbose"]) == 1
    assert "--enable-gpu-support" in capsys.readouterr().out
