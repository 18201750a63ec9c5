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


U = ("--slurmrestd", "unix:/")  # exists: only the flag under test is wrong


@pytest.mark.parametrize(
    "argv, message",
    [
        ((), "--slurmrestd: required"),
        (("--slurmrestd", "bogus"), "--slurmrestd: 'bogus' is not a slurmrestd address"),
        (("--slurmrestd", "ctl:6820"), "--slurmrestd: 'ctl:6820' is not a slurmrestd address"),
        (("--slurmrestd", "ftp://x"), "--slurmrestd: 'ftp://x' is not a slurmrestd address"),
        (("--slurmrestd", "https://ctl"), "--slurmrestd: 'https://ctl': slurmrestd speaks plain"),
        (("--slurmrestd", "http://"), "--slurmrestd: 'http://' names no host"),
        (("--slurmrestd", "http://ctl:x"), "--slurmrestd: 'http://ctl:x': the port is not"),
        (("--slurmrestd", "http://ctl:0"), "--slurmrestd: 'http://ctl:0': the port is not"),
        (("--slurmrestd", "http://ctl/a"), "--slurmrestd: 'http://ctl/a': nothing may follow"),
        (("--slurmrestd", "unix:"), "--slurmrestd: 'unix:' names no socket"),
        (("--slurmrestd", "http://ctl:6820"), "--slurmrestd: http:// needs a JWT"),
        ((*U, "--slurm-grace", "-1"), "--slurm-grace: must be a number of seconds >= 0"),
        ((*U, "--slurm-grace", "nan"), "--slurm-grace: must be a number of seconds >= 0"),
        ((*U, "--slurm-poll", "inf"), "--slurm-poll: must be a number of seconds >= 0"),
        ((*U, "--slurm-signal", "FOO"), "--slurm-signal: 'FOO' is not a signal"),
        ((*U, "--slurm-signal", "99"), "--slurm-signal: '99' is not a signal"),
        ((*U, "--partition", " "), "--partition: empty"),
        ((*U, "--slurm-workdir", "jobs"), "--slurm-workdir: must be an absolute path"),
        ((*U, "--slurm-time-scale", "60"), "--slurm-time-origin: required"),
        ((*U, "--slurm-time-scale", "0", "--slurm-time-origin", "1"), "--slurm-time-scale: must"),
        ((*U, "--slurm-time-scale", "inf", "--slurm-time-origin", "1"), "--slurm-time-scale"),
        ((*U, "--slurm-time-scale", "2", "--slurm-time-origin", "nan"), "--slurm-time-origin"),
        ((*U, "--slurm-script", "/nonexistent/x.sh"), "/nonexistent/x.sh: No such file"),
        (
            ("--slurmrestd", "http://ctl", "--slurm-token-file", "/dev/null"),
            "/dev/null: empty: it must hold the JWT",
        ),
        (("--slurmrestd", "unix:/nonexistent/s.sock"), "--slurmrestd: no socket at /nonexistent"),
    ],
)
def test_bad_options_are_one_line_naming_the_flag(argv, message, tmp_path, monkeypatch):
    monkeypatch.delenv("SLURM_JWT", raising=False)
    with pytest.raises(InputError) as err:
        backend.from_args(parse(*argv), db_path=tmp_path / "db")
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    "text, name", [("USR1", "USR1"), ("SIGUSR2", "USR2"), ("term", "TERM"), ("10", "USR1")]
)
def test_signal_names(text, name):
    assert backend.signal_name(text) == name


def test_a_partition_slurm_does_not_have(lab, tmp_path):
    argv = ("--slurmrestd", f"unix:{lab.socket}", "--partition", "nope")
    with pytest.raises(InputError, match="--partition: Slurm has no partition 'nope'.*gpu"):
        backend.from_args(parse(*argv), db_path=tmp_path)
    argv = ("--slurmrestd", f"unix:{lab.socket}", "--partition", lab.partition)
    assert backend.from_args(parse(*argv), db_path=tmp_path).partition == lab.partition


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
