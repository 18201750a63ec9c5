"""The flags of ``chronus replay --elastic [POLICY]`` (elastic jobs, resizing by throughput).

``chronus_py/cli/replay.py`` adds them to its parser and turns them, with every other replay flag,
into one :class:`~chronus_py.engine.setup.ReplaySetup`; nothing here runs a replay.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from chronus_py.policies import ELASTIC


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--elastic",
        nargs="?",
        const="elastic-chronus",
        choices=sorted(ELASTIC),
        help="elastic mode: jobs run on any power-of-two size up to their model's cap, "
        "progress by throughput; policy elastic-chronus (default), elasticflow "
        "or elastic-edf (ignores --policy)",
    )
    p.add_argument(
        "--throughputs",
        type=Path,
        help="directory of <model>.csv throughput tables (default: the bundled A100 "
        "tables of ElasticFlow)",
    )
    p.add_argument(
        "--elastic-backend",
        choices=("greedy", "cpsat"),
        default="greedy",
        help="elastic-chronus admission: greedy lease plan only (default), or CP-SAT where the "
        "greedy plan refuses a job (slower; see benchmarks/RESULTS.md)",
    )
    p.add_argument(
        "--resize-scale",
        type=float,
        default=1.0,
        help="multiply the resize overhead model (default 1: 2-7 s per resize, "
        "+27-47 s per (re)start, +2(log2 n+1) s on new GPUs; 0 turns it off)",
    )
