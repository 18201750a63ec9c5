"""What the client commands (``submit``, ``status``, ``cancel``, ``jobs``) share: where the
server is, the token, and turning a server's error into the CLI's one-line message.

The server comes from ``--server`` or ``$CHRONUS_SERVER`` (default http://127.0.0.1:8080), the
token from ``--token-file`` or ``$CHRONUS_TOKEN`` (never a flag: it would show in ``ps``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

DEFAULT_SERVER = "http://127.0.0.1:8080"


def add_connection(p: argparse.ArgumentParser) -> None:
    p.add_argument("--server", help=f"server URL (default $CHRONUS_SERVER or {DEFAULT_SERVER})")
    p.add_argument(
        "--token-file", type=Path, help="file holding the bearer token (default $CHRONUS_TOKEN)"
    )


def client_for(args: argparse.Namespace):
    from chronus_py.errors import InputError
    from chronus_py.service.client import Client

    token = os.environ.get("CHRONUS_TOKEN")
    if args.token_file is not None:
        try:
            token = args.token_file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(
                args.token_file, f"cannot read: {getattr(exc, 'strerror', None) or exc}"
            ) from None
    return Client(args.server or os.environ.get("CHRONUS_SERVER") or DEFAULT_SERVER, token)


def call(fn, *args, **kwargs):
    """Run a client call; a server's refusal becomes a one-line ChronusError (exit 1, or 2
    when the request itself was wrong)."""
    from chronus_py.errors import ChronusError
    from chronus_py.service.client import ClientError

    try:
        return fn(*args, **kwargs)
    except ClientError as exc:
        error = ChronusError(str(exc))
        error.exit_code = 2 if 400 <= exc.status < 500 else 1
        raise error from None


def show(obj) -> int:
    sys.stdout.write(json.dumps(obj, indent=2) + "\n")
    return 0
