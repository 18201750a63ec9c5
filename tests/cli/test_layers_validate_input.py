"""``chronus layers validate`` reads its file under the limits every reader has (README, "Messy
input": files over 256 MiB refused before reading, a bad byte naming its line). It read the
whole file whatever its size, and named a bad byte by offset only."""

from __future__ import annotations

import subprocess
import sys


def validate(workdir, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "chronus_py", "layers", "validate", *args],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_layer_config_over_the_size_limit_is_refused_before_reading(tmp_path):
    with open(tmp_path / "huge.json", "wb") as fh:  # sparse: no disk used, nothing to read
        fh.truncate(257 * 1024 * 1024)
    done = validate(tmp_path, "huge.json")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "chronus layers: huge.json: layer config is 269,484,032 bytes; the limit is 268,435,456"
    ]


def test_a_bad_byte_names_its_line(tmp_path):
    (tmp_path / "bad.json").write_bytes(b'[\n  {"name": "caf\xe9"}\n]\n')
    done = validate(tmp_path, "bad.json")
    assert done.returncode == 2
    assert done.stderr.splitlines() == ["chronus layers: bad.json:2: not UTF-8 text (byte 17)"]


def test_a_missing_file_is_still_one_line(tmp_path):
    done = validate(tmp_path, "missing.json")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "chronus layers: missing.json: cannot read: No such file or directory"
    ]


def test_a_config_of_many_bad_layers_prints_the_first_problems_and_counts_the_rest(tmp_path):
    """A million bad layers printed a million lines; the summary still counts every one."""
    (tmp_path / "many.json").write_text("[" + ", ".join(["7"] * 500) + "]")
    done = validate(tmp_path, "many.json")
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert len(lines) == 101 and lines[-1].endswith("more problem(s), not shown")
    shown = int(lines[-1].split()[2]) + 100
    assert done.stderr.splitlines() == [f"many.json: invalid ({shown} error(s), 0 warning(s))"]
