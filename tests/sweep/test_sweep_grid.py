from pathlib import Path

import pytest

from chronus_py.errors import InputError
from chronus_py.sweep import Grid, make_grid, read_grid


def test_lease_and_seed_multiply_only_runs_they_change():
    grid = Grid(
        traces=("t",),
        policies=("srtf", "chronus"),
        lease_min=(10, 20),
        load=(1, 2),
        sigma=(0.0, 0.5),
        seeds=(0, 1),
    )
    runs = grid.runs()
    srtf = [r for r in runs if r.policy == "srtf"]
    chronus = [r for r in runs if r.policy == "chronus"]
    # srtf: 2 loads x (sigma 0 once + sigma 0.5 x 2 seeds); chronus: x 2 leases
    assert len(srtf) == 2 * 3 and len(chronus) == 2 * 2 * 3
    assert all(r.lease_min is None for r in srtf)
    assert {r.seed for r in runs if r.sigma == 0} == {None}
    assert len({r.key for r in runs}) == len(runs)


def test_lease_becomes_seconds_and_options_pass_through():
    grid = Grid(
        traces=("t",),
        policies=("chronus",),
        lease_min=(10,),
        options={"chronus": {"backend": "greedy"}},
    )
    (config,) = grid.runs()
    assert config.policy_options() == {"backend": "greedy", "lease": 600.0}
    assert "backend" in config.key


def test_make_grid_parses_and_checks():
    grid = make_grid(
        "cmd", {"traces": ["a", "b"], "policies": "fifo", "load": ["0.5", 2], "nodes": [4]}
    )
    assert grid.traces == ("a", "b") and grid.policies == ("fifo",) and grid.load == (0.5, 2.0)
    assert grid.nodes == (4,)


@pytest.mark.parametrize(
    "values, field, why",
    [
        ({"traces": ["t"]}, "policies", "is required"),
        ({"traces": ["t"], "policies": ["nope"]}, "policies", "unknown policy"),
        ({"traces": ["t"], "policies": ["srtf"], "load": [0]}, "load", "> 0"),
        ({"traces": ["t"], "policies": ["srtf"], "sigma": [-1]}, "sigma", ">= 0"),
        ({"traces": ["t"], "policies": ["srtf"], "nodes": ["x"]}, "nodes", "expected int"),
        ({"traces": ["t"], "policies": ["srtf"], "lease": [5]}, "lease", "unknown key"),
        ({"traces": ["t"], "policies": ["srtf"], "gpus_per_node": 0}, "gpus_per_node", "positive"),
        (
            {"traces": ["t"], "policies": ["chronus"], "options": {"chronus": {"nope": 1}}},
            "options",
            "no option",
        ),
    ],
)
def test_make_grid_errors_name_the_key(values, field, why):
    with pytest.raises(InputError) as err:
        make_grid("grid.yaml", values)
    message = str(err.value)
    assert (
        "\n" not in message
        and message.startswith("grid.yaml")
        and field in message
        and why in message
    )


def test_read_grid_rejects_non_mapping(tmp_path: Path):
    path = tmp_path / "g.yaml"
    path.write_text("- a\n- b\n")
    with pytest.raises(InputError, match="must be a mapping"):
        read_grid(path)
    path.write_text("traces: [a\n")
    with pytest.raises(InputError, match="not valid YAML"):
        read_grid(path)
