"""The chronus marker in a Slurm job's comment: parsing, clear errors, and round trips."""

from __future__ import annotations

import re
from datetime import datetime, timezone

import pytest

from chronus_py.backends.slurm import marker
from chronus_py.backends.slurm.model import expand_hostlist, gpu_count, placement


def fields(comment: str, submit: float = 1000.0, gpus: int = 2) -> dict:
    m = marker.parse(comment)
    return marker.job_fields(
        m, job_id=marker.job_id(m, 7, submit), gpus=gpus, submit=submit, tenant="alice"
    )


def test_full_marker():
    f = fields(
        "chronus: estimate=1h30m deadline=+2h:1,2030-01-01T00:00:00Z:0.5 iterations=100 "
        "model=gpt id=my-run"
    )
    at = datetime(2030, 1, 1, tzinfo=timezone.utc).timestamp()
    assert f == {
        "id": "my-run",
        "gpus": 2,
        "tenant": "alice",
        "submit": 1000.0,
        "estimate_seconds": 5400.0,
        "iterations": 100,
        "model": "gpt",
        "deadlines": [{"at": 1000.0 + 7200, "value": 1.0}, {"at": at, "value": 0.5}],
    }


def test_best_effort_and_default_id():
    f = fields("chronus: estimate=600")
    assert f["deadlines"] == [] and f["id"] == "slurm-7-1000"


def test_a_users_job_is_named_by_its_slurm_id_and_the_submit_time_chronus_recorded():
    # Slurm numbers jobs from FirstJobId again after its controller loses its state: a bare
    # slurm-<jobid> named a job chronus had taken, and the new job was refused every round.
    new = marker.parse("chronus: estimate=60")
    assert marker.job_id(new, 7, 1000.0) == "slurm-7-1000"
    accepted = marker.parse(marker.render(new.user, accepted=True, submit=1000.0))
    assert accepted.submit == 1000.0
    assert marker.job_id(accepted, 7, 2000.0) == "slurm-7-1000"  # Slurm's moves on requeue
    assert marker.job_id(marker.parse("chronus: estimate=60 | accepted"), 7, 2000.0) == "slurm-7"
    # a user's own "| submit=" on a job chronus has not taken names nothing
    assert marker.job_id(marker.parse("chronus: estimate=60 | submit=5"), 7, 1000.0) == (
        "slurm-7-1000"
    )
    with pytest.raises(marker.MarkerError, match="'submit=x': chronus's own field is damaged"):
        marker.parse("chronus: estimate=60 | accepted submit=x")


@pytest.mark.parametrize(
    "comment, why",
    [
        ("chronus: deadline=+1h", "estimate: required"),
        ("chronus: estimate=ten", "estimate: expected a duration"),
        ("chronus: estimate=0", "estimate: must be > 0"),
        ("chronus: estimate=60 gpus=3", "gpus: unknown key"),
        ("chronus: estimate=60 estimate=70", "estimate: given twice"),
        ("chronus: estimate=60 deadline", "expected key=value"),
        ("chronus: estimate=60 deadline=+2h,+1h", "tightest first"),
        ("chronus: estimate=60 deadline=tomorrow", "deadline: expected +DURATION or an ISO time"),
        ("chronus: estimate=60 iterations=-1", "iterations: expected an integer"),
        # a digit to str.isdigit, not to int: the ValueError left every round's arrivals
        ("chronus: estimate=60 iterations=²", "iterations: expected an integer"),
        ("chronus: estimate=60 id=a/b", "id: expected"),
        ("chronus: estimate=" + "9" * 400, "estimate: more than 366 days"),  # a float's inf
        ("chronus: estimate=60 deadline=+1h:" + "9" * 400, "deadline: the value after ':'"),
        ("chronus: estimate=60 deadline=+1h:nan", "deadline: the value after ':'"),
        ("chronus: estimate=60 model=" + "m" * 129, "model: at most 128 characters"),
        ("chronus: estimate=60 | accepted done=nan@0", "chronus's own field is damaged"),
        ("chronus: estimate=60 | accepted done=inf@0", "chronus's own field is damaged"),
    ],
)
def test_errors_name_the_key(comment, why):
    with pytest.raises(marker.MarkerError, match=re.escape(why)):
        fields(comment)


