"""The Kubernetes API calls of the kueue backend, through lightkube, as plain dicts.

lightkube was chosen for server-side apply with a field manager (every chronus write is an apply
by its own manager, so it owns only the fields it sets and never clobbers Kueue's), watches, and
generic resources for Kueue's CRDs without generated models. Every failure to reach the API
server, or an answer other than the ones a caller handles, is raised as
:class:`~chronus_py.backends.base.BackendUnavailable`, so the service decides nothing until
the API server answers again. Reads of many objects are not here: the Workloads and Nodes a
round looks at come from watch-fed copies (``watch.py``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, TypeVar

import httpx2
import yaml
from lightkube import ALL_NS, ApiError, Client, KubeConfig
from lightkube.config.kubeconfig import SingleConfig
from lightkube.generic_resource import create_global_resource, create_namespaced_resource
from lightkube.models.authorization_v1 import ResourceAttributes, SelfSubjectAccessReviewSpec
from lightkube.models.core_v1 import EventSource, ObjectReference
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.authentication_v1 import SelfSubjectReview
from lightkube.resources.authorization_v1 import SelfSubjectAccessReview
from lightkube.resources.batch_v1 import Job
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Event, Namespace, Node
from lightkube.types import PatchType

from chronus_py.backends.base import BackendUnavailable
from chronus_py.backends.kueue.pods import POD
from chronus_py.backends.kueue.workloads import records as records_of
from chronus_py.errors import InputError

GROUP = "kueue.x-k8s.io"
T = TypeVar("T")


@dataclass(frozen=True)
class KueueApi:
    """The version of Kueue's API that chronus reads and writes Workloads and AdmissionChecks
    in, with their lightkube resources. Kueue 0.15 and later serve ``v1beta2``; 0.13 and 0.14
    serve only ``v1beta1``. Everything chronus reads or writes of either kind is spelled the
    same in both (Workload ``spec.podSets``, ``spec.active``, ``status.conditions``,
    ``status.admission.podSetAssignments``, ``status.admissionChecks`` with their
    ``podSetUpdates``; AdmissionCheck ``spec.controllerName``, ``status.conditions``): the
    versions differ in fields chronus never touches (priority class, cohort, a ClusterQueue's
    checks), so the version is all that changes."""

    version: str
    workload: type
    admission_check: type

    @property
    def api_version(self) -> str:
        return f"{GROUP}/{self.version}"


APIS = {
    v: KueueApi(
        v,
        create_namespaced_resource(GROUP, v, "Workload", "workloads"),
        create_global_resource(GROUP, v, "AdmissionCheck", "admissionchecks"),
    )
    for v in ("v1beta2", "v1beta1")
}
"""The versions chronus speaks, the one it prefers first."""
NO_KUEUE = (
    f"the API server serves no Workloads and AdmissionChecks of {GROUP} v1beta2 (Kueue 0.15 or "
    "later) or v1beta1 (Kueue 0.14): is Kueue installed?"
)
NEEDS = (
    ("kueue.x-k8s.io", "workloads", "", ("get", "list", "watch", "patch")),
    ("kueue.x-k8s.io", "workloads", "status", ("patch",)),
    ("kueue.x-k8s.io", "admissionchecks", "", ("list",)),
    ("kueue.x-k8s.io", "admissionchecks", "status", ("patch",)),
    ("batch", "jobs", "", ("get",)),
    ("", "nodes", "", ("list", "watch", "patch")),
    ("", "pods", "", ("list", "watch")),
)
"""(API group, resource, subresource, verbs) the controller uses, cluster-wide; what
``deploy/kueue/controller.yaml``'s ClusterRole grants. Under ``--kueue-lease`` it also needs
``LEASE_VERBS`` on Leases in the Lease's namespace (the manifest's Role)."""
LEASE_VERBS = ("get", "create", "update")


class NoKueue(BackendUnavailable):
    """The API server serves none of the Kueue APIs chronus speaks (:data:`APIS`)."""


class Conflict(BackendUnavailable):
    """A write made at a resourceVersion the Workload no longer has (409): it changed
    meanwhile, so what the write assumed may no longer hold."""


def config(kubeconfig: str | None) -> SingleConfig:
    """The API server to talk to: ``kubeconfig`` (its current context), else the Pod's service
    account (in-cluster), else ``$KUBECONFIG`` or ``~/.kube/config``. A file that is not a
    kubeconfig is one line naming it."""
    if kubeconfig is None:
        try:
            return KubeConfig.from_env().get()
        except Exception as exc:  # noqa: BLE001 - lightkube raises several kinds
            raise InputError(
                "--kubeconfig",
                f"not in a cluster, and no usable $KUBECONFIG or ~/.kube/config: {_why(exc)}",
            ) from None
    path = Path(kubeconfig).expanduser()
    try:
        doc = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise InputError(str(path), f"cannot read the kubeconfig: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = None if where is None else where.line + 1
        raise InputError(str(path), "not a kubeconfig: not valid YAML", line=line) from None
    if not isinstance(doc, dict):
        raise InputError(
            str(path),
            "not a kubeconfig: expected a YAML mapping with clusters, contexts and users, "
            f"got {'nothing' if doc is None else type(doc).__name__}",
        )
    try:
        return KubeConfig.from_dict(doc, fname=path).get()
    except Exception as exc:  # noqa: BLE001 - lightkube raises several kinds for a bad config
        raise InputError(str(path), f"not a usable kubeconfig: {_why(exc)}") from None


def _why(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"no {exc.args[0]!r}"
    return str(exc) or type(exc).__name__


class Kube:
    """One connection to the API server; ``manager`` is the field manager of every apply."""

    def __init__(self, cfg: SingleConfig, *, manager: str, timeout: float = 10.0):
        self.cfg = cfg
        self.manager = manager
        self.client = Client(cfg, timeout=httpx2.Timeout(timeout), field_manager=manager)
        self._kueue: KueueApi | None = None
        self.writes: Counter[str] = Counter()
        """Writes asked of the API server, by kind: each costs the API server a write and
        Kueue a reconcile, the controller's main cost on a loaded cluster (the trace
        benchmark reports them per Job)."""
        self.reads = 0
        """Single-object reads (a Workload read fresh, a Job's annotations)."""
        self.pod_lists = 0
        """Lists of a Job's pods (``job_pods``: a start not seen bound in time)."""

    def close(self) -> None:
        self.client.close()

    def call(
        self, what: str, fn: Callable[[], T], *, missing_ok: bool = False, write: str = ""
    ) -> T | None:
        """``fn()``; None for a missing object when ``missing_ok``; any other failure is a
        :class:`BackendUnavailable` naming ``what``. A ``write`` is counted under that kind."""
        if write:
            self.writes[write] += 1
        try:
            return fn()
        except ApiError as exc:
            if missing_ok and exc.status.code == 404:
                return None
            if exc.status.code == 409:
                raise Conflict(f"kueue: {what}: {exc.status.message}") from None
            raise BackendUnavailable(f"kueue: {what}: {exc.status.message}") from None
        except (httpx2.HTTPError, OSError) as exc:
            raise BackendUnavailable(f"kueue: {what}: {exc}") from None

    # -- which Kueue ---------------------------------------------------------------------------
    def like(self, *, timeout: float) -> Kube:
        """Another connection as this one (the writers' and the events' threads each have
        theirs), in the Kueue API this one found, so none of them asks the API server again."""
        other = Kube(self.cfg, manager=self.manager, timeout=timeout)
        other._kueue = self._kueue
        return other

    @property
    def kueue(self) -> KueueApi:
        """The Kueue API this connection reads and writes in: the newest of :data:`APIS` the
        API server serves both kinds in, found on first use (:class:`NoKueue` if none,
        :class:`BackendUnavailable` if the API server does not answer)."""
        if self._kueue is None:
            self._kueue = self.call("find Kueue's API version", self._served)
            if self._kueue is None:
                raise NoKueue(f"kueue: {NO_KUEUE}")
        return self._kueue

    def require_kueue(self) -> KueueApi:
        """:attr:`kueue`, at start: none served is one line saying so (an :class:`InputError`
        on ``--kubeconfig``), not a failed list of AdmissionChecks."""
        try:
            return self.kueue
        except NoKueue:
            raise InputError("--kubeconfig", NO_KUEUE) from None

    def _served(self) -> KueueApi | None:
        """The first of :data:`APIS` whose Workloads and AdmissionChecks the API server lists
        (a list of one object each; 404 for a version it does not serve). A list, not the
        discovery documents: lightkube has no call for those, and a list is what chronus's
        account may do and what chronus does next. The API server answers a group or version
        it does not serve with a plain-text 404, which lightkube raises as an HTTP error, not
        an :class:`ApiError`."""
        for api in APIS.values():
            try:
                for res, ns in ((api.admission_check, None), (api.workload, ALL_NS)):
                    next(iter(self.client.list(res, namespace=ns, chunk_size=1)), None)
            except ApiError as exc:
                if exc.status.code == 404:
                    continue
                raise
            except httpx2.HTTPStatusError as exc:
                if exc.response.status_code == 404:
                    continue
                raise
            return api
        return None

    # -- what the account may do ------------------------------------------------------------------
    def missing_permissions(self, lease_namespace: str | None = None) -> list[str]:
        """What of :data:`NEEDS` (and the Lease's, given its namespace) the account may not do,
        as ``verb resource`` phrases, asked of the API server's authorizer (a
        SelfSubjectAccessReview each, which every authenticated account may make). Empty when
        all is allowed, or when the authorizer cannot be asked (the calls then tell).

        Why: without ``list nodes`` the first list never came and ``serve`` waited 5 minutes to
        say "the first list of Workloads and Nodes took over 300 s"; without ``patch
        workloads/status`` every start failed, a ``backend_error`` a round, and ``serve
        --check`` said 'config OK' either way."""
        asks = [(g, r, sub, v, None) for g, r, sub, verbs in NEEDS for v in verbs]
        if lease_namespace is not None:
            asks += [("coordination.k8s.io", "leases", "", v, lease_namespace) for v in LEASE_VERBS]
        missing = []
        for group, resource, sub, verb, namespace in asks:
            review = SelfSubjectAccessReview(
                spec=SelfSubjectAccessReviewSpec(
                    resourceAttributes=ResourceAttributes(
                        group=group,
                        resource=resource,
                        subresource=sub or None,
                        verb=verb,
                        namespace=namespace,
                    )
                )
            )
            try:
                answer = self.client.create(review)
            except ApiError:  # no authorization API to ask: the calls themselves will tell
                return []
            except (httpx2.HTTPError, OSError) as exc:
                raise BackendUnavailable(f"kueue: ask the authorizer: {exc}") from None
            if not (answer.status and answer.status.allowed):
                name = resource + (f"/{sub}" if sub else "") + (f".{group}" if group else "")
                where = f" in namespace {namespace}" if namespace else ""
                missing.append(f"{verb} {name}{where}")
        return missing

    def account(self) -> str | None:
        """The user the API server takes this client for (None if it cannot say)."""
        try:
            answer = self.client.create(SelfSubjectReview())
        except (ApiError, httpx2.HTTPError, OSError):
            return None
        info = answer.status.userInfo if answer.status else None
        return None if info is None else info.username

    # -- reads -------------------------------------------------------------------------------------
    def workload(self, namespace: str, name: str) -> dict | None:
        self.reads += 1
        got = self.call(
            f"get workload {namespace}/{name}",
            lambda: self.client.get(self.kueue.workload, name, namespace=namespace),
            missing_ok=True,
        )
        return None if got is None else dict(got)

    def admission_checks(self) -> list[dict]:
        return self.call(
            "list admissionchecks",
            lambda: [dict(a) for a in self.client.list(self.kueue.admission_check)],
        )

    def job_annotations(self, namespace: str, name: str) -> dict[str, str]:
        """The annotations of a ``batch/v1`` Job ({} if it is gone)."""
        self.reads += 1
        job = self.call(
            f"get job {namespace}/{name}",
            lambda: self.client.get(Job, name, namespace=namespace),
            missing_ok=True,
        )
        return {} if job is None else dict(job.metadata.annotations or {})

    def job_alive(self, namespace: str, name: str, uid: str | None) -> bool:
        """Whether the ``batch/v1`` Job ``name`` of ``uid`` exists and is not being deleted."""
        self.reads += 1
        job = self.call(
            f"get job {namespace}/{name}",
            lambda: self.client.get(Job, name, namespace=namespace),
            missing_ok=True,
        )
        return (
            job is not None and job.metadata.uid == uid and job.metadata.deletionTimestamp is None
        )

    def job_pods(self, namespace: str, uid: str) -> list[dict]:
        """Every pod of the ``batch/v1`` Job of ``uid`` (the label its controller puts on them),
        as plain dicts: read only for a start whose pods the watch does not show bound in
        time (``binding.py``)."""
        self.pod_lists += 1
        return self.call(
            f"list the pods of job {uid} in {namespace}",
            lambda: [
                dict(p)
                for p in self.client.list(
                    POD, namespace=namespace, labels={"batch.kubernetes.io/controller-uid": uid}
                )
            ],
        )

    def namespace_deleted(self, name: str) -> bool | None:
        """Whether the namespace ``name`` is gone or being deleted; None if this account may
        not read it (``get namespaces`` is optional in ``deploy/kueue/controller.yaml``)."""
        self.reads += 1
        try:
            got = self.client.get(Namespace, name)
        except ApiError as exc:
            if exc.status.code in (403, 404):
                return None if exc.status.code == 403 else True
            raise BackendUnavailable(f"kueue: get namespace {name}: {exc.status.message}") from None
        except (httpx2.HTTPError, OSError) as exc:
            raise BackendUnavailable(f"kueue: get namespace {name}: {exc}") from None
        return got.metadata.deletionTimestamp is not None

    # -- writes (server-side apply, chronus's field manager) ---------------------------------------
    def job_event(
        self, namespace: str, job: str, uid: str | None, reason: str, message: str
    ) -> None:
        """A Warning Event on the user's Job, which ``kubectl describe job`` lists (Kueue's own
        events about chronus's check are on the Workload, which users do not look at).
        :class:`lightkube.ApiError` as the API server answered (403 without ``create
        events``)."""
        now = datetime.now(timezone.utc)
        self.writes["event"] += 1
        self.client.create(
            Event(
                metadata=ObjectMeta(generateName=f"{job[:200]}.", namespace=namespace),
                involvedObject=ObjectReference(
                    apiVersion="batch/v1", kind="Job", name=job, namespace=namespace, uid=uid
                ),
                reason=reason,
                message=message[:1024],
                type="Warning",
                source=EventSource(component="chronus"),
                firstTimestamp=now,
                lastTimestamp=now,
                count=1,
            ),
            namespace=namespace,
        )

    def apply_workload_status(
        self, namespace: str, name: str, status: dict, *, resource_version: str | None = None
    ) -> dict:
        """Apply chronus's part of a Workload's status (its own admission check entry). Forced:
        Kueue resets every check's entry on eviction with an update, which makes it co-owner of
        the entry's fields; the entry is chronus's to decide, so chronus takes them back. With
        ``resource_version`` the apply is made only at that version (else :class:`Conflict`):
        a start decided on a copy lands only if nothing changed since."""
        body = {
            "apiVersion": self.kueue.api_version,
            "kind": "Workload",
            "metadata": {"name": name},
        }
        if resource_version is not None:
            body["metadata"]["resourceVersion"] = resource_version
        body["status"] = status
        return self.call(
            f"apply status of workload {namespace}/{name}",
            lambda: dict(
                self.client.patch(
                    self.kueue.workload.Status,
                    name,
                    body,
                    namespace=namespace,
                    patch_type=PatchType.APPLY,
                    force=True,
                )
            ),
            write="workload status",
        )

    def apply_workload_annotations(
        self, namespace: str, name: str, annotations: dict[str, str]
    ) -> dict:
        """Apply chronus's records on a Workload: exactly these annotations are chronus's after
        the call (one it no longer sends is removed, the user's and Kueue's stay)."""
        body = {
            "apiVersion": self.kueue.api_version,
            "kind": "Workload",
            "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        }
        return self.call(
            f"record on workload {namespace}/{name}",
            lambda: dict(
                self.client.patch(
                    self.kueue.workload,
                    name,
                    body,
                    namespace=namespace,
                    patch_type=PatchType.APPLY,
                    force=True,
                )
            ),
            write="workload records",
        )

    def apply_records(self, namespace: str, name: str, records: dict[str, str]) -> dict | None:
        """Make chronus's records on a Workload exactly ``records``: an apply, then, if another
        manager's update made it co-own a key chronus left out, a merge patch that takes that
        key off. None if the Workload is gone."""
        try:
            got = self.apply_workload_annotations(namespace, name, records)
        except BackendUnavailable:
            if self.workload(namespace, name) is None:
                return None
            raise
        kept = [k for k in records_of(got) if k not in records]
        if kept:
            got = self.remove_workload_annotations(namespace, name, kept)
        return got

    def remove_workload_annotations(self, namespace: str, name: str, keys: list[str]) -> dict:
        """Take annotations off a Workload whatever manager owns them (a merge patch): an apply
        that leaves a key out removes it only if no other manager owns it too, and an update
        by another manager (Kueue's, from a copy older than chronus's last write) that puts a
        key back makes that manager its owner."""
        body = {"metadata": {"annotations": dict.fromkeys(keys)}}
        return self.call(
            f"remove records from workload {namespace}/{name}",
            lambda: dict(
                self.client.patch(
                    self.kueue.workload,
                    name,
                    body,
                    namespace=namespace,
                    patch_type=PatchType.MERGE,
                )
            ),
            write="workload records",
        )

    def apply_check_active(self, name: str, condition: dict[str, Any]) -> None:
        body = {
            "apiVersion": self.kueue.api_version,
            "kind": "AdmissionCheck",
            "metadata": {"name": name},
            "status": {"conditions": [condition]},
        }
        self.call(
            f"set admissioncheck {name} active",
            lambda: self.client.patch(
                self.kueue.admission_check.Status,
                name,
                body,
                patch_type=PatchType.APPLY,
                force=True,
            ),
            write="admission check",
        )

    def label_node(self, node: str, label: str, *, on: bool) -> None:
        """Put ``label=true`` on a node (a server-side apply by a field manager of the label's
        own, so chronus's gang labels never touch the node's other labels), or take it off (a
        merge patch: a node deleted meanwhile has no label to take off)."""
        if on:
            body = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": node, "labels": {label: "true"}},
            }
            self.call(
                f"label node {node}",
                lambda: self.client.patch(
                    Node,
                    node,
                    body,
                    patch_type=PatchType.APPLY,
                    field_manager=f"{self.manager}-{label.rpartition('-')[2]}",
                    force=True,
                ),
                write="node label",
            )
            return
        self.call(
            f"unlabel node {node}",
            lambda: self.client.patch(
                Node, node, {"metadata": {"labels": {label: None}}}, patch_type=PatchType.MERGE
            ),
            missing_ok=True,
            write="node label",
        )

    # -- leases (leader election) ------------------------------------------------------------------
    def lease(self, namespace: str, name: str) -> Lease | None:
        return self.call(
            f"get lease {namespace}/{name}",
            lambda: self.client.get(Lease, name, namespace=namespace),
            missing_ok=True,
        )

    def write_lease(self, lease: Lease, *, create: bool) -> Lease | None:
        """Create or replace (at its resourceVersion) a Lease; None if another replica wrote it
        first (a conflict or an existing object): the caller lost this attempt."""
        try:
            if create:
                return self.client.create(lease)
            return self.client.replace(lease)
        except ApiError as exc:
            if exc.status.code in (409, 422):
                return None
            raise BackendUnavailable(f"kueue: write lease: {exc.status.message}") from None
        except (httpx2.HTTPError, OSError) as exc:
            raise BackendUnavailable(f"kueue: write lease: {exc}") from None
