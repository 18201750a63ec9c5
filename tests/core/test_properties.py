"""Properties of the scheduling core over random job streams, checked after every round.

Small clusters (1-3 nodes of 4 or 8 GPUs), 5-30 jobs with random GPUs, durations, submissions and
deadlines (strict, soft or none), exact estimates. After every ``advance`` (select + place):
- no GPU is held twice, every placement is inside the cluster and as wide as its job, and the
  allocator's free count agrees;
- for Chronus: every guarantee in the lease plan fits capacity (booked GPUs per lease, rounded up
  as the selector plans them, never exceed the cluster) and starts before its promised deadline
  (the lease a deadline falls in holds a last piece of work that fits before it), the
  scheduler's records agree with the selector's, and a guaranteed job whose planned block is due
  (MUST_RUN) never waits while unguaranteed jobs hold the GPUs it needs.
At the end every job has finished and, estimates being exact, every job still guaranteed met its
promised deadline. Jobs demoted on the way are not held to it here: with exact estimates no job
should be demoted at all, but the lease re-plan can still drop one. Hypothesis still finds one
such case (1 node of 8 GPUs: a plan that keeps a running job in the current lease exists, the
greedy plan does not find it: a strict xfail in test_guarantee_gaps.py, which keeps the cases
already fixed).
"""

from __future__ import annotations

from collections import Counter

from core_helpers import chronus, drive, job
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chronus_py.jobs.model import Cluster
from chronus_py.jobs.state import Status
from chronus_py.policies import make_policy
from chronus_py.scheduler import Moves, Scheduler
from chronus_py.selector import Tier
from chronus_py.selector.leases import block_end
from placement import round_up

rows = st.lists(
    st.tuples(
        st.integers(0, 4000),  # submit
        st.integers(60, 3000),  # duration
        st.sampled_from([1, 1, 1, 2, 4, 8]),  # GPUs
        st.sampled_from(["best", "strict", "soft"]),
        st.integers(10, 40),
    ),  # deadline = submit + k/10 x duration
    min_size=5,
    max_size=30,
)
clusters = st.tuples(st.integers(1, 3), st.sampled_from([4, 8]))
chronus_policies = st.builds(
    lambda lease, headroom, guard, objective: chronus(
        lease=lease, headroom=headroom, guard=guard, objective=objective
    ),
    st.sampled_from([600.0, 1200.0]),
    st.sampled_from([0.0, 0.5]),
    st.sampled_from([0.0, 60.0, 600.0]),
    st.sampled_from(["minimize", "maximize", "adaptive"]),
)
baselines = st.sampled_from(["fifo", "srtf", "srtf-gpu", "edf", "las"]).map(
    lambda name: make_policy(name, {"thresholds": (600.0, 6000.0)} if name == "las" else {})
)
PROPERTY = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def build(rows, nodes: int, per_node: int):
    jobs = []
    for i, (submit, duration, gpus, kind, k) in enumerate(rows):
        first = submit + k * duration / 10
        deadlines = {"best": [], "strict": [(first, 10)], "soft": [(first, 10), (2 * first, 4)]}[
            kind
        ]
        jobs.append(
            job(
                f"j{i}",
                gpus=min(gpus, nodes * per_node),
                submit=submit,
                duration=duration,
                deadlines=deadlines,
            )
        )
    return jobs, Cluster.uniform(nodes, per_node)


def check_placements(scheduler: Scheduler, moves: Moves, now: float) -> None:
    size = {n.name: n.gpus for n in scheduler.cluster.nodes}
    held = []
    for state in scheduler.active.values():
        if state.status is not Status.RUNNING:
            assert state.placement == {} and state.id not in scheduler.running
            continue
        assert scheduler.running[state.id] is state
        gpus = [(node, g) for node, indices in state.placement.items() for g in indices]
        assert all(node in size and 0 <= g < size[node] for node, g in gpus), state.placement
        assert len(gpus) == state.gpus
        held += gpus
    assert len(held) == len(set(held)), f"a GPU held twice at {now}"
    assert scheduler.allocator.free_gpus() == scheduler.total_gpus - len(held)
    assert set(scheduler.running) <= set(scheduler.active)


