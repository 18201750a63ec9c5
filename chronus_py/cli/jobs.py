"""``chronus jobs``: list the jobs of a ``chronus serve`` server, one line each."""

from __future__ import annotations

import argparse
import sys

from chronus_py.cli.remote import add_connection, call, client_for


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("jobs", help="list jobs on a chronus serve server")
    p.add_argument("--state", help="pending, running, finished, cancelled or failed")
    p.add_argument("--tenant", help="admin tokens: one tenant's jobs")
    p.add_argument("--limit", type=int, default=1000)
    add_connection(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    jobs = call(client_for(args).jobs, tenant=args.tenant, state=args.state, limit=args.limit)[
        "jobs"
    ]
    sys.stdout.write(
        f"{'id':<20} {'tenant':<12} {'state':<10} {'gpus':>4}  {'guaranteed':>12}  admission\n"
    )
    for job in jobs:
        promised = job["guaranteed"]["at"] if job["guaranteed"] else "-"
        sys.stdout.write(
            f"{job['id']:<20} {job['tenant']:<12} {job['state']:<10} "
            f"{job['gpus']:>4}  {promised!s:>12}  {job['admission']['decision']}\n"
        )
    return 0
