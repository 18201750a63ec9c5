"""Command-line flags for the Chronus policy's settings, generated from
:class:`~chronus_py.selector.ChronusSettings` so defaults and help are written once.
``chronus replay`` and ``chronus serve`` both take them; flags left out keep the settings'
defaults, and a config file of ``chronus serve`` uses the same names without the dashes.
"""

from __future__ import annotations

import argparse
from dataclasses import fields
from typing import Any

from chronus_py.errors import InputError
from chronus_py.policies import policy_options
from chronus_py.selector import ChronusSettings
from solvers import BACKENDS, OBJECTIVES

CHOICES = {"backend": tuple(BACKENDS), "objective": (*OBJECTIVES, "adaptive")}


def dest(flag: str) -> str:
    """The namespace attribute of a flag (``--time-limit`` -> ``time_limit``)."""
    return flag.lstrip("-").replace("-", "_")


def add_settings_arguments(p: argparse.ArgumentParser) -> None:
    group = p.add_argument_group("chronus policy settings (--policy chronus)")
    for f in fields(ChronusSettings):
        flag = f.metadata["flag"]
        kind = str if f.name in CHOICES else float
        group.add_argument(
            flag,
            dest=dest(flag),
            type=kind,
            choices=CHOICES.get(f.name),
            default=None,
            help=f"{f.metadata['help']} (default {f.default})",
        )


def settings_given(args: argparse.Namespace, policy: str) -> dict[str, Any]:
    """The Chronus settings given (by field name); refused, naming the flag, for a policy that
    does not take them (the elastic lease planners take ``--lease`` and ``--headroom``)."""
    given = {f.name: getattr(args, dest(f.metadata["flag"]), None) for f in fields(ChronusSettings)}
    given = {name: value for name, value in given.items() if value is not None}
    taken = policy_options(policy)
    refused = [
        f.metadata["flag"] for f in fields(ChronusSettings) if f.name in set(given) - set(taken)
    ]
    if refused:
        raise InputError(refused[0], f"a Chronus setting that policy {policy} does not take")
    return given
