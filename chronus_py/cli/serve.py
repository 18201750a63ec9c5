"""``chronus serve``: the scheduler as a long-running service with an HTTP API.

    chronus serve [--listen 127.0.0.1:8080] [--db chronus.db] [--backend sim] [--tokens FILE]
                  [--config serve.yaml] [--check] [sim: --nodes N --gpus-per-node G --speed X
                  --trace NAME]

See ``chronus_py/service/`` (the API: ``service/api.py``, schema at ``GET /openapi.json``) and
``chronus_py/backends/`` (the backend interface: ``backends/base.py``; sim, Slurm, Kueue).
"""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    from chronus_py.service.server import add_arguments

    p = sub.add_parser(
        "serve",
        help="run the scheduler as a service: HTTP API, SQLite state, "
        "a cluster backend (default: an embedded simulated cluster)",
        description="Run the scheduling loop as a daemon with an HTTP API, durable "
        "state in SQLite, and a pluggable cluster backend.",
    )
    add_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from chronus_py.service.server import check, resolve, serve

    options = resolve(args)
    if args.check:
        print(check(options), end="")
        return 0
    return serve(options)
