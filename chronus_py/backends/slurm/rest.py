"""A small client for slurmrestd: transport, retries, and the choice of the REST layer.

Everything above this module sees :class:`~chronus_py.backends.slurm.model.SlurmJob` and
:class:`~chronus_py.backends.slurm.model.SlurmNode`, never slurmrestd's JSON. Each API version has
its layer (``api_v0038.py``: v0.0.38 of Slurm 22.05-23.11; ``api_v0040.py``: v0.0.40-45 of Slurm
23.11-26.05), chosen at start-up from what the server's ``/openapi/v3`` offers (:data:`LAYERS`,
preferred first). A server that offers none of them is one error naming both sides and the
``slurmrestd`` option that fixes it on that Slurm release.

Transport: ``unix:/path/to/slurmrestd.sock`` (local auth: slurmrestd trusts the socket's peer) or
``http://host:port`` with a JWT (``X-SLURM-USER-TOKEN``) read from a file or the environment; the
token is sent, never logged or shown in an error. Slurm often reports an error as HTTP 200 with a
non-empty ``errors`` list, and from v0.0.40 on an ignored field or a refused update as a warning;
:meth:`SlurmRest.call` turns both into :class:`SlurmError`. Transport failures and 5xx answers are
retried with exponential backoff, a bounded number of times, then raise :class:`SlurmUnreachable`;
requests that are not safe to repeat (a submission) are retried only if the connection was
refused before anything was sent.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import time
from pathlib import Path
from typing import Any, Mapping, Protocol
from urllib.parse import urlsplit

from chronus_py.backends.slurm.api_v0038 import RestV0038
from chronus_py.backends.slurm.api_v0040 import RestV0040
from chronus_py.backends.slurm.model import (
    JobChange,
    NewJob,
    SlurmJob,
    SlurmNode,
    SlurmPartition,
    SlurmReservation,
)


class RestLayer(Protocol):
    """One API version: slurmrestd's JSON to and from the model (``api_v00xx.py``)."""

    version: str
    plugin: str  # the slurmrestd -s plugin that serves it

    def job(self, raw: Mapping[str, Any]) -> SlurmJob: ...
    def node(self, raw: Mapping[str, Any]) -> SlurmNode: ...
    def reservation(self, raw: Mapping[str, Any]) -> SlurmReservation: ...
    def partition(self, raw: Mapping[str, Any]) -> SlurmPartition: ...
    def submission(self, new: NewJob) -> dict: ...
    def change(self, change: JobChange) -> dict: ...
    def refusals(self, reply: Mapping[str, Any]) -> list[Mapping[str, Any]]: ...


HELD_OK = 2042
"""``Job is in held state``: v0.0.38's 'error' for a successful held submission."""

LAYERS: dict[str, RestLayer] = {
    layer.version: layer
    for layer in (
        RestV0040("v0.0.42"),
        RestV0040("v0.0.41"),
        RestV0040("v0.0.40"),
        RestV0038(),
        RestV0040("v0.0.43"),
        RestV0040("v0.0.44"),
        RestV0040("v0.0.45"),
    )
}
"""The API versions chronus speaks, preferred first: those tested on a real Slurm (v0.0.40-42 on
24.11, v0.0.38 on 22.05), then those read from Slurm's published parsers only."""


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
    """Slurm's number for an error entry (``error_number``, v0.0.38 also ``error_code``)."""
    try:
        return int(error.get("error_number") or error.get("error_code") or 0)
    except (TypeError, ValueError):
        return 0


def _key(version: str) -> tuple[int, ...]:
    """``v0.0.42`` -> (0, 0, 42), to order versions."""
    return tuple(int(x) for x in re.findall(r"\d+", version))


def release_of(meta: Any) -> str | None:
    """The Slurm release (``24.11.5``) in a reply's ``meta`` (v0.0.38 says ``Slurm``)."""
    if not isinstance(meta, Mapping):
        return None
    slurm = meta.get("slurm") or meta.get("Slurm") or {}
    release = slurm.get("release") if isinstance(slurm, Mapping) else None
    return str(release) if release else None


