"""``chronus serve --backend slurm`` options: bad ones are one clear error naming the flag."""
from __future__ import annotations

import argparse

import pytest

from chronus_py.errors import InputError
from chronus_py.service.slurm import backend


def parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    backend.add_arguments(p)
    return p.parse_args(argv)


@pytest.mark.parametrize("argv, flag", [
    ((), "--slurmrestd"),
    (("--slurmrestd", "ftp://x"), "--slurmrestd"),
    (("--slurmrestd", "unix:/s", "--slurm-grace", "-1"), "--slurm-grace"),
    (("--slurmrestd", "unix:/s", "--slurm-time-scale", "60"), "--slurm-time-origin"),
    (("--slurmrestd", "unix:/s", "--slurm-time-scale", "0", "--slurm-time-origin", "1"),
     "--slurm-time-scale"),
    (("--slurmrestd", "unix:/s", "--slurm-script", "/nonexistent/x.sh"), "/nonexistent/x.sh"),
])
def test_bad_options(argv, flag, tmp_path, monkeypatch):
    monkeypatch.delenv("SLURM_JWT", raising=False)
    with pytest.raises(InputError) as err:
        backend.from_args(parse(*argv), db_path=tmp_path / "db")
    assert str(err.value).startswith(flag)


def test_jwt_from_file_or_environment_never_shown(tmp_path, monkeypatch):
    monkeypatch.delenv("SLURM_JWT", raising=False)
    with pytest.raises(InputError, match="needs a JWT"):
        backend.from_args(parse("--slurmrestd", "http://127.0.0.1:6820"), db_path=tmp_path)
    token = tmp_path / "jwt"
    token.write_text("secret.token.value\n")
    b = backend.from_args(parse("--slurmrestd", "http://127.0.0.1:6820", "--slurm-token-file",
                                str(token)), db_path=tmp_path)
    assert "secret" not in repr(b.rest) and b.rest._headers["X-SLURM-USER-TOKEN"] == \
        "secret.token.value"
    monkeypatch.setenv("SLURM_JWT", "from.env.token")
    b = backend.from_args(parse("--slurmrestd", "http://127.0.0.1:6820"), db_path=tmp_path)
    assert b.rest._headers["X-SLURM-USER-TOKEN"] == "from.env.token"


def test_compressed_clock():
    b = backend.SlurmBackend(None, time_scale=60, time_origin=1000.0)
    assert b._v(1000.0) == 1000.0 and b._v(1010.0) == 1600.0
    assert b.wall_seconds_until(b.now() + 600) == pytest.approx(10.0, abs=0.1)
