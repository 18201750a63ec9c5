"""``chronus serve --backend slurm`` options: bad ones are one clear error naming the flag."""

from __future__ import annotations

import argparse

import pytest

from chronus_py.backends.slurm import backend
from chronus_py.errors import InputError


def parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    backend.add_arguments(p)
    return p.parse_args(argv)


@pytest.mark.parametrize(
    "argv, flag",
    [
        ((), "--slurmrestd"),
        (("--slurmrestd", "ftp://x"), "--slurmrestd"),
        (("--slurmrestd", "unix:/s", "--slurm-grace", "-1"), "--slurm-grace"),
        (("--slurmrestd", "unix:/s", "--slurm-time-scale", "60"), "--slurm-time-origin"),
        (
            ("--slurmrestd", "unix:/s", "--slurm-time-scale", "0", "--slurm-time-origin", "1"),
            "--slurm-time-scale",
        ),
        (("--slurmrestd", "unix:/s", "--slurm-script", "/nonexistent/x.sh"), "/nonexistent/x.sh"),
        (("--slurmrestd", "unix:/nonexistent/slurmrestd.sock"), "--slurmrestd"),
    ],
)
def test_bad_options(argv, flag, tmp_path, monkeypatch):
    monkeypatch.delenv("SLURM_JWT", raising=False)
    with pytest.raises(InputError) as err:
        backend.from_args(parse(*argv), db_path=tmp_path / "db")
    assert str(err.value).startswith(flag)


def test_jwt_from_file_or_environment_never_shown(lab, tmp_path, monkeypatch):
    url = f"http://127.0.0.1:{lab.rest_port}"
    monkeypatch.delenv("SLURM_JWT", raising=False)
    with pytest.raises(InputError, match="needs a JWT"):
        backend.from_args(parse("--slurmrestd", url), db_path=tmp_path)
    token = lab.token()
    path = tmp_path / "jwt"
    path.write_text(token + "\n")
    b = backend.from_args(
        parse("--slurmrestd", url, "--slurm-token-file", str(path)), db_path=tmp_path
    )
    assert token not in repr(b.rest) and {n.name for n in b.nodes()} == {"n1", "n2"}
    monkeypatch.setenv("SLURM_JWT", token)
    b = backend.from_args(parse("--slurmrestd", url), db_path=tmp_path)
    assert {n.name for n in b.nodes()} == {"n1", "n2"}


def test_compressed_clock():
    b = backend.SlurmBackend(None, time_scale=60, time_origin=1000.0)
    assert b._v(1000.0) == 1000.0 and b._v(1010.0) == 1600.0
    assert b.wall_seconds_until(b.now() + 600) == pytest.approx(10.0, abs=0.1)