def mismatch(endpoint: str, offered: list[str], release: str | None) -> str:
    """The one line for a server that offers no version chronus speaks: both sides, and the
    fix for that Slurm release."""
    spoken = sorted(LAYERS, key=_key)
    newest = max(spoken, key=_key)
    where = f"slurmrestd at {endpoint}" + (f" (Slurm {release})" if release else "")
    if offered and min(_key(v) for v in offered) > _key(newest):
        fix = "this Slurm's API is newer than chronus-py knows: upgrade chronus-py"
    else:
        major_minor = tuple(int(x) for x in re.findall(r"\d+", release or "")[:2])
        if major_minor and major_minor < (23, 11):
            fix = "start slurmrestd with -s openapi/v0.0.38"
        elif major_minor:
            fix = (
                "start slurmrestd with -s openapi/slurmctld, without -d (or with -d v0.0.40 "
                "or later)"
            )
        else:
            fix = (
                "start slurmrestd with -s openapi/v0.0.38 (Slurm up to 23.11) or "
                "-s openapi/slurmctld (Slurm 23.11 and later)"
            )
    return (
        f"{where} offers {', '.join(sorted(offered, key=_key)) or 'no Slurm API'}; chronus "
        f"speaks {', '.join(spoken)}: {fix}"
    )


def parse_endpoint(endpoint: str) -> tuple[str | None, str, int]:
    """(unix socket path or None, host, port) of a slurmrestd address: ``unix:PATH`` or
    ``http://HOST[:PORT]`` (port 6820 by default). Raises ValueError saying what is wrong."""
    expected = "give unix:PATH (a local socket) or http://HOST:PORT"
    if endpoint.startswith("unix:"):
        path = endpoint[len("unix:") :]
        if not path:
            raise ValueError(f"{endpoint!r} names no socket: {expected}")
        return path, "localhost", 80
    parts = urlsplit(endpoint)
    if parts.scheme == "https":
        raise ValueError(f"{endpoint!r}: slurmrestd speaks plain http: {expected}")
    if parts.scheme != "http":
        raise ValueError(f"{endpoint!r} is not a slurmrestd address: {expected}")
    try:
        port = 6820 if parts.port is None else parts.port
    except ValueError:
        port = 0
    if not 0 < port < 65536:
        raise ValueError(f"{endpoint!r}: the port is not a number from 1 to 65535")
    if not parts.hostname:
        raise ValueError(f"{endpoint!r} names no host: {expected}")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(f"{endpoint!r}: nothing may follow the port: {expected}")
    return None, parts.hostname, port


