"""The ``chronus`` command: argparse subcommands, one module each, and the one place that turns
a :class:`~chronus_py.errors.ChronusError` into a one-line message and an exit code.

Each subcommand module exposes ``add_parser(subparsers)`` (which sets ``func``) and keeps heavy
imports inside its ``run`` so ``chronus --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from chronus_py.errors import ChronusError

COMMANDS = (
    "replay",
    "profile",
    "host",
    "layers",
    "cells",
    "compare",
    "plan",
    "serve",
    "submit",
    "status",
    "cancel",
    "jobs",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="chronus",
        description="Deadline-aware scheduling of deep-learning training jobs on GPU clusters.",
    )
    parser.add_argument("--version", action="version", version=f"chronus {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(f"chronus_py.cli.{name}").add_parser(sub)
    return parser


def _version() -> str:
    """The installed package's version (pyproject.toml), or "unknown" when run from a bare tree."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("chronus-py")
    except PackageNotFoundError:
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ChronusError as exc:
        print(f"chronus {args.command}: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        return 0
