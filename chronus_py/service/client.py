"""A small Python client of ``chronus serve`` (stdlib only)::

    from chronus_py.service.client import Client
    c = Client("http://127.0.0.1:8080", token="...")
    c.submit({"id": "j1", "gpus": 8, "estimate_seconds": 7200, "deadlines": [{"at": 9000}]})
    c.status("j1"); c.jobs(state="running"); c.cancel("j1")

Every error answer of the server becomes a :class:`ClientError` with its status, message and
the field it names; a server that cannot be reached, a ClientError with status 0.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Mapping


class ClientError(Exception):
    def __init__(self, status: int, message: str, field: str | None = None):
        super().__init__(
            f"{status}: {field + ': ' if field else ''}{message}" if status else message
        )
        self.status = status
        self.message = message
        self.field = field


class Client:
    def __init__(self, url: str, token: str | None = None, *, timeout: float = 30.0):
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def request(
        self, method: str, path: str, body: Any = None, query: Mapping[str, Any] | None = None
    ) -> Any:
        url = self.url + path
        params = {k: v for k, v in (query or {}).items() if v is not None}
        if params:
            url += "?" + urllib.parse.urlencode(params)
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read()
                kind = resp.headers.get("Content-Type", "")
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                err = json.loads(raw)
                raise ClientError(exc.code, str(err.get("error")), err.get("field")) from None
            except (ValueError, AttributeError):
                raise ClientError(exc.code, raw.decode(errors="replace")[:200]) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ClientError(0, f"cannot reach {self.url}: {reason}") from None
        return json.loads(raw) if "json" in kind else raw.decode()

    def submit(self, job: Mapping[str, Any], *, dry_run: bool = False) -> dict:
        return self.request("POST", "/v1/jobs", dict(job), {"dry_run": "true"} if dry_run else None)

    def status(self, job_id: str) -> dict:
        return self.request("GET", f"/v1/jobs/{urllib.parse.quote(job_id, safe='')}")

    def cancel(self, job_id: str) -> dict:
        return self.request("DELETE", f"/v1/jobs/{urllib.parse.quote(job_id, safe='')}")

    def progress(self, job_id: str, iterations_done: int) -> dict:
        return self.request(
            "POST",
            f"/v1/jobs/{urllib.parse.quote(job_id, safe='')}/progress",
            {"iterations_done": iterations_done},
        )

    def jobs(
        self,
        *,
        tenant: str | None = None,
        state: str | None = None,
        limit: int | None = None,
        after: str | None = None,
    ) -> dict:
        return self.request(
            "GET",
            "/v1/jobs",
            query={"tenant": tenant, "state": state, "limit": limit, "after": after},
        )

    def plan(self) -> dict:
        return self.request("GET", "/v1/plan")

    def cluster(self) -> dict:
        return self.request("GET", "/v1/cluster")

    def health(self) -> dict:
        return self.request("GET", "/healthz")

    def metrics(self) -> str:
        return self.request("GET", "/metrics")
