"""The watch-fed copy (``chronus_py/backends/kueue/watch.py``, :class:`Store`): what a round reads
instead of listing every Workload. No control plane: the objects are what the API server sends."""

from __future__ import annotations

import pytest

pytest.importorskip("lightkube")

from lightkube.models.meta_v1 import ObjectMeta  # noqa: E402
from lightkube.resources.core_v1 import Node  # noqa: E402

from chronus_py.backends.base import BackendUnavailable  # noqa: E402
from chronus_py.backends.kueue.watch import Store, name_key, namespaced_key  # noqa: E402


def wl(name: str, rv: int, state: str = "Pending") -> dict:
    return {
        "metadata": {"namespace": "ns", "name": name, "resourceVersion": str(rv)},
        "status": {"state": state},
    }


def test_nothing_is_read_before_the_first_list_nor_while_the_watch_is_down():
    s = Store("workloads", namespaced_key)
    with pytest.raises(BackendUnavailable, match="watch of workloads: not listed yet"):
        s.snapshot()
    s.replace([wl("a", 5)], 5)
    assert s.wait_synced(0) and list(s.snapshot()) == ["ns/a"]
    s.stale("connection refused")
    with pytest.raises(BackendUnavailable, match="watch of workloads: connection refused"):
        s.snapshot()
    s.replace([wl("a", 6)], 6)  # listed again: readable again
    assert s.snapshot()["ns/a"]["metadata"]["resourceVersion"] == "6"


def test_a_write_is_not_undone_by_an_older_event_or_list():
    s = Store("workloads", namespaced_key)
    s.replace([wl("a", 10)], 10)
    s.put(wl("a", 12, "Ready"))  # chronus's apply returned version 12
    s.put(wl("a", 11, "Pending"))  # the watch's event for a change before it
    assert s.snapshot()["ns/a"]["status"]["state"] == "Ready"
    s.replace([wl("a", 11, "Pending")], 11)  # a list that started before the write
    assert s.snapshot()["ns/a"]["status"]["state"] == "Ready"
    s.put(wl("a", 13, "Retry"))
    assert s.snapshot()["ns/a"]["status"]["state"] == "Retry"


def test_a_relist_drops_what_was_deleted_meanwhile_but_keeps_what_is_newer():
    s = Store("workloads", namespaced_key)
    s.replace([wl("gone", 3), wl("kept", 4)], 4)
    s.put(wl("new", 9))  # written after the list below was taken
    s.replace([wl("kept", 4)], 8)
    assert sorted(s.snapshot()) == ["ns/kept", "ns/new"]


def test_a_deletion_older_than_the_copy_is_ignored():
    s = Store("workloads", namespaced_key)
    s.replace([], 1)
    s.put(wl("a", 5))
    s.delete(wl("a", 4))  # the old incarnation's deletion, after the new one was seen
    assert list(s.snapshot()) == ["ns/a"]
    s.delete(wl("a", 6))
    assert s.snapshot() == {}


def test_a_snapshot_is_not_changed_by_later_events():
    s = Store("workloads", namespaced_key)
    s.replace([wl("a", 1)], 1)
    before = s.snapshot()
    s.put(wl("b", 2))
    s.put(wl("a", 3, "Ready"))
    assert list(before) == ["ns/a"] and before["ns/a"]["status"]["state"] == "Pending"


def test_nodes_are_models_keyed_by_name():
    s = Store("nodes", name_key)
    s.replace([Node(metadata=ObjectMeta(name="n1", resourceVersion="7"))], 7)
    s.put(Node(metadata=ObjectMeta(name="n1", resourceVersion="6")))
    assert s.snapshot()["n1"].metadata.resourceVersion == "7"
