"""A small client for slurmrestd, and the one place that knows the REST API's versions.

Everything above this module sees :class:`SlurmJob` and :class:`SlurmNode`, never slurmrestd's
JSON: when a newer Slurm renames a field (v0.0.39+ wrap numbers in ``{"set", "number"}`` and
turn ``job_state`` into a list), only :data:`API_VERSIONS` and the ``_job``/``_node`` readers
change. Tested: ``v0.0.38`` (Slurm 22.05, Debian 12).

Transport: ``unix:/path/to/slurmrestd.sock`` (local auth: slurmrestd trusts the socket's peer) or
``http://host:port`` with a JWT (``X-SLURM-USER-TOKEN``) read from a file or the environment; the
token is sent, never logged or shown in an error. Slurm often reports an error as HTTP 200 with a
non-empty ``errors`` list; :meth:`SlurmRest.call` turns those into :class:`SlurmError`. Transport
failures and 5xx answers are retried with exponential backoff, a bounded number of times, then
raise :class:`SlurmUnreachable`; requests that are not safe to repeat (a submission) are retried
only if the connection was refused before anything was sent.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import time
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import urlsplit

API_VERSIONS = ("v0.0.38",)
"""Versions this client speaks, preferred first. A version is added here with its readers."""

HELD_OK = 2042
"""``Job is in held state``: Slurm's 'error' for a successful held submission."""


class SlurmUnreachable(RuntimeError):
    """slurmrestd (or slurmctld behind it) did not answer after the retries."""


class SlurmError(RuntimeError):
    """Slurm answered and refused: ``number`` is Slurm's error number (0 if none given)."""

    def __init__(self, what: str, errors: list[Mapping[str, Any]]):
        first = errors[0] if errors else {}
        self.number = _number(first)
        text = "; ".join(str(e.get("error") or e.get("description") or e) for e in errors)
        super().__init__(f"{what}: {text or 'failed'}")


def _number(error: Mapping[str, Any]) -> int:
    """Slurm's number for an error entry (v0.0.38 says ``error_number`` or ``error_code``)."""
    return int(error.get("error_number") or error.get("error_code") or 0)


@dataclass(frozen=True, slots=True)
class SlurmNode:
    name: str
    gpus: int
    state: str  # e.g. "idle", "mixed", "allocated", "down"
    flags: tuple[str, ...]  # e.g. ("DRAIN",), ("NOT_RESPONDING",)
    reason: str
    partitions: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SlurmJob:
    """One Slurm job as the backend needs it. Times are Unix seconds (0: not set)."""

    id: int
    name: str
    state: str  # PENDING, RUNNING, COMPLETED, CANCELLED, FAILED, ...
    reason: str  # e.g. JobHeldUser, JobHeldAdmin, None
    comment: str
    user: str
    account: str
    partition: str
    submit_time: float
    start_time: float
    end_time: float
    restart_cnt: int
    node_count: int
    gpus_per_node: int
    nodes: tuple[str, ...]  # where it runs or ran
    placement: Mapping[str, tuple[int, ...]]  # node -> GPU indices, from gres_detail

    @property
    def held(self) -> bool:
        return self.state == "PENDING" and self.reason in ("JobHeldUser", "JobHeldAdmin")


def expand_hostlist(text: str) -> list[str]:
    """``n[1-3,5],gpu7`` -> ``['n1', 'n2', 'n3', 'n5', 'gpu7']`` (Slurm's compact node lists)."""
    out: list[str] = []
    for m in re.finditer(r"([^,\[]+)(?:\[([^\]]*)\])?", text):
        prefix, ranges = m.group(1), m.group(2)
        if ranges is None:
            out.append(prefix)
            continue
        for part in ranges.split(","):
            lo, _, hi = part.partition("-")
            for i in range(int(lo), int(hi or lo) + 1):
                out.append(f"{prefix}{i:0{len(lo)}d}")
    return out


def _indices(text: str) -> tuple[int, ...]:
    """``0-1,3`` -> (0, 1, 3)."""
    out: list[int] = []
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return tuple(out)


def _gpu_count(gres: str) -> int:
    """GPUs in a GRES string: ``gpu:8``, ``gpu:a100:4(S:0-1)``, ``gpu:a:2,gpu:b:2``."""
    total = 0
    for item in gres.split(","):
        parts = item.split("(")[0].split(":")
        if "gpu" in parts and parts[-1].isdigit():
            total += int(parts[-1])
    return total


