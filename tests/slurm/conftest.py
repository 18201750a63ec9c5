"""A private Slurm cluster for the Slurm backend's tests (``chronus_py/backends/slurm/lab.py``).

The Slurm installation is the system's, or the one under ``$CHRONUS_TEST_SLURM`` (a prefix, e.g.
the Slurm 24.11 that ``.ci/slurm.sh`` builds); ``.ci/run`` runs the suite against both. Without
Slurm (or without root) the tests skip and say why; in CI (``CI=true``) that is a failure
instead, since CI installs Slurm first (``.ci/slurm.sh``).
"""

from __future__ import annotations

import os

import pytest

from chronus_py.backends.slurm.lab import SlurmLab, default_prefix, why_not_here


@pytest.fixture(scope="session")
def slurm_lab(tmp_path_factory):
    prefix = default_prefix()
    why = why_not_here(prefix)
    if why is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but the Slurm tests cannot run: {why}")
        pytest.skip(why)
    lab = SlurmLab(
        tmp_path_factory.mktemp("slurm"), nodes=2, gpus_per_node=4, jwt=True, prefix=prefix
    )
    try:
        lab.start()
        yield lab
    finally:
        lab.stop()


@pytest.fixture
def lab(slurm_lab):
    """The session's cluster, with every daemon up and no job left when the test ends."""
    slurm_lab.ensure_up()
    yield slurm_lab
    slurm_lab.ensure_up()
    slurm_lab.cancel_all()
    slurm_lab.resume_nodes()
