"""A private Kubernetes control plane on one host, in a temporary directory: etcd,
kube-apiserver, kube-controller-manager, kube-scheduler, kwok (simulated nodes and pod
lifecycles) and Kueue's controller manager, all on free loopback ports.

It exists so the kueue backend is tested, demonstrated and benchmarked against the real API
server and the real Kueue controller, never against an imitation. The binaries are built from
pinned Go modules by ``tests/kube/controlplane/build.sh`` into a cache outside the checkout
(:func:`cache_dir`); nothing here downloads or builds anything. Every daemon runs in its own
process group as a child of this process, so :meth:`ControlPlane.stop` ends exactly the
processes it started.

What runs, and how it is wired:

- **kube-apiserver**: a serving certificate and the service-account signing key are generated
  at start (``openssl``); authentication by static bearer tokens (the admin is in
  ``system:masters``) and service-account tokens; authorization ``RBAC``, so a controller's
  least-privilege RBAC is really tested (:meth:`ControlPlane.service_account_kubeconfig`).
- **kube-controller-manager** (every default controller: job, garbage collector, node
  lifecycle, namespace, service accounts, ...), each controller with its own service account, as
  in a real cluster; **kube-scheduler** with its default profile.
- **kwok** manages every node with the ``kwok.x-k8s.io/node: fake`` annotation
  (:meth:`ControlPlane.add_node`): it keeps their Lease fresh so the node lifecycle controller
  sees them Ready, and plays kwok's "general" pod stages: a bound pod goes Running, a pod owned
  by a Job completes (``Succeeded``), a deleted pod goes away, each after the delay in the
  pod's ``<stage>.stage.kwok.x-k8s.io/delay`` annotations (a random 1-5 s without them).
  :func:`job` writes such Jobs.
- **Kueue** with its CRDs and its own RBAC (it runs as its service account
  ``kueue-system/kueue-controller-manager``), the ``batch/job`` integration, no leader election,
  internal certificate management, and its **webhooks registered**: the API server calls them
  (and the CRD conversion) by URL on loopback, with a certificate the lab makes in the shape
  Kueue's rotator keeps. So a Job with a ``kueue.x-k8s.io/queue-name`` label is suspended by
  Kueue's mutating webhook, Kueue's objects are validated, and ``v1beta1`` reads are converted.
  Which Kueue: the one ``go.mod`` pins (serving ``kueue.x-k8s.io/v1beta2``), or with
  ``CHRONUS_TEST_KUEUE=0.14`` the Kueue 0.14 of ``kueue-0.14/go.mod`` (serving only ``v1beta1``),
  so the backend is tested against both APIs (:data:`KUEUES`); the lab makes its queues and
  checks in the version the running Kueue serves (:attr:`ControlPlane.kueue_api`).
  Left out: Kueue's metrics endpoint and its visibility API server; kubelets (kwok stands in),
  kube-proxy and cluster DNS, so Services carry no traffic.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import ssl
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import httpx
import yaml

from chronus_py.backends.kueue.names import GPU
from chronus_py.service.serve_process import free_port

BINARIES = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "kwok",
)
"""The daemons every lab runs, besides its Kueue (:class:`Kueue`)."""
#: Where the pinned Go modules and the build script live, in a checkout.
SOURCES = Path(__file__).resolve().parents[3] / "tests" / "kube" / "controlplane"
KEY_FILES = (
    "go.mod",
    "go.sum",
    "kwok/go.mod",
    "kwok/go.sum",
    "kueue-0.14/go.mod",
    "kueue-0.14/go.sum",
    "kube-1.37/go.mod",
    "kube-1.37/go.sum",
)
KUEUE_VARIABLE = "CHRONUS_TEST_KUEUE"
KUBE_VARIABLE = "CHRONUS_TEST_KUBE"
KUBES = {"": "", "1.37": "kube-1.37"}
"""``$CHRONUS_TEST_KUBE`` -> where in ``bin/`` the lab's API server, controller manager and
scheduler are: unset or empty, ``bin/`` itself (the Kubernetes ``go.mod`` pins); ``1.37``,
``bin/kube-1.37/`` (``kube-1.37/go.mod``). etcd, kubectl, kwok and Kueue are the same for all."""
KUBE_DAEMONS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")


@dataclass(frozen=True)
class Kueue:
    """One Kueue the cache holds (``build.sh``): its controller manager ``bin/<name>`` and its
    CRDs, RBAC and webhooks in ``<name>/``; the version of ``kueue.x-k8s.io`` it serves and of
    its configuration file (``config.kueue.x-k8s.io``); whether it takes
    ``--visibility-server-port`` (0.14 has no such flag, and starts no visibility server with
    ``VisibilityOnDemand`` off)."""

    name: str
    api: str
    config_api: str
    visibility_flag: bool


KUEUES = {
    "": Kueue("kueue", "v1beta2", "v1beta2", True),
    "0.14": Kueue("kueue-0.14", "v1beta1", "v1beta1", False),
}
"""``$CHRONUS_TEST_KUEUE`` -> the Kueue a lab runs: unset or empty, the one ``go.mod`` pins;
``0.14``, the one ``kueue-0.14/go.mod`` pins."""
KUEUE_NS = "kueue-system"
KUEUE_SA = "kueue-controller-manager"
WEBHOOK_SERVICE = "kueue-webhook-service"
WEBHOOK_SECRET = "kueue-webhook-server-cert"
#: The annotation kwok manages nodes by (every lab node also has the label ``type: kwok``).
KWOK_NODE = "kwok.x-k8s.io/node"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
#: libyaml's loader where PyYAML has it: Kueue's CRDs are megabytes of YAML.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
#: Kueue's CRDs that have a v1beta1 version converted by its webhook.
CONVERTED_CRDS = ("localqueues", "clusterqueues", "workloads", "cohorts", "multikueueclusters")


def cache_key(sources: Path = SOURCES) -> str:
    """The build's version key: 16 hex digits of the SHA-256 of the pinned modules (the same
    computation as ``build.sh``), so a changed pin builds into a new cache directory."""
    digest = hashlib.sha256()
    for name in KEY_FILES:
        digest.update((sources / name).read_bytes())
    return digest.hexdigest()[:16]


def cache_dir() -> Path:
    """``$CHRONUS_KUBE_CACHE``, else ``~/.cache/chronus-kube/<key>``."""
    env = os.environ.get("CHRONUS_KUBE_CACHE")
    if env:
        return Path(env)
    return Path.home() / ".cache" / "chronus-kube" / cache_key()


def default_kueue() -> Kueue:
    """The Kueue ``$CHRONUS_TEST_KUEUE`` names (:data:`KUEUES`; :func:`why_not_here` says when
    it names none)."""
    return KUEUES[os.environ.get(KUEUE_VARIABLE, "")]


def default_kube() -> str:
    """The directory under ``bin/`` of the Kubernetes ``$CHRONUS_TEST_KUBE`` names (:data:`KUBES`;
    :func:`why_not_here` says when it names none)."""
    return KUBES[os.environ.get(KUBE_VARIABLE, "")]


def why_not_here(cache: Path | None = None) -> str | None:
    """Why a control plane cannot run on this machine, or None if it can."""
    build = "tests/kube/controlplane/build.sh (or .ci/kube-controlplane.sh)"
    release = os.environ.get(KUEUE_VARIABLE, "")
    if release not in KUEUES:
        known = ", ".join(k for k in KUEUES if k)
        return f"{KUEUE_VARIABLE}={release}: not a Kueue the lab builds ({known}, or unset)"
    kube = os.environ.get(KUBE_VARIABLE, "")
    if kube not in KUBES:
        known = ", ".join(k for k in KUBES if k)
        return f"{KUBE_VARIABLE}={kube}: not a Kubernetes the lab builds ({known}, or unset)"
    if shutil.which("openssl") is None:
        return "openssl is not installed (the lab makes its certificates with it)"
    if cache is None:
        if not os.environ.get("CHRONUS_KUBE_CACHE") and not (SOURCES / "go.mod").exists():
            return "no control-plane cache: set CHRONUS_KUBE_CACHE or run from a checkout"
        cache = cache_dir()
    if not (cache / "STAMP").exists():
        if shutil.which("go") is None:
            return f"Go is not installed, so the Kubernetes control plane cannot be built ({build})"
        return f"the Kubernetes control plane is not built in {cache}: run {build}"
    wanted = (*BINARIES, KUEUES[release].name, *(str(Path(KUBES[kube], d)) for d in KUBE_DAEMONS))
    missing = [b for b in wanted if not (cache / "bin" / b).exists()]
    if missing:
        return f"the control-plane cache {cache} lacks {', '.join(missing)}: rerun {build}"
    return None


def job(
    name: str,
    queue: str,
    *,
    namespace: str = "default",
    gpus: int = 1,
    pods: int = 1,
    run_seconds: float = 2.0,
    start_seconds: float = 0.0,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    suspend: bool = True,
) -> dict[str, Any]:
    """A ``batch/v1`` Job for Kueue's LocalQueue ``queue``: ``pods`` pods (parallelism and
    completions) of ``gpus`` GPUs each, that kwok starts ``start_seconds`` after they are bound
    (kwok's own default is a random 1-5 s per stage) and runs for ``run_seconds``.
    ``annotations`` go on the Job (where chronus reads its own), ``labels`` on the Job besides
    the queue name. Created suspended, as Kueue expects (its webhook would suspend it anyway)."""
    stages = {"pod-create": start_seconds, "pod-ready": 0.0, "pod-complete": run_seconds}
    delays = {
        f"{stage}.stage.kwok.x-k8s.io/{key}": f"{seconds:g}s"
        for stage, seconds in stages.items()
        for key in ("delay", "jitter-delay")
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {QUEUE_LABEL: queue, **(labels or {})},
            "annotations": dict(annotations or {}),
        },
        "spec": {
            "suspend": suspend,
            "parallelism": pods,
            "completions": pods,
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": delays},
                "spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 5,
                    "containers": [
                        {
                            "name": "train",
                            "image": "train:latest",
                            "resources": {
                                "requests": {GPU: str(gpus)},
                                "limits": {GPU: str(gpus)},
                            },
                        }
                    ],
                },
            },
        },
    }


def _openssl(args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args.split()], cwd=cwd, check=True, capture_output=True)


def _flags(**flags: object) -> list[str]:
    """Command-line flags from keywords: ``etcd_servers=u`` is ``--etcd-servers=u``."""
    return [
        f"--{k.replace('_', '-')}={str(v).lower() if isinstance(v, bool) else v}"
        for k, v in flags.items()
    ]


def _make_certs(pki: Path) -> None:
    """A CA, the API server's serving certificate (loopback names and the service IP) and the
    service-account signing key pair. The CAs carry a critical ``keyUsage`` and the serving
    certificates name their issuer's key: Python 3.13 verifies strictly (``VERIFY_X509_STRICT``)
    and refuses a CA without the one, as RFC 5280 asks, and a certificate without the other
    (OpenSSL 3 adds it by itself, OpenSSL 1.1 only when told)."""
    pki.mkdir(parents=True, exist_ok=True)
    ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
    _openssl(
        f"req -x509 {ec} -keyout ca.key -out ca.crt -days 7 -subj /CN=chronus-lab-ca"
        " -addext keyUsage=critical,keyCertSign,cRLSign",
        pki,
    )
    (pki / "san.cnf").write_text(
        "subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,"
        "DNS:kubernetes.default,DNS:kubernetes.default.svc\n"
        "extendedKeyUsage=serverAuth\n"
        "authorityKeyIdentifier=keyid,issuer\n"
    )
    _openssl(f"req {ec} -keyout apiserver.key -out apiserver.csr -subj /CN=kube-apiserver", pki)
    _openssl(
        "x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial"
        " -out apiserver.crt -days 7 -extfile san.cnf",
        pki,
    )
    _openssl("genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out sa.key", pki)
    _openssl("pkey -in sa.key -pubout -out sa.pub", pki)
    # Kueue's webhook certificate, in the shape its certificate rotator accepts as valid (so it
    # keeps it): a CA named kueue-ca, a serving certificate for the webhook Service's name,
    # both valid beyond its 90-day look-ahead; 127.0.0.1 too, since the API server calls the
    # webhooks by URL on loopback (a Service's endpoints may not be loopback addresses).
    # (an RSA CA key in PKCS#1, the only form the rotator parses)
    _openssl(
        "req -x509 -newkey rsa:2048 -nodes -keyout webhook-ca.key -out webhook-ca.crt -days 365"
        " -subj /CN=kueue-ca -addext subjectAltName=DNS:kueue-ca"
        " -addext keyUsage=critical,keyCertSign,cRLSign",
        pki,
    )
    _openssl("rsa -in webhook-ca.key -traditional -out webhook-ca.key", pki)
    (pki / "webhook-san.cnf").write_text(
        f"subjectAltName=IP:127.0.0.1,DNS:{WEBHOOK_SERVICE}.{KUEUE_NS}.svc\n"
        "extendedKeyUsage=serverAuth\n"
        "authorityKeyIdentifier=keyid,issuer\n"
    )
    _openssl(f"req {ec} -keyout webhook.key -out webhook.csr -subj /CN={WEBHOOK_SERVICE}", pki)
    _openssl(
        "x509 -req -in webhook.csr -CA webhook-ca.crt -CAkey webhook-ca.key -CAcreateserial"
        " -out webhook.crt -days 365 -extfile webhook-san.cnf",
        pki,
    )


def _docs(paths: Iterable[Path]) -> list[dict]:
    """Every YAML document in ``paths``, in order, without empty ones."""
    out: list[dict] = []
    for path in paths:
        out.extend(d for d in yaml.load_all(path.read_text(), Loader=_YAML_LOADER) if d)
    return out


def _kueue_rbac(docs: list[dict]) -> list[dict]:
    """Kueue's RBAC as its kustomization renders it: names prefixed ``kueue-``, the namespace
    ``system`` renamed ``kueue-system``."""
    for doc in docs:
        meta = doc["metadata"]
        meta["name"] = "kueue-" + meta["name"]
        if "namespace" in meta:
            meta["namespace"] = KUEUE_NS
        if "roleRef" in doc:
            doc["roleRef"]["name"] = "kueue-" + doc["roleRef"]["name"]
        for subject in doc.get("subjects", []):
            if subject.get("kind") == "ServiceAccount":
                subject["name"] = "kueue-" + subject["name"]
                subject["namespace"] = KUEUE_NS
    return docs


def _kueue_webhooks(docs: list[dict], url: str) -> list[dict]:
    """Kueue's webhook configurations, kept to Kueue's own objects and ``batch/v1`` Jobs (the
    only integration the lab enables), called at ``url`` + their path."""
    for doc in docs:
        doc["metadata"]["name"] = "kueue-" + doc["metadata"]["name"]
        kept = []
        for hook in doc["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            if "kueue-x-k8s-io" in path or path.endswith("-batch-v1-job"):
                hook["clientConfig"] = {"url": url + path}
                kept.append(hook)
        doc["webhooks"] = kept
    return docs


def _kubeconfig(path: Path, server: str, ca: Path, token: str, user: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "lab", "cluster": {"server": server, "certificate-authority": str(ca)}}
                ],
                "users": [{"name": user, "user": {"token": token}}],
                "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": user}}],
                "current-context": "lab",
            }
        )
    )
    path.chmod(0o600)
    return path


class ControlPlaneError(RuntimeError):
    """A daemon did not come up; the message names it and ends with its log's last lines."""


@dataclass
class ControlPlane:
    """One private control plane. ``start()`` brings every daemon up and waits until the API
    server answers and Kueue is ready; ``stop()`` ends every daemon it started.

    Public attributes for tests: ``server`` (the API server's URL), ``ca`` (its CA file),
    ``kubeconfig`` (an admin kubeconfig: token auth, ``system:masters``), ``admin_token``,
    ``log_dir`` (one ``<daemon>.log`` each), ``procs`` (name -> Popen), ``kueue`` (which
    Kueue runs), ``kueue_api`` (the ``apiVersion`` of the objects it serves) and ``kube`` (the
    directory under ``bin/`` of its API server, controller manager and scheduler).
    """

    root: Path
    cache: Path = field(default_factory=cache_dir)
    kueue: Kueue = field(default_factory=default_kueue)
    kube: str = field(default_factory=default_kube)
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.root = Path(self.root)
        self.cache = Path(self.cache)
        self.bin = self.cache / "bin"
        self.kueue_api = f"kueue.x-k8s.io/{self.kueue.api}"
        self.pki = self.root / "pki"
        self.log_dir = self.root / "log"
        self.ports = {
            name: free_port()
            for name in (
                "etcd",
                "etcd-peer",
                "apiserver",
                "controller-manager",
                "scheduler",
                "kwok",
                "kueue-health",
                "kueue-webhook",
                "kueue-visibility",
            )
        }
        self.server = f"https://127.0.0.1:{self.ports['apiserver']}"
        self.ca = self.pki / "ca.crt"
        self.kubeconfig = self.root / "admin.kubeconfig"
        self.admin_token = secrets.token_hex(16)
        self._tokens = {
            "admin": (self.admin_token, "chronus-lab-admin", "system:masters"),
            "controller-manager": (secrets.token_hex(16), "system:kube-controller-manager", ""),
            "scheduler": (secrets.token_hex(16), "system:kube-scheduler", ""),
        }
        self._http: httpx.Client | None = None
        self._kinds: dict[str, dict[str, tuple[str, bool]]] = {}

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self, *, with_kueue: bool = True) -> None:
        """Start every daemon, in dependency order; on any failure stop what was started and
        raise :class:`ControlPlaneError`. ``with_kueue=False``: etcd and the API server only,
        a cluster without Kueue (what chronus must refuse to start on)."""
        try:
            for sub in ("etcd", "log", "kueue/certs", "apiserver"):
                (self.root / sub).mkdir(parents=True, exist_ok=True)
            _make_certs(self.pki)
            self._write_configs()
            self._start_etcd()
            self.start_apiserver()
            if not with_kueue:
                return
            self._install_kueue_objects()
            # Spawned together, then waited for: none needs another to become ready (Kueue's
            # certificate bootstrap is the longest), so their starts overlap.
            ready = [self._start_kueue(), *self._start_controllers(), self._start_kwok()]
            for wait in ready:
                wait()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """End every daemon this lab started, newest first: SIGTERM to its process group, SIGKILL
        after 5 s. (kube-apiserver exits on SIGTERM only once its watches are closed: with
        ``--shutdown-watch-termination-grace-period`` 0, its default, it stopped listening at
        once and then waited, unexited, for watches no one closed until the SIGKILL.)"""
        for name in reversed(list(self.procs)):
            self._stop_proc(name)
        if self._http is not None:
            self._http.close()
            self._http = None

    def ensure_up(self) -> None:
        """Restart the API server if a test stopped it, and fail loudly if any other daemon
        died (its log's tail says why)."""
        if "kube-apiserver" not in self.procs:
            self.start_apiserver()
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise ControlPlaneError(f"{name} exited ({proc.returncode})" + self._tail(name))

    def stop_apiserver(self) -> None:
        """Stop the API server (SIGTERM, as an operator's restart would); every client sees
        connection errors until :meth:`start_apiserver`."""
        self._stop_proc("kube-apiserver")
        if self._http is not None:  # its kept-alive connections died with the server
            self._http.close()
            self._http = None

    def start_apiserver(self) -> None:
        """Start the API server on its port (again, after :meth:`stop_apiserver`) and wait
        until it is ready."""
        p = self.pki
        self._spawn(
            "kube-apiserver",
            _flags(
                etcd_servers=f"http://127.0.0.1:{self.ports['etcd']}",
                bind_address="127.0.0.1",
                advertise_address="127.0.0.1",
                secure_port=self.ports["apiserver"],
                cert_dir=self.root / "apiserver",
                tls_cert_file=p / "apiserver.crt",
                tls_private_key_file=p / "apiserver.key",
                client_ca_file=self.ca,
                token_auth_file=self.root / "tokens.csv",
                authorization_mode="RBAC",
                service_account_issuer="https://kubernetes.default.svc.cluster.local",
                service_account_key_file=p / "sa.pub",
                service_account_signing_key_file=p / "sa.key",
                service_cluster_ip_range="10.0.0.0/24",
                endpoint_reconciler_type="none",
                # on SIGTERM, close its watches (within 2 s) and exit, as a restart expects
                shutdown_watch_termination_grace_period="2s",
                profiling=False,
                v=1,
            ),
        )
        self._wait("kube-apiserver", lambda: self._get_ok(f"{self.server}/readyz"), 90)

    def restart_apiserver(self) -> None:
        self.stop_apiserver()
        self.start_apiserver()

    # -- HTTP and kubectl ----------------------------------------------------------------------
    def server_writes(self) -> dict[str, int]:
        """The API server's own count of the writes it served since it started (its
        ``apiserver_request_total`` for POST, PUT, PATCH, APPLY and DELETE), by resource: what
        every client together asked of it (benchmarks compare a run's before and after)."""
        self.api("GET", "/version")  # the admin client, made on first use
        text = self._http.get("/metrics").text
        out: dict[str, int] = {}
        for line in text.splitlines():
            if not line.startswith("apiserver_request_total{"):
                continue
            labels, _, value = line.rpartition(" ")
            fields = dict(re.findall(r'(\w+)="([^"]*)"', labels))
            if fields.get("verb") not in ("POST", "PUT", "PATCH", "APPLY", "DELETE"):
                continue
            kind = fields.get("resource", "") + (
                "/" + fields["subresource"] if fields.get("subresource") else ""
            )
            out[kind] = out.get(kind, 0) + int(float(value))
        return out

    def api(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        ok: tuple[int, ...] = (200, 201),
        content_type: str = "application/json",
        params: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """One request to the API server as the admin; the answer's JSON. Any status outside
        ``ok`` raises :class:`httpx.HTTPStatusError` (with the server's message)."""
        if self._http is None:
            self._http = httpx.Client(
                base_url=self.server,
                verify=ssl.create_default_context(cafile=self.ca),
                headers={"Authorization": f"Bearer {self.admin_token}"},
                timeout=30.0,
            )
        kwargs: dict[str, Any] = {"params": params}
        if body is not None:
            kwargs["content"] = body if isinstance(body, (bytes, str)) else json.dumps(body)
            kwargs["headers"] = {"Content-Type": content_type}
        resp = self._http.request(method, path, **kwargs)
        if resp.status_code not in ok:
            raise httpx.HTTPStatusError(
                f"{method} {path}: {resp.status_code} {resp.text[:500]}",
                request=resp.request,
                response=resp,
            )
        return resp.json() if resp.content else {}

    def apply(self, *objects: dict[str, Any], manager: str = "chronus-lab") -> None:
        """Server-side apply ``objects``, in order, as the admin (field manager ``manager``,
        conflicts forced), as ``kubectl apply --server-side`` would, without its start-up and
        discovery per call. A namespaced object without a namespace goes to ``default``."""
        for obj in objects:
            path = self.path_of(obj)
            self.api(
                "PATCH",
                path,
                obj,
                content_type="application/apply-patch+yaml",
                params={"fieldManager": manager, "force": "true"},
            )

    def path_of(self, obj: dict[str, Any]) -> str:
        """The API path of ``obj`` (by its ``apiVersion``, ``kind``, name and namespace), from
        the API server's discovery; a kind not found is looked up again (a CRD may be new)."""
        version = obj["apiVersion"]
        kind = obj["kind"]
        if kind not in self._kinds.get(version, {}):
            base = "/api/v1" if version == "v1" else f"/apis/{version}"
            found = self.api("GET", base)["resources"]
            self._kinds[version] = {
                r["kind"]: (r["name"], r["namespaced"]) for r in found if "/" not in r["name"]
            }
            if kind not in self._kinds[version]:
                raise ControlPlaneError(f"the API server has no kind {kind} in {version}")
        plural, namespaced = self._kinds[version][kind]
        base = "/api/v1" if version == "v1" else f"/apis/{version}"
        meta = obj["metadata"]
        if namespaced:
            base += f"/namespaces/{meta.get('namespace', 'default')}"
        return f"{base}/{plural}/{meta['name']}"

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> str:
        """Run the lab's kubectl as the admin; its stdout. A failure raises
        :class:`ControlPlaneError` with kubectl's message when ``check``."""
        proc = subprocess.run(
            [str(self.bin / "kubectl"), f"--kubeconfig={self.kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check and proc.returncode != 0:
            raise ControlPlaneError(f"kubectl {' '.join(args)}: {proc.stderr.strip()}")
        return proc.stdout

    def service_account_kubeconfig(
        self, namespace: str, name: str, path: Path | None = None, *, hours: int = 24
    ) -> Path:
        """A kubeconfig that acts as ServiceAccount ``namespace/name`` (created, with its
        namespace, if missing), holding a bound token valid ``hours``: what a Pod running under
        that account would get, so RBAC is tested as it would be in a cluster."""
        self.apply(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": name, "namespace": namespace},
            },
        )
        answer = self.api(
            "POST",
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": hours * 3600},
            },
        )
        target = path or self.root / f"sa-{namespace}-{name}.kubeconfig"
        return _kubeconfig(target, self.server, self.ca, answer["status"]["token"], name)

    # -- nodes ---------------------------------------------------------------------------------
    def add_node(
        self,
        name: str,
        gpus: int = 8,
        labels: dict[str, str] | None = None,
        *,
        cpu: str = "64",
        memory: str = "512Gi",
        wait: bool = True,
    ) -> None:
        """A kwok node with ``gpus`` allocatable ``nvidia.com/gpu`` and ``labels``; waits until
        it is Ready when ``wait``."""
        resources = {"cpu": cpu, "memory": memory, "pods": "110", GPU: str(gpus)}
        self.api(
            "POST",
            "/api/v1/nodes",
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "annotations": {KWOK_NODE: "fake"},
                    "labels": {
                        "kubernetes.io/hostname": name,
                        "kubernetes.io/os": "linux",
                        "type": "kwok",
                        **(labels or {}),
                    },
                },
                "status": {"allocatable": resources, "capacity": resources},
            },
        )
        if wait:
            self._wait(f"node {name}", lambda: self.node_ready(name), 60)

    def node_ready(self, name: str) -> bool:
        node = self.api("GET", f"/api/v1/nodes/{name}")
        return any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in (node.get("status") or {}).get("conditions") or []
        )

    def cordon_node(self, name: str, cordon: bool = True) -> None:
        """Mark the node unschedulable (``kubectl cordon``), or schedulable again."""
        self.api(
            "PATCH",
            f"/api/v1/nodes/{name}",
            {"spec": {"unschedulable": cordon}},
            content_type="application/merge-patch+json",
        )

    def remove_node(self, name: str) -> None:
        """Delete the node (its pods are then deleted by the pod garbage collector)."""
        self.api("DELETE", f"/api/v1/nodes/{name}", ok=(200, 202, 404))

    def nodes(self) -> list[str]:
        """The names of the lab's kwok nodes."""
        items = self.api("GET", "/api/v1/nodes", params={"labelSelector": "type=kwok"})["items"]
        return [n["metadata"]["name"] for n in items]

    # -- pods ----------------------------------------------------------------------------------
    def finish_pods(self, namespace: str, job_name: str) -> int:
        """Have kwok complete the live pods (neither ended nor deleted) of Job ``job_name`` now:
        their ``pod-complete`` delay set to 0, which kwok takes at once (it plans a pod's next
        stage again when the pod changes). A test's Job then runs until the test has seen what
        it needed while it ran, not for a ``run_seconds`` sized for the slowest machine. A pod
        not yet running completes as soon as it runs; a pod created later is not touched. The
        number of pods marked."""
        pods = self.api(
            "GET",
            f"/api/v1/namespaces/{namespace}/pods",
            params={"labelSelector": f"job-name={job_name}"},
        )["items"]
        now = {f"pod-complete.stage.kwok.x-k8s.io/{k}": "0s" for k in ("delay", "jitter-delay")}
        live = [
            p["metadata"]["name"]
            for p in pods
            if not p["metadata"].get("deletionTimestamp")
            and p["status"].get("phase") not in ("Succeeded", "Failed")
        ]
        for name in live:
            self.api(
                "PATCH",
                f"/api/v1/namespaces/{namespace}/pods/{name}",
                {"metadata": {"annotations": now}},
                content_type="application/merge-patch+json",
            )
        return len(live)

    # -- Kueue queues --------------------------------------------------------------------------
    def make_queues(
        self,
        name: str,
        gpus: int,
        namespace: str = "default",
        *,
        admission_checks: Iterable[str] = (),
        node_labels: dict[str, str] | None = None,
    ) -> None:
        """A ResourceFlavor, a ClusterQueue with ``gpus`` of ``nvidia.com/gpu`` quota (all
        namespaces, BestEffortFIFO, the given admission checks) and a LocalQueue in
        ``namespace`` (created if missing), all named ``name``; returns when the ClusterQueue
        is active (with admission checks: once their controller marks them Active)."""
        checks = [{"name": c} for c in admission_checks]
        cq_spec: dict[str, Any] = {
            "namespaceSelector": {},
            "queueingStrategy": "BestEffortFIFO",
            "resourceGroups": [
                {
                    "coveredResources": [GPU],
                    "flavors": [{"name": name, "resources": [{"name": GPU, "nominalQuota": gpus}]}],
                }
            ],
        }
        if checks:
            cq_spec["admissionChecksStrategy"] = {"admissionChecks": checks}
        self.apply(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
            {
                "apiVersion": self.kueue_api,
                "kind": "ResourceFlavor",
                "metadata": {"name": name},
                "spec": {"nodeLabels": node_labels} if node_labels else {},
            },
            {
                "apiVersion": self.kueue_api,
                "kind": "ClusterQueue",
                "metadata": {"name": name},
                "spec": cq_spec,
            },
            {
                "apiVersion": self.kueue_api,
                "kind": "LocalQueue",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"clusterQueue": name},
            },
        )
        if not checks:
            self._wait(f"ClusterQueue {name} active", lambda: self.queue_active(name), 30)

    def queue_active(self, name: str) -> bool:
        cq = self.api("GET", f"/apis/{self.kueue_api}/clusterqueues/{name}")
        return any(
            c["type"] == "Active" and c["status"] == "True"
            for c in (cq.get("status") or {}).get("conditions") or []
        )

    def delete_queues(self, name: str, namespace: str = "default") -> None:
        """Remove what :meth:`make_queues` made (the namespace stays)."""
        base = f"/apis/{self.kueue_api}"
        for path in (
            f"{base}/namespaces/{namespace}/localqueues/{name}",
            f"{base}/clusterqueues/{name}",
            f"{base}/resourceflavors/{name}",
        ):
            self.api("DELETE", path, ok=(200, 202, 404))

    # -- internals -----------------------------------------------------------------------------
    def _write_configs(self) -> None:
        lines = []
        for name, (token, user, groups) in self._tokens.items():
            lines.append(
                f'{token},{user},{name},"{groups}"' if groups else f"{token},{user},{name}"
            )
        (self.root / "tokens.csv").write_text("\n".join(lines) + "\n")
        (self.root / "tokens.csv").chmod(0o600)
        for name, (token, user, _) in self._tokens.items():
            target = self.kubeconfig if name == "admin" else self.root / f"{name}.kubeconfig"
            _kubeconfig(target, self.server, self.ca, token, user)

    def _start_etcd(self) -> None:
        client = f"http://127.0.0.1:{self.ports['etcd']}"
        peer = f"http://127.0.0.1:{self.ports['etcd-peer']}"
        self._spawn(
            "etcd",
            _flags(
                name="lab",
                data_dir=self.root / "etcd",
                listen_client_urls=client,
                advertise_client_urls=client,
                listen_peer_urls=peer,
                initial_advertise_peer_urls=peer,
                initial_cluster=f"lab={peer}",
                unsafe_no_fsync=True,
                log_level="warn",
            ),
        )
        self._wait("etcd", lambda: self._get_ok(f"{client}/health"), 30)

    def _install_kueue_objects(self) -> None:
        """Kueue's namespace, CRDs (v1beta1 converted by its webhook, where it serves two
        versions), RBAC, webhook configurations and webhook certificate Secret, before Kueue
        starts (its certificate bootstrap injects its CA into the webhook configurations and
        CRDs)."""
        kueue = self.cache / self.kueue.name
        url = f"https://127.0.0.1:{self.ports['kueue-webhook']}"
        crds = _docs(sorted((kueue / "crd" / "bases").glob("*.yaml")))
        for crd in crds:
            converted = crd["metadata"]["name"].split(".")[0] in CONVERTED_CRDS
            if converted and len(crd["spec"]["versions"]) > 1:
                crd["spec"]["conversion"] = {
                    "strategy": "Webhook",
                    "webhook": {
                        "clientConfig": {"url": f"{url}/convert"},
                        "conversionReviewVersions": ["v1"],
                    },
                }
        rbac = _kueue_rbac(
            _docs(
                p for p in sorted((kueue / "rbac").glob("*.yaml")) if p.name != "kustomization.yaml"
            )
        )
        webhooks = _kueue_webhooks(_docs([kueue / "webhook" / "manifests.yaml"]), url)
        pem = {
            name: base64.b64encode((self.pki / f).read_bytes()).decode()
            for name, f in (
                ("ca.crt", "webhook-ca.crt"),
                ("ca.key", "webhook-ca.key"),
                ("tls.crt", "webhook.crt"),
                ("tls.key", "webhook.key"),
            )
        }
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": WEBHOOK_SECRET, "namespace": KUEUE_NS},
            "data": pem,
        }
        # Where a kubelet would mount that Secret for Kueue's webhook server.
        certs = self.root / "kueue" / "certs"
        shutil.copyfile(self.pki / "webhook.crt", certs / "tls.crt")
        shutil.copyfile(self.pki / "webhook.key", certs / "tls.key")
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": KUEUE_NS}}
        self.apply(namespace, *crds, *rbac, secret, *webhooks)
        for crd in crds:
            self._wait(f"CRD {crd['metadata']['name']}", lambda c=crd: self._established(c), 60)

    def _established(self, crd: dict[str, Any]) -> bool:
        path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}"
        return any(
            c["type"] == "Established" and c["status"] == "True"
            for c in (self.api("GET", path).get("status") or {}).get("conditions") or []
        )

    def _start_controllers(self) -> list[Callable[[], None]]:
        self._spawn(
            "kube-controller-manager",
            _flags(
                kubeconfig=self.root / "controller-manager.kubeconfig",
                bind_address="127.0.0.1",
                secure_port=self.ports["controller-manager"],
                leader_elect=False,
                use_service_account_credentials=True,
                service_account_private_key_file=self.pki / "sa.key",
                root_ca_file=self.ca,
                v=1,
            ),
        )
        self._spawn(
            "kube-scheduler",
            _flags(
                kubeconfig=self.root / "scheduler.kubeconfig",
                bind_address="127.0.0.1",
                secure_port=self.ports["scheduler"],
                leader_elect=False,
                v=1,
            ),
        )
        return [
            lambda n=name: self._wait(
                n,
                lambda: self._get_ok(
                    f"https://127.0.0.1:{self.ports[n.removeprefix('kube-')]}/healthz", False
                ),
                60,
            )
            for name in ("kube-controller-manager", "kube-scheduler")
        ]

    def _start_kwok(self) -> Callable[[], None]:
        stage = self.cache / "kwok" / "stage"
        stage_files = [
            stage / "node" / "fast" / "node-initialize.yaml",
            stage / "node" / "heartbeat-with-lease" / "node-heartbeat-with-lease.yaml",
            *sorted((stage / "pod" / "general").glob("pod-*.yaml")),
        ]
        config = self.root / "kwok.yaml"
        config.write_text(yaml.safe_dump_all(_docs(stage_files)))
        self._spawn(
            "kwok",
            _flags(
                config=config,
                kubeconfig=self.kubeconfig,
                manage_all_nodes=False,
                manage_nodes_with_annotation_selector=f"{KWOK_NODE}=fake",
                server_address=f"127.0.0.1:{self.ports['kwok']}",
                node_lease_duration_seconds=40,
                cidr="10.244.0.0/16",
                node_ip="10.1.0.1",
            ),
        )
        return lambda: self._wait(
            "kwok", lambda: self._get_ok(f"http://127.0.0.1:{self.ports['kwok']}/healthz"), 30
        )

    def _start_kueue(self) -> Callable[[], None]:
        kubeconfig = self.service_account_kubeconfig(KUEUE_NS, KUEUE_SA)
        config = self.root / "kueue.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": f"config.kueue.x-k8s.io/{self.kueue.config_api}",
                    "kind": "Configuration",
                    "namespace": KUEUE_NS,
                    "health": {"healthProbeBindAddress": f"127.0.0.1:{self.ports['kueue-health']}"},
                    "metrics": {"bindAddress": "0"},
                    "webhook": {
                        "host": "127.0.0.1",
                        "port": self.ports["kueue-webhook"],
                        "certDir": str(self.root / "kueue" / "certs"),
                    },
                    "leaderElection": {"leaderElect": False},
                    "internalCertManagement": {
                        "enable": True,
                        "webhookServiceName": WEBHOOK_SERVICE,
                        "webhookSecretName": WEBHOOK_SECRET,
                    },
                    "manageJobsWithoutQueueName": False,
                    "integrations": {"frameworks": ["batch/job"]},
                    "featureGates": {"VisibilityOnDemand": False},
                }
            )
        )
        flags = _flags(config=config, kubeconfig=kubeconfig, zap_log_level=2)
        if self.kueue.visibility_flag:
            flags += _flags(visibility_server_port=self.ports["kueue-visibility"])
        self._spawn("kueue", flags, exe=self.kueue.name)
        health = f"http://127.0.0.1:{self.ports['kueue-health']}/readyz"
        return lambda: self._wait("kueue", lambda: self._get_ok(health), 120)

    def _spawn(self, name: str, args: list[str], exe: str | None = None) -> None:
        """Start ``bin/<exe>`` (default: ``name``) as daemon ``name``, its output in
        ``<name>.log``."""
        log = open(self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 - the child keeps it
        try:
            where = self.bin / self.kube if name in KUBE_DAEMONS else self.bin
            self.procs[name] = subprocess.Popen(
                [str(where / (exe or name)), *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=self.root,
            )
        finally:
            log.close()

    def _stop_proc(self, name: str) -> None:
        proc = self.procs.pop(name, None)
        if proc is None or proc.poll() is not None:
            return
        for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                proc.wait(timeout=grace)
                return
            except subprocess.TimeoutExpired:
                continue

    def _get_ok(self, url: str, verify: bool = True) -> bool:
        headers = (
            {"Authorization": f"Bearer {self.admin_token}"} if url.startswith(self.server) else {}
        )
        try:
            resp = httpx.get(
                url,
                verify=ssl.create_default_context(cafile=self.ca) if verify else False,
                headers=headers,
                timeout=5.0,
            )
        except httpx.HTTPError:
            return False
        return resp.status_code == 200

    def _wait(self, what: str, ready, timeout: float) -> None:
        """Poll ``ready()`` until true; a daemon that exits or a timeout raises with the log."""
        name = what if what in self.procs else None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if name is not None and self.procs[name].poll() is not None:
                raise ControlPlaneError(
                    f"{name} exited ({self.procs[name].returncode}) while starting"
                    + self._tail(name)
                )
            try:
                if ready():
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise ControlPlaneError(
            f"{what} not ready after {timeout:g} s" + (self._tail(name) if name else "")
        )

    def _tail(self, name: str, lines: int = 15) -> str:
        path = self.log_dir / f"{name}.log"
        if not path.exists():
            return ""
        tail = path.read_text(errors="replace").splitlines()[-lines:]
        return f"; last lines of {path}:\n" + "\n".join(tail)


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """``python -m chronus_py.backends.kueue.lab``: a control plane with kwok GPU nodes and one
    queue, up until Ctrl-C, for trying things by hand (``KUBECONFIG`` is printed)."""
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(prog="python -m chronus_py.backends.kueue.lab")
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--queue", default="gpu", help="ResourceFlavor/ClusterQueue/LocalQueue")
    parser.add_argument("--check", action="append", default=[], help="an admission check name")
    args = parser.parse_args(argv)
    why = why_not_here()
    if why is not None:
        print(f"cannot start a control plane: {why}")
        return 1
    signal.signal(signal.SIGTERM, _interrupt)
    with tempfile.TemporaryDirectory(prefix="chronus-kube-") as tmp:
        cp = ControlPlane(Path(tmp))
        try:
            cp.start()
            for i in range(args.nodes):
                cp.add_node(f"gpu-{i + 1}", args.gpus_per_node)
            cp.make_queues(args.queue, args.nodes * args.gpus_per_node, admission_checks=args.check)
            print(f"export KUBECONFIG={cp.kubeconfig}")
            print(f"kubectl: {cp.bin / 'kubectl'}; logs: {cp.log_dir}; Ctrl-C stops everything")
            signal.pause()
        except KeyboardInterrupt:
            pass
        finally:
            cp.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