def _placement(nodes: str, gres_detail: list[str]) -> dict[str, tuple[int, ...]]:
    """Node -> GPU indices of a running job: ``gres_detail`` has one entry per node of ``nodes``,
    e.g. ``gpu:2(IDX:0-1)`` or, with typed GRES, ``gpu:a:1(IDX:0),gpu:b:1(IDX:3)``."""
    out: dict[str, tuple[int, ...]] = {}
    for node, detail in zip(expand_hostlist(nodes) if nodes else [], gres_detail):
        idx: list[int] = []
        for m in re.finditer(r"gpu[^(,]*\(IDX:([0-9,\-]*)\)", detail):
            idx.extend(_indices(m.group(1)))
        out[node] = tuple(sorted(idx))
    return out


def _job_v38(j: Mapping[str, Any]) -> SlurmJob:
    tres = str(j.get("tres_per_node") or "")
    return SlurmJob(
        id=int(j["job_id"]),
        name=str(j.get("name") or ""),
        state=str(j.get("job_state") or ""),
        reason=str(j.get("state_reason") or ""),
        comment=str(j.get("comment") or ""),
        user=str(j.get("user_name") or ""),
        account=str(j.get("account") or ""),
        partition=str(j.get("partition") or ""),
        submit_time=float(j.get("submit_time") or 0),
        start_time=float(j.get("start_time") or 0),
        end_time=float(j.get("end_time") or 0),
        restart_cnt=int(j.get("restart_cnt") or 0),
        node_count=int(j.get("node_count") or 1),
        gpus_per_node=_gpu_count(tres.replace("gres:", "")),
        nodes=tuple(expand_hostlist(str(j.get("nodes") or ""))),
        placement=_placement(str(j.get("nodes") or ""), list(j.get("gres_detail") or [])),
    )


def _node_v38(n: Mapping[str, Any]) -> SlurmNode:
    return SlurmNode(
        name=str(n["name"]),
        gpus=_gpu_count(str(n.get("gres") or "")),
        state=str(n.get("state") or "").lower(),
        flags=tuple(str(f).upper() for f in n.get("state_flags") or ()),
        reason=str(n.get("reason") or ""),
        partitions=tuple(n.get("partitions") or ()),
    )


