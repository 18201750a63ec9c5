"""``round_requests``: the allocator gets each job's {1, 2, 4, whole nodes} round-up."""

from chronus_py.engine import replay
from chronus_py.jobs.model import Cluster, Job, JobKind
from chronus_py.policies import FIFO


def jobs() -> list[Job]:
    return [Job(f"j{i}", "default", 3, 0.0, JobKind.BEST_EFFORT, duration=1000.0) for i in range(3)]


def test_a_3_gpu_job_holds_4_gpus_when_rounding_is_on():
    """Three 3-GPU jobs on one 8-GPU node: two start at once either way (3 + 3, or 4 + 4 rounded)
    and the third waits for the first to finish; rounded, every job holds 4 GPUs."""
    plain = {s.id: s for s in replay(jobs(), Cluster.uniform(1, 8), FIFO()).jobs}
    rounded = {
        s.id: s for s in replay(jobs(), Cluster.uniform(1, 8), FIFO(), round_requests=True).jobs
    }
    assert [s.first_start for s in plain.values()] == [0.0, 0.0, plain["j0"].finish]
    assert [s.first_start for s in rounded.values()] == [0.0, 0.0, rounded["j0"].finish]
    assert {s.gpus for s in plain.values()} == {3} and {s.gpus for s in rounded.values()} == {4}
    assert all(sum(map(len, s.placement.values())) in (0, 4) for s in rounded.values())


def test_rounding_follows_the_clusters_node_size():
    job = Job("wide", "default", 5, 0.0, JobKind.BEST_EFFORT, duration=100.0)
    (on_4,) = replay([job], Cluster.uniform(3, 4), FIFO(), round_requests=True).jobs
    (on_8,) = replay([job], Cluster.uniform(2, 8), FIFO(), round_requests=True).jobs
    assert on_4.gpus == 8 and on_8.gpus == 8
    big = Job("big", "default", 10, 0.0, JobKind.BEST_EFFORT, duration=100.0)
    (on_4,) = replay([big], Cluster.uniform(3, 4), FIFO(), round_requests=True).jobs
    assert on_4.gpus == 12
