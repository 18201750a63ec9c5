"""The v0.0.40+ layer's readings that no daemon here shows on demand: numbers that are not set or
infinite, state flag lists, and which reply warnings mean a request was not done as sent (the
real daemons are in test_rest.py)."""

from __future__ import annotations

import math

import pytest

from chronus_py.backends.slurm.api_v0040 import RestV0040, job_state, number
from chronus_py.backends.slurm.backend import trouble


def test_numbers():
    assert number({"set": True, "infinite": False, "number": 7}) == 7
    assert number({"set": False, "infinite": False, "number": 0}) == 0
    assert number({"set": True, "infinite": True, "number": 0}) == math.inf
    assert number(3) == 3 and number(None) == 0


@pytest.mark.parametrize(
    "flags, state",
    [
        (["PENDING"], "PENDING"),
        (["PENDING", "REQUEUED"], "PENDING"),
        (["RUNNING", "COMPLETING"], "COMPLETING"),
        (["COMPLETED", "COMPLETING"], "COMPLETING"),
        (["RUNNING", "CONFIGURING"], "CONFIGURING"),
        (["FAILED"], "FAILED"),
        ("RUNNING", "RUNNING"),
    ],
)
def test_job_states(flags, state):
    assert job_state(flags) == state


def test_a_drained_or_down_node_is_unhealthy_whatever_its_base_state():
    layer = RestV0040("v0.0.42")
    for states, healthy in (
        (["IDLE"], True),
        (["MIXED"], True),
        (["IDLE", "DRAIN"], False),
        (["ALLOCATED", "DRAIN"], False),
        (["DOWN", "NOT_RESPONDING"], False),
        (["IDLE", "NOT_RESPONDING"], False),
    ):
        node = layer.node({"name": "n1", "gres": "gpu:4", "state": states, "partitions": ["gpu"]})
        assert node.gpus == 4 and node.partitions == ("gpu",)
        assert (trouble(node) == "") is healthy, states


@pytest.mark.parametrize(
    "description, refused",
    [
        ('Ignoring unknown field "nodelist" of type string in job_desc_msg', True),
        ('Field "script" is deprecated', True),
        ("Ignoring value for removed parser", True),
        ("Job update resulted in non-zero return-code[0]: Job has already finished", True),
        ("Job is in held state, pending scheduler release", False),
        (
            "Job submission resulted in non-zero return code: Job is in held state, pending "
            "scheduler release",
            False,
        ),
        ("Job was already sent signal User defined signal 1", False),
    ],
)
def test_warnings_that_mean_a_request_was_not_done(description, refused):
    reply = {"warnings": [{"description": description, "source": "x"}], "errors": []}
    assert bool(RestV0040("v0.0.42").refusals(reply)) is refused


def test_a_partitions_max_time_in_seconds_unset_or_infinite_is_no_limit():
    layer = RestV0040("v0.0.42")
    for time_, seconds in (
        ({"set": True, "infinite": False, "number": 90}, 5400.0),
        ({"set": False, "infinite": True, "number": 0}, math.inf),
        ({"set": False, "infinite": False, "number": 0}, math.inf),
        (None, math.inf),
    ):
        raw = {"name": "gpu", "maximums": {"time": time_}}
        assert layer.partition(raw).max_time == seconds
