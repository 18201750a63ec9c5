"""Watch-fed copies of the cluster's objects, so a round reads memory, not the API server.

At 5,000 Workloads a full list took the controller 6-13 s and held the service's lock meanwhile,
so its HTTP API stopped answering (benchmarks/RESULTS.md, issue 24). Here each kind of object is
listed once, then followed by a watch from the list's ``resourceVersion`` (lightkube's
``Client.watch``, which resumes from the last event's version when the server closes the stream),
in a background thread with its own event loop: the scheduling loop and the HTTP server never
wait for it, and a round copies a dict.

- **410 Gone** (the version fell out of the API server's history) and every other failure of a
  watch end it; the copy is then marked stale (readers get ``BackendUnavailable``, so no round
  decides on a cluster nobody can see) and listed again, with a back-off, until the API server
  answers. lightkube would restart a watch from "now" on a 410, which misses deletions made
  meanwhile; a fresh list does not.
- **Bookmarks** are not asked for: lightkube 1.0's ``watch`` has no ``allowWatchBookmarks``, and
  the Workload and Node watches here are unfiltered, so their last event's version is already
  the newest one that matters; a version that grows too old costs one list (the 410 above). The
  Pod watch is narrowed by a field selector (bound, not terminal: ``pods.BOUND``), which still
  passes every bound pod's events, so it too rarely waits long enough for that.
- **What is held** may be less than the object (``Kind.keep``): of the pods only the few fields
  of those asking GPUs, so the copy's size follows the GPU pods, not all of the cluster's. A
  watch reports a pod that stops matching the selector (it ended) as deleted.
- **Writes** by the controller (server-side apply) put the object the API server returned into
  the copy at once, so the next round sees its own decisions even before their watch events
  arrive; an event older than what the copy holds is ignored. Versions are compared as integers,
  which Kubernetes 1.35 makes part of the API (KEP-5504, comparable resource versions); one that
  is not an integer is taken as newer.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

import httpx2
from lightkube import ApiError, AsyncClient
from lightkube.config.kubeconfig import SingleConfig

from chronus_py.backends.base import BackendUnavailable

log = logging.getLogger("chronus.kueue")
WATCH_SECONDS = 300  # the server ends a watch after this long; lightkube resumes it
BACKOFF_MAX = 5.0


def _meta(obj: Any) -> Mapping[str, Any]:
    """The metadata of a generic object (a dict) or of a lightkube model, as a mapping."""
    if isinstance(obj, Mapping):
        return obj.get("metadata") or {}
    m = obj.metadata
    return {} if m is None else {"name": m.name, "resourceVersion": m.resourceVersion}


def version(obj: Any) -> int | None:
    """The object's resourceVersion as an integer, None if it has none or it is not one."""
    rv = _meta(obj).get("resourceVersion")
    return int(rv) if rv and rv.isdigit() else None


def name_key(obj: Any) -> str:
    return _meta(obj)["name"]


def namespaced_key(obj: Any) -> str:
    m = _meta(obj)
    return f"{m['namespace']}/{m['name']}"


@dataclass(frozen=True)
class Kind:
    """What to follow: a lightkube resource, the key of its objects, whether it is namespaced
    (then it is followed in every namespace); ``fields``, a field selector (lightkube's form)
    that narrows the list and the watch; ``keep``, what of an object the copy holds (None: the
    object is not held, so a copy of many objects of which few matter stays small)."""

    resource: type
    key: Callable[[Any], str]
    namespaced: bool
    fields: Mapping[str, Any] | None = None
    keep: Callable[[Any], Any] | None = None


def _newer(new: Any, old: Any) -> bool:
    a, b = version(new), version(old)
    return a is None or b is None or a >= b


