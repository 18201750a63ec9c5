"""Round-up and batch consolidation (best of greedy orderings, then local search)."""

from __future__ import annotations

from pathlib import Path

import pytest

from placement import CellAllocator, ConsolidatedAllocator, PodSpec, Request
from placement.batch import consolidate, round_up
from placement.slowdown import node_factor

RACKS = Path(__file__).parent / "configs" / "rack-2x2.yaml"


@pytest.mark.parametrize(
    "gpus, rounded", [(1, 1), (2, 2), (3, 4), (4, 4), (5, 8), (8, 8), (9, 16), (17, 24)]
)
def test_round_up_to_1_2_4_8n(gpus, rounded):
    assert round_up(gpus) == rounded


def test_round_up_is_configurable():
    assert round_up(3, small=(1, 2, 3), node=4) == 3
    assert round_up(5, small=(), node=4) == 8


def jobs(*sizes: int) -> list[Request]:
    return [Request(f"j{i}", (PodSpec(g),), vc="vcA") for i, g in enumerate(sizes)]


def test_local_search_beats_every_greedy_ordering_and_commits_it():
    allocator = CellAllocator(RACKS)
    batch = jobs(4, 5, 2, 2, 8)  # 21 GPUs for vcA's 16-GPU rack
    out = consolidate(allocator, batch, steps=60)
    assert out.score > out.greedy_score
    assert out.trials == 4 + 60
    placed = {job for job, r in out.results.items() if r.outcome == "placed"}
    assert set(allocator.jobs()) == placed
    assert sum(len(g) for j in placed for g in allocator.placement_of(j).values()) == 16
    assert allocator.audit() == []


def test_trials_leave_earlier_jobs_alone_and_never_preempt():
    allocator = CellAllocator(RACKS)
    allocator.allocate(Request("running", (PodSpec(8),), vc="vcA", priority=0))
    urgent = [Request("urgent", (PodSpec(8, 2),), vc="vcA", priority=9)]
    out = consolidate(allocator, urgent, steps=5)
    assert out.results["urgent"].outcome == "wait"
    assert allocator.placement_of("running") == {"n0": tuple(range(8))}


def test_works_with_the_node_level_allocator():
    allocator = ConsolidatedAllocator([("a", 8), ("b", 8)])
    out = consolidate(allocator, jobs(6, 6, 4), steps=10)
    assert all(r.outcome == "placed" for r in out.results.values())
    spread = out.results["j2"].by_node()
    assert len(spread) == 2  # the 4-GPU job had to straddle the nodes...
    assert out.score == pytest.approx(12 + 4 * node_factor(4, 2))  # ...which the score charges
    assert out.score >= out.greedy_score