def test_no_gpu_is_an_error():
    with pytest.raises(marker.MarkerError, match="no GPU"):
        fields("chronus: estimate=60", gpus=0)


def test_chronus_fields_round_trip():
    m = marker.parse("chronus: estimate=60 deadline=+1h")
    text = marker.render(m.user, accepted=True, done=12.5, done_run=1700000000)
    again = marker.parse(text)
    assert again.user == m.user and again.accepted and again.done == 12.5
    assert again.done_run == 1700000000
    assert not marker.is_marked("team note") and marker.is_marked("Chronus: estimate=1")


def test_api_job_marker_is_absolute():
    user = marker.for_api_job(
        {"id": "j1", "estimate_seconds": 90, "deadlines": [{"at": 1_900_000_000, "value": 2}]}
    )
    f = fields(marker.render(user, accepted=True), submit=5.0)
    assert f["id"] == "j1" and f["deadlines"] == [{"at": 1_900_000_000.0, "value": 2.0}]


def test_an_api_job_s_estimate_is_written_exactly():
    # Before: 1234567.5 s went into the comment as 1.23457e+06 and came back 2.5 s more.
    user = marker.for_api_job({"id": "j1", "estimate_seconds": 1234567.5})
    assert "estimate=1234567.5 " in marker.render(user, accepted=True) + " "
    assert fields(marker.render(user, accepted=True), submit=5.0)["estimate_seconds"] == 1234567.5


def test_an_api_job_s_deadlines_are_written_exactly():
    # Before: whole seconds, so a deadline at .75 past the second came back 0.75 s early, and a
    # value of 1234567.5 came back as 1.23457e+06.
    options = [{"at": 1_900_000_000.75, "value": 1234567.5}, {"at": 1_900_003_600, "value": 0.5}]
    user = marker.for_api_job({"id": "j1", "estimate_seconds": 90, "deadlines": options})
    assert user["deadline"] == "2030-03-17T17:46:40.75Z:1234567.5,2030-03-17T18:46:40Z:0.5"
    assert fields(marker.render(user, accepted=True), submit=5.0)["deadlines"] == options


def test_slurm_lists():
    assert expand_hostlist("n[1-3,05],gpu7") == ["n1", "n2", "n3", "n05", "gpu7"]
    assert placement("n[1-2]", ["gpu:2(IDX:0-1)", "gpu:a:1(IDX:3),gpu:b:1(IDX:5)"]) == {
        "n1": (0, 1),
        "n2": (3, 5),
    }


@pytest.mark.parametrize(
    "text, gpus",
    [
        ("gpu:8", 8),
        ("gpu:a100:4(S:0-1)", 4),
        ("gpu:a:2,gpu:b:2", 4),
        ("gres:gpu:2", 2),  # v0.0.38's tres_per_node
        ("gres/gpu:2", 2),  # v0.0.40 and later
        ("gres/gpu:a100:3,gres/shard:2", 3),
        ("", 0),
    ],
)
def test_gpu_counts_of_every_api_version(text, gpus):
    assert gpu_count(text) == gpus


@pytest.mark.parametrize(
    "text, at, value",
    [
        # split at the last ':', +05:30 read as value 30 at +05, and a zoneless or +00:00 time
        # as value 0 (refused)
        ("2030-01-01T08:00:00+05:30", "2030-01-01T02:30:00Z", 1.0),
        ("2030-01-01T08:00:00+05:30:0.5", "2030-01-01T02:30:00Z", 0.5),
        ("2030-01-01T08:00:00", "2030-01-01T08:00:00Z", 1.0),
        ("2030-01-01T08:00", "2030-01-01T08:00:00Z", 1.0),
        ("2030-01-01T08:00:00+00:00:2", "2030-01-01T08:00:00Z", 2.0),
        ("2030-01-01:2", "2030-01-01T00:00:00Z", 2.0),
    ],
)
def test_an_iso_deadline_keeps_its_colons(text, at, value):
    want = datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()
    assert marker.deadlines(text, 0.0) == [{"at": want, "value": value}]


def test_an_edited_marker_says_chronus_had_accepted_it():
    with pytest.raises(marker.MarkerError) as err:
        marker.parse("chronus: estimate=2 hours id=api-7 | accepted")
    assert err.value.accepted and err.value.job_id == "api-7"
