"""``chronus status JOB``: one job as a ``chronus serve`` server knows it."""

from __future__ import annotations

import argparse

from chronus_py.cli.remote import add_connection, call, client_for, show


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("status", help="show a job of a chronus serve server")
    p.add_argument("job", help="job id")
    add_connection(p)
    p.set_defaults(func=lambda args: show(call(client_for(args).status, args.job)))
