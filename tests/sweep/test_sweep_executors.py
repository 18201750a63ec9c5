"""Every executor gives the same rows (wall time aside) and survives a failing run."""

import pytest

from chronus_py.errors import InputError
from chronus_py.sweep import Grid, execute, same_metrics


def grid(trace) -> list:
    return Grid(
        traces=(str(trace), str(trace.parent / "missing.csv")),
        policies=("srtf", "chronus"),
        nodes=(2,),
        lease_min=(30,),
        options={"chronus": {"backend": "greedy"}},
    ).runs()


def by_key(results) -> dict:
    return {r.config.key: r for r in results}


def test_process_pool_matches_serial(tiny_trace):
    configs = grid(tiny_trace)
    serial = by_key(execute(configs, "serial"))
    pooled = by_key(execute(configs, "process", workers=2))
    assert serial.keys() == pooled.keys() == {c.key for c in configs}
    for key, result in serial.items():
        assert same_metrics(result.row, pooled[key].row), key
        assert result.series == pooled[key].series
    assert sum(r.failed for r in pooled.values()) == 2


def test_ray_matches_process_pool(tiny_trace):
    pytest.importorskip("ray")
    configs = grid(tiny_trace)[:3]
    pooled = by_key(execute(configs, "process", workers=2))
    on_ray = by_key(execute(configs, "ray", workers=2))
    assert on_ray.keys() == pooled.keys()
    for key, result in pooled.items():
        assert same_metrics(result.row, on_ray[key].row), key
        assert result.series == on_ray[key].series
    assert any(r.failed for r in on_ray.values()) and not all(r.failed for r in on_ray.values())


def test_unknown_executor_is_an_input_error(tiny_trace):
    with pytest.raises(InputError, match="unknown executor"):
        execute(grid(tiny_trace), "threads")