class SlurmRest:
    """slurmrestd at ``endpoint``; ``token``/``user`` for JWT over TCP. With ``token_file``, the
    token is read from it again whenever the file changes (a site renews JWTs, which expire:
    read once, an expired token failed every request until chronus was restarted)."""

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
        token_file: str | None = None,
    ):
        self.endpoint = endpoint
        self._unix, self._host, self._port = parse_endpoint(endpoint)
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        self._user = user
        self._token_file = token_file
        self._token_seen: tuple[int, int, int] | None = None
        self.token: str | None = None
        if token:
            self._use_token(token)
        self._reread_token()
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._layer: RestLayer | None = None if version is None else LAYERS[version]
        self._pinned = version is not None

    def _use_token(self, token: str) -> None:
        self.token = token
        self._headers["X-SLURM-USER-TOKEN"] = token
        if self._user:
            self._headers["X-SLURM-USER-NAME"] = self._user

    def _reread_token(self) -> None:
        """Take the token file's token if the file changed since it was last read (an empty or
        unreadable file keeps the last token: a renewal being written)."""
        if self._token_file is None:
            return
        try:
            st = os.stat(self._token_file)
            seen = (st.st_mtime_ns, st.st_size, st.st_ino)
            if seen == self._token_seen:
                return
            token = Path(self._token_file).read_text().strip()
        except OSError:
            return
        if token:
            self._use_token(token)
            self._token_seen = seen

    def __repr__(self) -> str:  # never shows the token
        version = None if self._layer is None else self._layer.version
        return f"SlurmRest({self.endpoint!r}, version={version!r})"

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
        self._reread_token()
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
        """The JSON of a versioned call (``path`` after ``/slurm/vX/``), its errors and its
        warnings of an ignored field or a refused update checked."""
        layer = self.layer
        status, parsed = self.request(
            method, f"/slurm/{layer.version}/{path}", body, idempotent=idempotent
        )
        if not isinstance(parsed, dict):
            if status == 404 and not self._pinned:
                # slurmrestd was restarted serving other versions (a Slurm upgrade, another -s
                # or -d): the version chosen at start-up is gone, so every call failed until
                # chronus was restarted. The next call asks the server again.
                self._layer = None
                raise SlurmUnreachable(
                    f"slurmrestd at {self.endpoint}: {what}: HTTP 404: it no longer serves "
                    f"{layer.version}; chronus asks it again which versions it offers"
                )
            raise SlurmUnreachable(
                f"slurmrestd at {self.endpoint}: {what}: HTTP {status} without a JSON answer"
            )
        errors = [e for e in layer.refusals(parsed) if _number(e) not in ok_errors]
        if errors or status >= 400:
            refused = status in (401, 403, 511) or any(
                "authentication" in str(e.get("error", "")).lower() for e in errors
            )
            if refused and self.token is not None:
                # 24.11 answers an expired JWT 511 "Protocol authentication error" (22.05: 500
                # "Unspecified error", which says nothing of the token)
                renew = (
                    f"; chronus reads {self._token_file} again when it changes"
                    if self._token_file
                    else ""
                )
                raise SlurmUnreachable(
                    f"slurmrestd at {self.endpoint}: {what}: not authorized "
                    f"(HTTP {status}); check the token (expired?){renew}"
                )
            if status in (401, 403):
                raise SlurmUnreachable(
                    f"slurmrestd at {self.endpoint}: {what}: not authorized "
                    f"(HTTP {status}); check the token"
                )
            raise SlurmError(what, errors or [{"error": f"HTTP {status}"}])
        return parsed

    # -- version -----------------------------------------------------------------------------------
    def offered(self) -> list[str]:
        """The Slurm API versions the server offers (from ``/openapi/v3``)."""
        status, spec = self.request("GET", "/openapi/v3")
        paths = spec.get("paths", {}) if isinstance(spec, dict) else {}
        return sorted(
            {p.split("/")[2] for p in paths if re.match(r"/slurm/v[0-9.]+/", p)}, key=_key
        )

    @property
    def layer(self) -> RestLayer:
        """The REST layer in use: the first of :data:`LAYERS` that the server offers."""
        if self._layer is None:
            offered = self.offered()
            for version, layer in LAYERS.items():
                if version in offered:
                    self._layer = layer
                    break
            else:
                raise SlurmUnreachable(mismatch(self.endpoint, offered, self._release(offered)))
        return self._layer

    @property
    def version(self) -> str:
        return self.layer.version

    def _release(self, offered: list[str]) -> str | None:
        """The Slurm release, from a ping in the newest offered version (None if unknown)."""
        if not offered:
            return None
        try:
            status, reply = self.request("GET", f"/slurm/{offered[-1]}/ping")
        except SlurmUnreachable:
            return None
        return release_of(reply.get("meta")) if isinstance(reply, dict) else None

    def release(self) -> str | None:
        """The Slurm release behind slurmrestd, e.g. ``24.11.5`` (None if it does not say)."""
        return release_of(self.ping().get("meta"))

    # -- operations --------------------------------------------------------------------------------
    def ping(self) -> dict:
        return self.call("GET", "ping", "ping")

    def nodes(self) -> list[SlurmNode]:
        raw = self.call("GET", "list nodes", "nodes").get("nodes", [])
        return [self.layer.node(n) for n in raw]

    def reservations(self) -> list[SlurmReservation]:
        raw = self.call("GET", "list reservations", "reservations").get("reservations", [])
        return [self.layer.reservation(r) for r in raw]

    def partitions(self) -> list[SlurmPartition]:
        raw = self.call("GET", "list partitions", "partitions").get("partitions", [])
        return [self.layer.partition(p) for p in raw]

    def jobs(self) -> list[SlurmJob]:
        return [self.layer.job(j) for j in self.call("GET", "list jobs", "jobs").get("jobs", [])]

    def job(self, job_id: int) -> SlurmJob | None:
        try:
            found = self.call("GET", f"job {job_id}", f"job/{job_id}").get("jobs", [])
        except SlurmError as exc:
            if "Invalid job id" in str(exc) or exc.number == 2017:
                return None
            raise
        return self.layer.job(found[0]) if found else None

    def update(self, job_id: int, change: JobChange) -> None:
        self.call("POST", f"update job {job_id}", f"job/{job_id}", self.layer.change(change))

    def signal(self, job_id: int, sig: str) -> None:
        self.call("DELETE", f"signal job {job_id}", f"job/{job_id}?signal={sig}")

    def cancel(self, job_id: int) -> None:
        self.call("DELETE", f"cancel job {job_id}", f"job/{job_id}")

    def submit(self, new: NewJob) -> int:
        """Submit a held job; its Slurm id. Never retried once sent."""
        out = self.call(
            "POST",
            "submit job",
            "job/submit",
            self.layer.submission(new),
            idempotent=False,
            ok_errors=(HELD_OK,),
        )
        return int(out["job_id"])


class _Transport(Exception):
    def __init__(self, why: str, sent: bool):
        super().__init__(why)
        self.sent = sent
