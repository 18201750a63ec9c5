"""Property-based fuzzing of every reader through the CLI entry points (hypothesis).

Each reader gets hypothesis-driven mutations of a valid seed (benchmarks/fuzz.py's mutator: bit
flips, hostile values, deep nesting, alias bombs, header typos, truncation) and arbitrary bytes.
Whatever the input, ``chronus`` must exit 0, or 1/2 with a one-line message: never a traceback.
Bounded for CI: a few dozen examples per reader, the whole module in well under a minute.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("chronus_fuzz", REPO / "benchmarks" / "fuzz.py")
fuzz = importlib.util.module_from_spec(_spec)
sys.modules["chronus_fuzz"] = fuzz  # dataclasses look their module up while the class is built
_spec.loader.exec_module(fuzz)
TARGETS = {t.name: t for t in fuzz.targets()}
# replays cost more per input; they get fewer examples
SLOW = {"tenant-map", "sweep-grid", "samples-npy", "samples-csv", "samples-json"}

SETTINGS = dict(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def outcome(target, data: bytes, tmp_path: Path) -> tuple[str, str]:
    workdir = tmp_path / "w"
    workdir.mkdir(exist_ok=True)
    for child in workdir.iterdir():
        if child.is_file():
            child.unlink()
    return fuzz.run_one(target, data, workdir)


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_mutated_inputs_never_escape_as_tracebacks(name, tmp_path):
    target = TARGETS[name]

    @settings(max_examples=8 if name in SLOW else 25, **SETTINGS)
    @given(seed=st.integers(0, 2**32 - 1))
    def check(seed):
        data = fuzz.mutate(target.files[target.mutate], random.Random(seed))
        kind, detail = outcome(target, data, tmp_path)
        assert kind in ("clean", "accepted"), f"{name}: {kind}: {detail}"

    check()


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_arbitrary_bytes_are_clean_errors(name, tmp_path):
    target = TARGETS[name]

    @settings(max_examples=5 if name in SLOW else 15, **SETTINGS)
    @given(data=st.binary(max_size=300))
    def check(data):
        kind, detail = outcome(target, data, tmp_path)
        assert kind in ("clean", "accepted"), f"{name}: {kind}: {detail}"

    check()


def test_every_seed_is_accepted(tmp_path):
    """The seeds are valid inputs, so mutations start from something the reader takes."""
    for name, target in TARGETS.items():
        kind, detail = outcome(target, target.files[target.mutate], tmp_path)
        assert kind == ("clean" if name == "sweep-grid" else "accepted"), (name, detail)