def check_lease_plan(scheduler: Scheduler, moves: Moves, now: float) -> None:
    selector = scheduler.policy.selector
    lease = selector.settings.lease
    per_lease: Counter[int] = Counter()
    for job_id, leases in selector.booked.items():
        promised = selector.guarantees[job_id]
        assert len(set(leases)) == len(leases) and min(leases) >= selector.lease_index
        assert max(leases) * lease < promised.at, (job_id, leases, promised)
        for k in leases:
            per_lease[k] += round_up(scheduler.jobs[job_id].gpus, node=scheduler.node_gpus)
    assert all(used <= scheduler.total_gpus for used in per_lease.values()), per_lease
    for state in scheduler.active.values():
        assert state.guaranteed == selector.guarantees.get(state.id)
    check_incremental_state(selector, scheduler, now)


def check_incremental_state(selector, scheduler: Scheduler, now: float) -> None:
    """What the selector keeps up to date as it goes equals a recomputation from scratch: the
    leases booked, and for every running job whether a stop would break its plan."""
    assert selector._booked_leases == sum(map(len, selector.booked.values()))
    lease = selector.settings.lease
    for state in scheduler.running.values():
        leases = selector.booked.get(state.id)
        if leases is None:
            assert not selector.stop_breaks_plan(state, now)
            continue
        at = selector.guarantees[state.id].at
        if selector.lease_index in leases:
            by = block_end(leases, at, lease)[1]
            expected = by - selector._cover(state, now) - state.overhead <= now
        else:
            later = sorted(k for k in leases if k > selector.lease_index)
            gaps = sum(1 for a, b in zip(later, later[1:]) if b != a + 1)
            work = selector._padded(state, now) + (1 + gaps) * state.overhead
            held = sum(min(lease, max(at - k * lease, 0.0)) for k in later)
            expected = work > held + 1e-9 * lease
        assert selector.stop_breaks_plan(state, now) == expected, (state.id, now)


def check_must_run_not_displaced(scheduler: Scheduler, moves: Moves, now: float) -> None:
    selector = scheduler.policy.selector
    free = scheduler.allocator.free_gpus()
    unguaranteed = sum(s.gpus for s in scheduler.running.values() if s.guaranteed is None)
    for state in scheduler.active.values():
        if state.status is Status.PENDING and selector.tier(state.id) is Tier.MUST_RUN:
            assert state.gpus > free + unguaranteed, (
                f"{state.id} is due and waits at {now} while {free} GPUs are free and "
                f"{unguaranteed} run unguaranteed jobs"
            )


def check_chronus(scheduler: Scheduler, moves: Moves, now: float) -> None:
    """Every check, for a Chronus policy (the test draws only those: its lease plan is read)."""
    check_placements(scheduler, moves, now)
    check_lease_plan(scheduler, moves, now)
    check_must_run_not_displaced(scheduler, moves, now)


@PROPERTY
@given(rows, clusters, st.one_of(baselines, chronus_policies))
def test_no_gpu_is_held_twice_and_every_job_finishes(rows, cluster, policy):
    jobs, cluster = build(rows, *cluster)
    scheduler = drive(jobs, cluster, policy, check=check_placements)
    for state in scheduler.jobs.values():
        assert state.finish >= state.first_start >= state.job.submit
        assert state.starts == state.preemptions + 1


@PROPERTY
@given(rows, clusters, chronus_policies)
def test_chronus_keeps_every_guarantee_it_plans(rows, cluster, policy):
    jobs, cluster = build(rows, *cluster)
    scheduler = drive(jobs, cluster, policy, check=check_chronus)
    for state in scheduler.jobs.values():
        if state.guaranteed is not None:
            assert state.finish <= state.guaranteed.at + 1e-6, (state.id, state.finish)
