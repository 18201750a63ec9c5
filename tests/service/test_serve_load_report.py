"""The churn report's split of each wait into the client's lateness and the rest
(benchmarks/serve_load.py, issue 27: the after-a-fork maxima, session 17), and its kinds as
the server timed them (session 20)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "chronus_serve_load", REPO / "benchmarks" / "serve_load.py"
)
serve_load = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(serve_load)

EVENTS = [
    {"event": "replan_started", "now": 10.0},
    {"event": "replan_committed", "now": 17.0},
    {"event": "replan_started", "now": 17.5},
]


def test_a_late_send_is_named_and_taken_out_of_the_wait_from_the_send():
    timeline = [
        (11.0, "submit", 0.300, 0.250),  # after the first fork: 250 ms of it the client's
        (11.5, "read", 0.080, 0.001),  # after it too: 79 ms from the send, the class's most
        (50.0, "cancel", 0.020, -0.001),  # other; sent a hair early, counts from its due
    ]
    phases = serve_load.by_replan_phase(timeline, EVENTS)
    fork = phases["after_fork"]
    assert fork["max_ms"] == 300.0
    assert fork["sent_late_max_ms"] == 250.0
    assert round(fork["from_send_max_ms"], 3) == 79.0
    assert fork["slowest"][0] == [11.0, "submit", 300.0, 250.0]
    other = phases["other"]
    assert round(other["from_send_max_ms"], 3) == 20.0
    assert other["sent_late_max_ms"] == -1.0
    assert "from_send_max_ms" not in phases["after_deferral"]  # no request in it


def test_the_commit_to_fork_chain_reports_the_split_too():
    timeline = [(16.9, "submit", 0.150, 0.100), (30.0, "read", 0.900, 0.0)]
    chain = serve_load.commit_to_fork(timeline, EVENTS)
    assert chain["chains"] == 1
    assert chain["count"] == 1  # the read at 30 s is outside the chain
    assert round(chain["from_send_max_ms"], 3) == 50.0
    assert chain["slowest"] == [[16.9, "submit", 150.0, 100.0]]


def test_the_server_side_counts_only_what_came_between_the_two_scrapes():
    before = {"submit": [(0.01, 90.0), (0.05, 100.0), (0.1, 100.0), (float("inf"), 100.0)]}
    after = {
        "submit": [(0.01, 990.0), (0.05, 1090.0), (0.1, 1098.0), (float("inf"), 1100.0)],
        "get_job": [(0.01, 10.0), (0.05, 10.0), (0.1, 10.0), (float("inf"), 10.0)],
    }
    server = serve_load.server_side(before, after)
    assert server["submit"] == {"count": 1000, "over_50_ms": 0.01, "p99_ms_at_most": 50.0}
    assert server["read"] == {"count": 10, "over_50_ms": 0.0, "p99_ms_at_most": 10.0}
    assert "cancel" not in server  # none came