class Store:
    """The copy of one kind of object, key -> object, safe to read from any thread. Objects are
    replaced, never changed in place, so a snapshot stays valid while the watch goes on."""

    def __init__(self, kind: str, key: Callable[[Any], str]):
        self.kind = kind
        self.key = key
        self._objects: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._synced = threading.Event()
        self._stale: str | None = "not listed yet"

    def snapshot(self) -> dict[str, Any]:
        """Every object, as of now; ``BackendUnavailable`` while the watch is down."""
        with self._lock:
            if self._stale is not None:
                raise BackendUnavailable(f"kueue: watch of {self.kind}: {self._stale}")
            return dict(self._objects)

    def get(self, key: str) -> Any | None:
        """One object, as of now (None if there is none); ``BackendUnavailable`` while the watch
        is down."""
        with self._lock:
            if self._stale is not None:
                raise BackendUnavailable(f"kueue: watch of {self.kind}: {self._stale}")
            return self._objects.get(key)

    def wait_synced(self, timeout: float) -> bool:
        return self._synced.wait(timeout)

    def replace(self, objects: Iterable[Any], listed_at: int | None) -> None:
        """A fresh list (at version ``listed_at``): it replaces the copy, except for objects a
        write put in meanwhile that are newer than the list."""
        fresh = {self.key(o): o for o in objects}
        with self._lock:
            for k, held in self._objects.items():
                got = fresh.get(k)
                if got is not None and not _newer(got, held):
                    fresh[k] = held
                elif got is None and listed_at is not None and (version(held) or 0) > listed_at:
                    fresh[k] = held
            self._objects = fresh
            self._stale = None
        self._synced.set()

    def put(self, obj: Any) -> None:
        """An object as the API server returned or announced it, unless the copy is newer."""
        k = self.key(obj)
        with self._lock:
            held = self._objects.get(k)
            if held is None or _newer(obj, held):
                self._objects[k] = obj

    def delete(self, obj: Any) -> None:
        k = self.key(obj)
        with self._lock:
            held = self._objects.get(k)
            if held is not None and _newer(obj, held):
                del self._objects[k]

    def stale(self, why: str) -> None:
        with self._lock:
            self._stale = why


class Watches:
    """One background thread whose event loop lists and watches each kind given, into a
    :class:`Store` per kind (by the name given)."""

    def __init__(self, cfg: SingleConfig, kinds: Mapping[str, Kind]):
        self.cfg = cfg
        self.kinds = dict(kinds)
        self.stores = {name: Store(name, kind.key) for name, kind in self.kinds.items()}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: list[asyncio.Task] = []
        self._thread = threading.Thread(target=self._run, name="kueue-watch", daemon=True)
        self._ready = threading.Event()

    def start(self) -> "Watches":
        self._thread.start()
        self._ready.wait()
        return self

    def wait_synced(self, timeout: float) -> bool:
        """Whether every kind was listed once within ``timeout`` wall seconds."""
        end = time.monotonic() + timeout
        return all(s.wait_synced(max(end - time.monotonic(), 0.0)) for s in self.stores.values())

    def stop(self) -> None:
        if self._loop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(lambda: [t.cancel() for t in self._tasks])
            self._thread.join(timeout=10)

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        try:
            client = AsyncClient(self.cfg, timeout=httpx2.Timeout(60.0))
        except Exception as exc:  # noqa: BLE001 - a bad configuration: no copy can be read
            for store in self.stores.values():
                store.stale(f"cannot make a client: {exc}")
            self._ready.set()
            return
        self._tasks = [
            asyncio.create_task(self._follow(client, name, kind))
            for name, kind in self.kinds.items()
        ]
        self._ready.set()
        try:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        finally:
            await client.close()

    async def _follow(self, client: AsyncClient, name: str, kind: Kind) -> None:
        """List, then watch from the list's version; on any failure, mark the copy stale and
        list again (with a back-off while the API server does not answer)."""
        store = self.stores[name]
        res, namespace = kind.resource, "*" if kind.namespaced else None
        keep = kind.keep or (lambda obj: obj)
        backoff = 0.2
        while True:
            try:
                listing = client.list(res, namespace=namespace, chunk_size=500, fields=kind.fields)
                objects = [k async for o in listing if (k := keep(o)) is not None]
                rv = listing.resourceVersion
                store.replace(objects, int(rv) if rv and rv.isdigit() else None)
                backoff = 0.2
                async for event, obj in client.watch(
                    res,
                    namespace=namespace,
                    fields=kind.fields,
                    resource_version=rv,
                    server_timeout=WATCH_SECONDS,
                ):
                    if event == "DELETED":
                        store.delete(obj)
                    elif event in ("ADDED", "MODIFIED"):
                        kept = keep(obj)
                        if kept is None:
                            store.delete(obj)
                        else:
                            store.put(kept)
            except asyncio.CancelledError:
                raise
            except ApiError as exc:
                why = f"{exc.status.code} {exc.status.message}"
                self._lost(store, why, gone=exc.status.code == 410)
            except Exception as exc:  # noqa: BLE001 - whatever ended the watch, the copy is
                # stale until a new list: never left looking fresh behind a dead watch
                self._lost(store, f"{type(exc).__name__}: {exc}", gone=False)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX)

    @staticmethod
    def _lost(store: Store, why: str, *, gone: bool) -> None:
        if not gone:
            store.stale(why)  # a 410 needs a new list, but the copy is as good as it was
        event = "kueue_watch_relist" if gone else "kueue_watch_lost"
        log.warning(json.dumps({"event": event, "kind": store.kind, "error": why}))
