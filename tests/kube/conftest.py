"""A private Kubernetes control plane for the kueue backend's tests
(``chronus_py/backends/kueue/lab.py``): etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, kwok and Kueue, built from pinned Go modules by
``tests/kube/controlplane/build.sh``. The Kueue is the one ``go.mod`` pins (``v1beta2``), or
with ``CHRONUS_TEST_KUEUE=0.14`` Kueue 0.14 (``v1beta1`` only; ``lab.KUEUES``).

Fixtures:

- ``control_plane`` (session): the :class:`~chronus_py.backends.kueue.lab.ControlPlane`,
  started once, with no nodes and no queues.
- ``kube`` (function): the same control plane with every daemon up (the API server restarted if
  a test stopped it); nodes the test added are removed when it ends.
- ``kube_ns`` (function): a fresh namespace (its name), deleted with everything in it when the
  test ends.
- ``kube_queues`` (function): ``make(gpus, admission_checks=(), node_labels=None) -> name``
  creates a ResourceFlavor, ClusterQueue and a LocalQueue in ``kube_ns``, all with one fresh
  name (jobs use it as their queue name); removed when the test ends.

Without Go or without a built cache the tests skip and say why; in CI (``CI=true``) that is a
failure instead, since CI builds the control plane first (``.ci/kube-controlplane.sh``).
"""

from __future__ import annotations

import importlib.util
import os
import secrets

import pytest

from chronus_py.backends.kueue.lab import ControlPlane, why_not_here

CI = os.environ.get("CI", "").lower() == "true"
if CI and importlib.util.find_spec("lightkube") is None:
    # the test modules skip without it (``importorskip``): in CI that skip must be a failure
    raise pytest.UsageError("CI=true but lightkube is not installed: pip install '.[kube]'")


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory):
    why = why_not_here()
    if why is not None:
        if CI:
            pytest.fail(f"CI=true but the Kubernetes tests cannot run: {why}")
        pytest.skip(why)
    cp = ControlPlane(tmp_path_factory.mktemp("kube"))
    try:
        cp.start()
        yield cp
    finally:
        cp.stop()


@pytest.fixture
def kube(control_plane):
    """The session's control plane, every daemon up; the test's nodes are removed after it."""
    control_plane.ensure_up()
    before = set(control_plane.nodes())
    yield control_plane
    control_plane.ensure_up()
    for name in set(control_plane.nodes()) - before:
        control_plane.remove_node(name)


@pytest.fixture
def kube_ns(kube):
    name = f"t-{secrets.token_hex(4)}"
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    kube.api("DELETE", f"/api/v1/namespaces/{name}", ok=(200, 202, 404))


@pytest.fixture
def kube_queues(kube, kube_ns):
    made: list[str] = []

    def make(gpus: int, admission_checks=(), node_labels=None) -> str:
        name = f"q-{secrets.token_hex(4)}"
        kube.make_queues(
            name, gpus, kube_ns, admission_checks=admission_checks, node_labels=node_labels
        )
        made.append(name)
        return name

    yield make
    for name in made:
        kube.delete_queues(name, kube_ns)


@pytest.fixture(scope="session")
def chronus_kubeconfig(control_plane):
    """The controller's kubeconfig for its least-privilege ServiceAccount, RBAC installed once per
    session (imported here: the modules check for lightkube before anything needs it)."""
    from chronus_py.backends.kueue import harness

    return harness.install_rbac(control_plane)


@pytest.fixture
def setup(kube, kube_ns, kube_queues, chronus_kubeconfig):
    """A scenario's namespace, queues and controller access (``kueue_helpers.make_setup``)."""
    from kueue_helpers import make_setup

    return make_setup(kube, kube_ns, kube_queues, chronus_kubeconfig)
