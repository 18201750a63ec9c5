"""``chronus submit``: submit a job to a ``chronus serve`` server and print its admission.

chronus submit --gpus 8 --estimate 7200 --deadline 9000 [--deadline 12000:0.5] [--id j1]
chronus submit --gpus 8 --iterations 40000 --deadline 9000   # runtime unknown: measured in place
chronus submit job.json          # the fields of POST /v1/jobs; '-' reads stdin
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from chronus_py.cli.remote import add_connection, call, client_for, show


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "submit",
        help="submit a job to a chronus serve server",
        description="Submit a job; prints the server's answer with its admission "
        "(guaranteed, not_guaranteed, rejected, or tentative for a job without an estimate).",
    )
    p.add_argument("file", nargs="?", help="JSON file of job fields ('-': stdin); or use flags")
    p.add_argument("--id", help="job id (default: the server picks one)")
    p.add_argument("--gpus", type=int)
    p.add_argument("--estimate", type=float, help="estimated work, seconds")
    p.add_argument(
        "--deadline",
        action="append",
        default=[],
        metavar="AT[:VALUE]",
        help="a deadline option, absolute seconds on the server's clock; repeat, tightest first",
    )
    p.add_argument(
        "--iterations",
        type=int,
        help="total iterations: progress reports re-estimate the job; without --estimate the "
        "job is measured in place and answered tentatively",
    )
    p.add_argument("--dry-run", action="store_true", help="ask what admission would say only")
    add_connection(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from chronus_py.errors import InputError

    if args.file:
        try:
            text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text("utf-8")
            job = json.loads(text)
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(
                args.file, f"cannot read: {getattr(exc, 'strerror', None) or exc}"
            ) from None
        except json.JSONDecodeError as exc:
            raise InputError(args.file, f"not valid JSON: {exc.msg}", line=exc.lineno) from None
    else:
        if args.gpus is None or (args.estimate is None and args.iterations is None):
            raise InputError(
                "submit", "give a JSON file, or --gpus and --estimate (or --iterations)"
            )
        job = {"gpus": args.gpus, "deadlines": [_deadline(d) for d in args.deadline]}
        if args.estimate is not None:
            job["estimate_seconds"] = args.estimate
        if args.id:
            job["id"] = args.id
        if args.iterations:
            job["iterations"] = args.iterations
    return show(call(client_for(args).submit, job, dry_run=args.dry_run))


def _deadline(text: str) -> dict:
    from chronus_py.errors import InputError

    at, _, value = text.partition(":")
    try:
        return {"at": float(at), **({"value": float(value)} if value else {})}
    except ValueError:
        raise InputError("--deadline", f"expected AT[:VALUE] (numbers), got {text!r}") from None