class SlurmRest:
    """slurmrestd at ``endpoint``; ``token``/``user`` for JWT over TCP."""

    def __init__(
        self,
        endpoint: str,
        *,
        token: str | None = None,
        user: str | None = None,
        timeout: float = 10.0,
        retries: int = 4,
        backoff: float = 0.25,
        max_backoff: float = 2.0,
        version: str | None = None,
    ):
        self.endpoint = endpoint
        if endpoint.startswith("unix:"):
            self._unix: str | None = endpoint[len("unix:") :]
            self._host, self._port = "localhost", 80
        else:
            parts = urlsplit(endpoint if "://" in endpoint else f"http://{endpoint}")
            if parts.scheme != "http" or not parts.hostname:
                raise ValueError(f"expected unix:PATH or http://HOST:PORT, got {endpoint!r}")
            self._unix = None
            self._host, self._port = parts.hostname, parts.port or 6820
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if token:
            self._headers["X-SLURM-USER-TOKEN"] = token
            if user:
                self._headers["X-SLURM-USER-NAME"] = user
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._version = version

    def __repr__(self) -> str:  # never shows the token
        return f"SlurmRest({self.endpoint!r}, version={self._version!r})"

    # -- transport ---------------------------------------------------------------------------------
    def _connection(self) -> http.client.HTTPConnection:
        conn = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout)
        if self._unix is not None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(self.timeout)
            try:
                sock.connect(self._unix)
            except OSError:
                sock.close()
                raise
            conn.sock = sock
        return conn

    def _once(self, method: str, path: str, body: Any) -> tuple[int, Any, bool]:
        """One request: (status, parsed JSON or None, whether anything reached the server)."""
        sent = False
        conn = None
        try:
            conn = self._connection()
            if self._unix is None:
                conn.connect()
            data = None if body is None else json.dumps(body).encode()
            sent = True
            conn.request(method, path, body=data, headers=self._headers)
            resp = conn.getresponse()
            raw = resp.read()
            try:
                parsed = json.loads(raw) if raw else None
            except ValueError:
                parsed = None
            return resp.status, parsed, True
        except (OSError, http.client.HTTPException) as exc:
            raise _Transport(str(exc) or type(exc).__name__, sent) from None
        finally:
            if conn is not None:
                conn.close()

    def request(
        self, method: str, path: str, body: Any = None, *, idempotent: bool = True
    ) -> tuple[int, Any]:
        """(status, JSON) of ``method path``, retrying transport failures and 5xx answers without
        a JSON body; raises :class:`SlurmUnreachable` when the retries are spent."""
        delay = self.backoff
        last = ""
        for attempt in range(self.retries + 1):
            try:
                status, parsed = self._once(method, path, body)[:2]
                if status < 500 or isinstance(parsed, dict):
                    return status, parsed
                last = f"HTTP {status}"
                if not idempotent:
                    break
            except _Transport as exc:
                last = exc.args[0]
                if exc.sent and not idempotent:
                    break
            if attempt < self.retries:
                time.sleep(delay)
                delay = min(delay * 2, self.max_backoff)
        raise SlurmUnreachable(f"slurmrestd at {self.endpoint}: {method} {path}: {last}")

    def call(
        self,
        method: str,
        what: str,
        path: str,
        body: Any = None,
        *,
        idempotent: bool = True,
        ok_errors: tuple[int, ...] = (),
    ) -> dict:
        """The JSON of a versioned call (``path`` after ``/slurm/vX/``), its ``errors`` checked."""
        status, parsed = self.request(
            method, f"/slurm/{self.version}/{path}", body, idempotent=idempotent
        )
        if not isinstance(parsed, dict):
            raise SlurmUnreachable(
                f"slurmrestd at {self.endpoint}: {what}: HTTP {status} without a JSON answer"
            )
        errors = [e for e in parsed.get("errors") or [] if _number(e) not in ok_errors]
        if errors or status >= 400:
            if status in (401, 403):
                raise SlurmUnreachable(
                    f"slurmrestd at {self.endpoint}: {what}: not authorized "
                    f"(HTTP {status}); check the token"
                )
            raise SlurmError(what, errors or [{"error": f"HTTP {status}"}])
        return parsed

    # -- version -----------------------------------------------------------------------------------
    @property
    def version(self) -> str:
        """The API version to use: the first of :data:`API_VERSIONS` that ``/openapi`` lists."""
        if self._version is None:
            status, spec = self.request("GET", "/openapi")
            paths = spec.get("paths", {}) if isinstance(spec, dict) else {}
            offered = {p.split("/")[2] for p in paths if p.startswith("/slurm/v")}
            for v in API_VERSIONS:
                if v in offered:
                    self._version = v
                    break
            else:
                raise SlurmUnreachable(
                    f"slurmrestd at {self.endpoint} offers {sorted(offered) or 'no'} API "
                    f"(HTTP {status}); chronus speaks {', '.join(API_VERSIONS)} (start slurmrestd "
                    "with -s openapi/v0.0.38)"
                )
        return self._version

    # -- operations --------------------------------------------------------------------------------
    def ping(self) -> dict:
        return self.call("GET", "ping", "ping")

    def nodes(self) -> list[SlurmNode]:
        return [_node_v38(n) for n in self.call("GET", "list nodes", "nodes").get("nodes", [])]

    def jobs(self) -> list[SlurmJob]:
        return [_job_v38(j) for j in self.call("GET", "list jobs", "jobs").get("jobs", [])]

    def job(self, job_id: int) -> SlurmJob | None:
        try:
            found = self.call("GET", f"job {job_id}", f"job/{job_id}").get("jobs", [])
        except SlurmError as exc:
            if "Invalid job id" in str(exc) or exc.number == 2017:
                return None
            raise
        return _job_v38(found[0]) if found else None

    def update(self, job_id: int, fields: Mapping[str, Any]) -> None:
        self.call("POST", f"update job {job_id}", f"job/{job_id}", dict(fields))

    def signal(self, job_id: int, sig: str) -> None:
        self.call("DELETE", f"signal job {job_id}", f"job/{job_id}?signal={sig}")

    def cancel(self, job_id: int) -> None:
        self.call("DELETE", f"cancel job {job_id}", f"job/{job_id}")

    def submit(self, script: str, job: Mapping[str, Any]) -> int:
        """Submit a job (held if ``job['hold']``); its Slurm id. Never retried once sent."""
        out = self.call(
            "POST",
            "submit job",
            "job/submit",
            {"script": script, "job": dict(job)},
            idempotent=False,
            ok_errors=(HELD_OK,),
        )
        return int(out["job_id"])


class _Transport(Exception):
    def __init__(self, why: str, sent: bool):
        super().__init__(why)
        self.sent = sent
