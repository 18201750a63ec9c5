"""A job's fixed pods (``Job.pod_gpus``) as a backend records them: read from a record only
(Kueue's arrival, its ``chronus.io/job`` record, the database), never from a request, and
checked to make up the job, one line naming the field."""

from __future__ import annotations

import pytest

from chronus_py.service.jobspec import FieldError, Origin, read_job

BODY = {"id": "ns.wl", "gpus": 6, "estimate_seconds": 60.0}


def test_a_record_gives_the_pods_and_keeps_them_in_its_fields():
    spec = read_job({**BODY, "pod_gpus": 2}, Origin.record("ns", 0.0), now=0.0)
    assert spec.job.pod_gpus == 2 and spec.fields["pod_gpus"] == 2
    assert read_job(BODY, Origin.record("ns", 0.0), now=0.0).job.pod_gpus is None


def test_a_request_cannot_give_pods():
    with pytest.raises(FieldError, match="unknown field") as caught:
        read_job({**BODY, "pod_gpus": 2}, Origin.request("ns"), now=0.0)
    assert caught.value.field == "pod_gpus"


@pytest.mark.parametrize("value", [4, 0, 2.5, "2", True])
def test_pods_that_do_not_make_up_the_job_are_one_line_naming_the_field(value):
    with pytest.raises(FieldError) as caught:
        read_job({**BODY, "pod_gpus": value}, Origin.record("ns", 0.0), now=0.0)
    assert caught.value.field == "pod_gpus" and "divides gpus (6)" in caught.value.why
