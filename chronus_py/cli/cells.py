"""``chronus cells run SCENARIO.yaml``: drive the cell allocator through a scenario.

Prints one JSON object per step (JSON Lines, docs/cell-scenarios.md). Exits 0 when every
``expect`` holds, 1 when some step's does not (those records carry ``failed``), 2 when the
scenario or its cluster config is malformed (one line naming the file, step and key).
"""

from __future__ import annotations

import json
import sys

from chronus_py.errors import CheckFailed
from chronus_py.inputs import as_input_error


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("cells", help="run HiveD-style cell allocator scenarios")
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    run_parser = sub.add_parser("run", help="run a cell scenario; print one JSON object per step")
    run_parser.add_argument("scenario", metavar="SCENARIO.yaml")
    run_parser.set_defaults(func=run)


def run(args) -> int:
    from placement.errors import PlacementError
    from placement.scenario import load_scenario, run_scenario

    try:
        scenario = load_scenario(args.scenario)
    except PlacementError as exc:
        raise as_input_error(exc, args.scenario) from None
    failed = 0
    for record in run_scenario(scenario):
        sys.stdout.write(json.dumps(record) + "\n")
        failed += "failed" in record
    if failed:
        raise CheckFailed(
            f"{failed} of {len(scenario.steps)} steps did not meet their expectations"
        )
    return 0
