"""Each baseline on tiny traces whose finish times are computed by hand.

One 1-GPU job pays a 30 s restart overhead per start (0.5 min x (1 + log2 1)).
"""

from __future__ import annotations

import pytest

from chronus_py.engine import replay
from chronus_py.jobs.model import Cluster, DeadlineOption, Job, JobKind
from chronus_py.policies import EDF, FIFO, LAS, SRTF, SRTFGPU


def job(id, submit, duration, gpus=1, deadline=None):
    kind = JobKind.BEST_EFFORT if deadline is None else JobKind.STRICT_SLO
    deadlines = () if deadline is None else (DeadlineOption(deadline, 1.0),)
    return Job(
        id=id,
        tenant="t",
        gpus=gpus,
        submit=submit,
        kind=kind,
        deadlines=deadlines,
        duration=duration,
    )


def finishes(jobs, policy, nodes=1, gpus=1):
    result = replay(jobs, Cluster.uniform(nodes, gpus), policy)
    return {s.id: s.finish for s in result.jobs}, {s.id: s.preemptions for s in result.jobs}


LONG_THEN_SHORT = [job("A", 0, 1000), job("B", 100, 200)]


def test_fifo_never_preempts():
    done, pre = finishes(LONG_THEN_SHORT, FIFO())
    assert done == {"A": 1030, "B": 1260} and pre == {"A": 0, "B": 0}


def test_fifo_backfills_past_a_head_that_does_not_fit():
    jobs = [job("A", 0, 100), job("W", 10, 100, gpus=2), job("S", 20, 50)]
    done, _ = finishes(jobs, FIFO(), gpus=2)
    # S starts at 20 beside A, W waits for both: 20 + 80 = 100; W from 130 (A ends) ... S ends 100.
    assert done == {"A": 130, "S": 100, "W": 130 + 100 + 30 * 2}


def test_srtf_preempts_for_shorter_remaining_and_charges_restart():
    done, pre = finishes(LONG_THEN_SHORT, SRTF())
    # B (230 s incl. overhead) beats A's 930 left; A resumes at 330 with 1000 + 2x30 - 100 left.
    assert done == {"B": 330, "A": 330 + 960} and pre == {"A": 1, "B": 0}


def test_srtf_gpu_weighs_remaining_work_by_gpus():
    # On 2 GPUs, W (2 GPUs, 3000 s: 6120 GPU-s with its start) loses to S (1 GPU, 5000 s: 5030
    # GPU-s), which plain SRTF would run second; W then waits for S's GPU.
    jobs = [job("W", 0, 3000, gpus=2), job("S", 0, 5000)]
    done, _ = finishes(jobs, SRTFGPU(), gpus=2)
    assert done == {"S": 5030, "W": 5030 + 3060}
    done, _ = finishes(jobs, SRTF(), gpus=2)
    assert done == {"W": 3060, "S": 3060 + 5030}


def test_edf_orders_by_deadline_then_best_effort():
    done, _ = finishes([job("A", 0, 1000, deadline=5000), job("B", 100, 200, deadline=400)], EDF())
    assert done == {"B": 330, "A": 1290}
    done, _ = finishes([job("A", 0, 1000, deadline=300), job("B", 100, 200, deadline=2000)], EDF())
    assert done == {"A": 1030, "B": 1260}
    done, _ = finishes([job("A", 0, 1000), job("B", 100, 2000, deadline=9000)], EDF())
    assert done["B"] == 100 + 2030 and done["A"] == 2130 + 1000 + 60 - 100


def test_las_demotes_at_threshold_and_keeps_fifo_within_a_queue():
    done, pre = finishes(LONG_THEN_SHORT, LAS(thresholds=(50.0,)))
    # A sinks at 50 GPU-s; B (queue 0) preempts it at 100 and sinks at 150; A (earlier) then runs.
    assert done == {"A": 150 + 960, "B": 1110 + 210} and pre == {"A": 1, "B": 1}


def test_multi_gpu_jobs_share_nodes_and_overhead_scales_with_log_gpus():
    jobs = [job("W", 0, 100, gpus=4), job("N", 0, 100, gpus=2)]
    done, _ = finishes(jobs, SRTF(), nodes=2, gpus=4)
    assert done == {"W": 100 + 30 * 3, "N": 100 + 30 * 2}


@pytest.mark.parametrize("policy", [FIFO(), SRTF(), EDF(), LAS()])
def test_idle_gaps_are_skipped_not_ticked(policy):
    done, _ = finishes([job("A", 0, 10), job("B", 10**9, 10)], policy)
    assert done == {"A": 40, "B": 10**9 + 40}
