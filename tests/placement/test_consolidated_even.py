"""Even spreading: a gang that fits no single node is split into equal per-node shares, because a
cluster manager that asks GPUs per node (Slurm's ``--gres=gpu:N``) cannot run any other split."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from placement import ConsolidatedAllocator, PodSpec, Request


def cluster(taken: dict[str, int], *, even: bool, gpus: int = 4) -> ConsolidatedAllocator:
    """Four nodes of ``gpus`` GPUs, ``taken[node]`` of them held by other jobs."""
    alloc = ConsolidatedAllocator([(n, gpus) for n in "abcd"], even=even)
    for node, n in taken.items():
        if n:
            assert alloc.reserve(Request(f"x-{node}", (PodSpec(n),)), {node: range(n)}).outcome == (
                "placed"
            )
    return alloc


def counts(alloc: ConsolidatedAllocator, job: str) -> dict[str, int]:
    return {node: len(g) for node, g in alloc.placement_of(job).items()}


def test_a_gang_too_big_for_any_node_splits_unevenly_by_default_and_evenly_when_asked():
    taken = {"a": 1, "b": 2, "c": 3, "d": 4}  # free: a 3, b 2, c 1, d 0
    uneven = cluster(taken, even=False)
    assert uneven.allocate(Request("j", (PodSpec(4),))).outcome == "placed"
    assert counts(uneven, "j") == {"a": 3, "c": 1}
    even = cluster(taken, even=True)
    assert even.allocate(Request("j", (PodSpec(4),))).outcome == "placed"
    assert counts(even, "j") == {"a": 2, "b": 2}


def test_an_even_gang_waits_when_only_an_uneven_split_is_free():
    alloc = cluster({"a": 1, "b": 3, "c": 3, "d": 4}, even=True)  # free: a 3, b 1, c 1
    assert alloc.allocate(Request("j", (PodSpec(4),))).outcome == "wait"
    assert alloc.free_gpus() == 5


@given(
    taken=st.fixed_dictionaries({n: st.integers(0, 8) for n in "abcd"}),
    gpus=st.integers(1, 32),
)
def test_even_placements_hold_equal_shares_and_are_found_whenever_one_exists(taken, gpus):
    alloc = cluster(taken, even=True, gpus=8)
    free = Counter({n: 8 - t for n, t in taken.items()})
    possible = any(
        gpus % k == 0 and sum(f >= gpus // k for f in free.values()) >= k for k in range(1, 5)
    )
    result = alloc.allocate(Request("j", (PodSpec(gpus),)))
    assert (result.outcome == "placed") == possible
    if possible:
        shares = set(counts(alloc, "j").values())
        assert len(shares) == 1 and sum(counts(alloc, "j").values()) == gpus


def test_equal_pods_stacked_unevenly_on_nodes_are_spread_evenly_instead():
    # 9 GPUs as 3 pods of 3 on 8-GPU nodes (what the scheduler asks for): best fit would stack
    # two pods on one node (6 + 3), which Slurm cannot run; even mode gives 3 + 3 + 3.
    alloc = ConsolidatedAllocator([(n, 8) for n in "abc"], even=True)
    assert alloc.allocate(Request("j", (PodSpec(3, 3),))).outcome == "placed"
    assert counts(alloc, "j") == {"a": 3, "b": 3, "c": 3}
    stacked = ConsolidatedAllocator([(n, 8) for n in "abc"])
    assert stacked.allocate(Request("j", (PodSpec(3, 3),))).outcome == "placed"
    assert sorted(counts(stacked, "j").values()) == [3, 6]
