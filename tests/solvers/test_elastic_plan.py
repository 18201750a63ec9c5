"""``solvers.elastic.plan_elastic`` on hand-checked instances: the plan it returns keeps
capacity, sizes and deadlines and does the work; what cannot fit is None; bad input is a
SolverError."""

from __future__ import annotations

import math

import pytest

from solvers import SolverError
from solvers.elastic import ElasticTask, blocks, plan_elastic

SLOT = 60.0


def check(tasks, plan, capacity: int, first: float = SLOT) -> None:
    used: dict[int, int] = {}
    for t in tasks:
        done = 0.0
        for seg in plan[t.id]:
            assert seg.gpus in t.sizes and 0 <= seg.start < seg.stop <= t.end
            rate = t.rates[t.sizes.index(seg.gpus)]
            for slot in range(seg.start, seg.stop):
                used[slot] = used.get(slot, 0) + seg.gpus
                done += rate * (first if slot == 0 else SLOT)
        assert done >= t.work - 1e-6
    assert max(used.values(), default=0) <= capacity


def test_two_tasks_share_the_cluster_and_meet_their_deadlines():
    # 4 GPUs for 10 slots. a: 1200 iterations by slot 5 (needs 4 GPUs at 4/s, or 2 GPUs at
    # 2/s for 10 slots: only the first fits its deadline); b: 1200 by slot 10 at up to 4 GPUs.
    a = ElasticTask("a", (1, 2, 4), (1.0, 2.0, 4.0), 1200, 5)
    b = ElasticTask("b", (1, 2, 4), (1.0, 2.0, 4.0), 1200, 10)
    plan = plan_elastic([a, b], 4, SLOT, SLOT, time_limit_s=5.0)
    assert plan is not None
    check([a, b], plan, 4)


def test_partial_first_slot_counts_only_what_is_left_of_it():
    # 240 iterations at 4/s need a full minute; with 30 s left in slot 0 and the deadline at
    # slot 1 it cannot fit, with the deadline at slot 2 it can.
    task = ElasticTask("t", (4,), (4.0,), 240, 1)
    assert plan_elastic([task], 4, SLOT, 30.0, time_limit_s=5.0) is None
    later = ElasticTask("t", (4,), (4.0,), 240, 2)
    plan = plan_elastic([later], 4, SLOT, 30.0, time_limit_s=5.0)
    assert plan is not None
    check([later], plan, 4, first=30.0)


def test_what_does_not_fit_is_none():
    # Together they need 8 GPUs through slots 0-4; the cluster has 4.
    tasks = [ElasticTask(x, (4,), (4.0,), 1200, 5) for x in "ab"]
    assert plan_elastic(tasks, 4, SLOT, SLOT, time_limit_s=5.0) is None


def test_the_least_gpu_time_is_used():
    # Concave speed-up: 1 GPU does 1/s, 4 GPUs 2/s. 600 iterations by slot 10 fit on 1 GPU
    # (600 GPU-s) or on 4 GPUs (1200 GPU-s): the plan keeps 1 GPU.
    task = ElasticTask("t", (1, 4), (1.0, 2.0), 600, 10)
    plan = plan_elastic([task], 4, SLOT, SLOT, time_limit_s=5.0)
    assert {seg.gpus for seg in plan["t"]} == {1}
    assert sum(seg.stop - seg.start for seg in plan["t"]) == math.ceil(600 / SLOT)


def test_blocks_put_every_deadline_on_a_boundary():
    tasks = [ElasticTask("a", (1,), (1.0,), 1, 7), ElasticTask("b", (1,), (1.0,), 1, 3)]
    cuts = blocks(tasks, split=2)
    assert cuts[0] == (0, 1) and cuts[-1][1] == 7
    assert {b for _, b in cuts} >= {1, 3, 7}
    assert all(a < b for a, b in cuts) and all(x[1] == y[0] for x, y in zip(cuts, cuts[1:]))


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(capacity=0, slot_seconds=SLOT, first_seconds=SLOT, time_limit_s=1.0),
        dict(capacity=4, slot_seconds=SLOT, first_seconds=0.0, time_limit_s=1.0),
        dict(capacity=4, slot_seconds=SLOT, first_seconds=SLOT, time_limit_s=0.0),
    ],
)
def test_bad_parameters_are_solver_errors(kwargs):
    with pytest.raises(SolverError):
        plan_elastic([ElasticTask("t", (1,), (1.0,), 1, 2)], **kwargs)
