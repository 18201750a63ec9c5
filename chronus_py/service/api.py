"""The HTTP API (JSON, under ``/v1``), as a Starlette app over a :class:`~.core.Service`.

Every error is a JSON object ``{"error": message, "field": name-or-null}``: 400 (body not JSON,
or not HTTP), 401 (no or unknown token), 404 (no such job, or another tenant's), 405 (with an
``Allow`` header), 408 (the request did not arrive in time, ``connections.py``), 409 (an id you
used already, job not active), 413 (body too large), 415 (a body that is not
``application/json``), 422 (a field is wrong, a number is NaN, Infinity or beyond a float, the
body nests too deeply, or the job can never run here), 414 (a URL over 64 KB) and 431 (a
request line and headers over 64 KB, both ``connections.py``), 503 (the backend is unreachable,
too many connections, the database cannot be written, or an unexpected error, which is logged
once with its traceback and never shown), 507 (the service's disk is full: nothing of the
request was kept; a line in the log).

One rule for refusals: a request that breaks the published schema (``openapi.py``, which
includes the cluster's size and the elastic models) is a 4xx naming the field at fault; a
well-formed job the service cannot run (its last deadline not after now, no measured size in
its elastic range) is a 200 with ``submitted: false`` and admission ``rejected`` saying why.
A dry run gets the answer a submission would, as a 200 with ``submitted: false``.

Every handler that reads or changes the service takes ``lock``, the lock the scheduling loop
holds for a round, and calls the service in a worker thread: the scheduler is never used by two
threads at once, and the event loop stays free meanwhile. Calls that queue up meanwhile go
together, a batch per hand-off and one database commit per batch (``batches.py``,
``Service.batch``): a request is answered after its batch's commit. (Running requests on the
event loop itself saves 15-20% CPU per request, but on a loaded machine it made them wait
several times longer, p50 35-97 against 6-9 ms: benchmarks/RESULTS.md, issue 27.) ``/healthz``
takes no lock, so it answers at once even while a round runs, and says so.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from typing import Any, Awaitable, Callable

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from chronus_py.backends.base import BackendUnavailable
from chronus_py.service.batches import Batches
from chronus_py.service.connections import READ_AT
from chronus_py.service.core import ApiError, Caller, Service
from chronus_py.service.db import NOT_KEPT, storage_error
from chronus_py.service.jobspec import TENANT, TENANT_RULE
from chronus_py.service.json_codec import encode
from chronus_py.service.openapi import MAX_LIMIT, STATES, for_server

log = logging.getLogger("chronus.serve")
MAX_BODY = 64 * 1024
MAX_DEPTH = 32
"""JSON nesting a body may have: a job's fields are at most three levels deep."""


class JsonResponse(JSONResponse):
    """Starlette's JSON answer, encoded by ``json_codec`` (orjson where it can)."""

    def render(self, content: Any) -> bytes:
        return encode(content)


def _error(
    status: int, message: str, field: str | None = None, headers: dict | None = None
) -> JsonResponse:
    return JsonResponse({"error": message, "field": field}, status_code=status, headers=headers)


def _failure(exc: Exception, method: str, path: str) -> tuple[dict, int]:
    """The answer to what a handler raised, (content, status): a refusal as it says, else a
    503, with the backend's error or the traceback logged here once."""
    if isinstance(exc, ApiError):
        return {"error": exc.message, "field": exc.field}, exc.status
    if isinstance(exc, BackendUnavailable):
        log.warning(json.dumps({"event": "backend_error", "during": path, "error": str(exc)}))
        return {"error": f"the backend is unavailable: {exc}", "field": None}, 503
    storage = storage_error(exc)
    if storage is not None:  # e.g. a full disk: in a line, no traceback
        status, what = storage
        log.warning(json.dumps({"event": "storage_error", "during": path, "error": str(exc)}))
        message = f"{what}: {NOT_KEPT}"
        return {"error": message, "field": None}, status
    log.error("unexpected error on %s %s", method, path, exc_info=exc)
    message = (
        "internal error (logged by the server); nothing was changed that "
        "the next round will not reconcile, retry later"
    )
    return {"error": message, "field": None}, 503


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> str | None:
    """A header's first value in an ASGI scope's list (names lowercased), as Starlette's
    ``Headers.get`` reads it."""
    for key, value in headers:
        if key == name:
            return value.decode("latin-1")
    return None


def _expect_json(content_type: str | None) -> None:
    """A body must say it is JSON (415 naming ``Content-Type`` if not)."""
    kind = (content_type or "").partition(";")[0].strip().lower()
    if kind != "application/json":
        given = kind or "none"
        raise ApiError(415, f"expected application/json, got {given}", "Content-Type")


def build_app(
    service: Service,
    *,
    tokens=None,
    metrics=None,
    layers=None,
    wake: Callable[[], None] = lambda: None,
    lock: asyncio.Lock | None = None,
) -> Starlette:
    """``tokens`` None: no auth (loopback only), every caller is an admin. ``wake`` tells the
    loop a round is due (a submission or cancellation). ``lock`` is the scheduling loop's."""
    lock = asyncio.Lock() if lock is None else lock
    call = Batches(lock, group=service.batch).call

    def caller_of(authorization: str | None) -> Caller:
        if tokens is None:
            return Caller("default", admin=True)
        caller = tokens.caller(authorization)
        if caller is None:
            raise ApiError(401, "missing or unknown bearer token", "Authorization")
        return caller

    async def body_of(request: Request) -> Any:
        _expect_json(request.headers.get("content-type"))
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY):
            raise ApiError(413, f"body larger than {MAX_BODY} bytes", "body")
        raw = b""
        try:
            async for chunk in request.stream():
                raw += chunk
                if len(raw) > MAX_BODY:
                    raise ApiError(413, f"body larger than {MAX_BODY} bytes", "body")
        except ClientDisconnect:
            raise ApiError(400, "the client went away before its body arrived", "body") from None
        return parse_json(raw)

    def timed(name: str) -> Callable[[float], None]:
        """What ``name``'s handler reports its time to (``chronus_request_seconds``): from
        when the connection read the request's head (``connections.READ_AT``; with
        ``--http-workers``, from the handler's start) to its answer.

        Why: the latency a client measures includes its own process and the machine it
        shares; this is the service's part, the wait for the event loop, the request's batch
        and the lock included (issue 27, session 20: under churn, a load client on the same
        two cores saw a p99 8-72 ms above the server's own)."""
        if metrics is None:
            return lambda seconds: None
        return metrics.request_seconds.labels(name).observe

    def handler(fn: Callable[[Request, Caller], Awaitable[Response]], *, auth: bool = True):
        observe = timed(fn.__name__)

        async def endpoint(request: Request) -> Response:
            began = request.scope.get(READ_AT) or time.perf_counter()
            try:
                authorization = request.headers.get("authorization")
                caller = caller_of(authorization) if auth else Caller("anonymous")
                return await fn(request, caller)
            except Exception as exc:  # noqa: BLE001 - answered here (``_failure``)
                return JsonResponse(*_failure(exc, request.method, request.url.path))
            finally:
                observe(time.perf_counter() - began)

        return endpoint

    async def submitted(caller: Caller, body: Any, dry_run: bool) -> tuple[dict, int]:
        status, out = await call(service.submit, body, caller, dry_run=dry_run)
        if status == 201:
            wake()
        return out, status

    async def submit(request: Request, caller: Caller) -> Response:
        dry_run = _flag(request, "dry_run")
        return JsonResponse(*await submitted(caller, await body_of(request), dry_run))

    async def list_jobs(request: Request, caller: Caller) -> Response:
        query = query_params(request, ("tenant", "state", "limit", "after"))
        tenant = query.get("tenant")
        if tenant is not None and not TENANT.fullmatch(tenant):
            raise ApiError(422, TENANT_RULE, "tenant")
        state = query.get("state")
        if state is not None and state not in STATES:
            raise ApiError(422, f"unknown state (have: {', '.join(STATES)})", "state")
        limit = query.get("limit", "1000")
        # ASCII digits only: ``isdigit`` also takes "²" and "①", which ``int`` refuses
        if not (limit.isascii() and limit.isdigit()) or not 1 <= int(limit) <= MAX_LIMIT:
            raise ApiError(422, f"expected an integer in [1, {MAX_LIMIT}]", "limit")
        jobs = await call(
            service.list_jobs,
            caller,
            tenant=tenant,
            state=state,
            limit=int(limit),
            after=query.get("after"),
        )
        return JsonResponse(
            {"jobs": jobs, "next_after": jobs[-1]["id"] if len(jobs) == int(limit) else None}
        )

    async def get_job(request: Request, caller: Caller) -> Response:
        return JsonResponse(await call(service.live_job, request.path_params["job_id"], caller))

    async def cancelled(caller: Caller, job_id: str) -> dict:
        out = await call(service.cancel, job_id, caller)
        wake()
        return out

    async def cancel(request: Request, caller: Caller) -> Response:
        return JsonResponse(await cancelled(caller, request.path_params["job_id"]))

    # The same three requests as answered straight from the connection (``_Api.direct``):
    # the same checks in the same order, the same calls, the same content, every error
    # answered as ``handler`` answers it.
    def answered(fn: Callable[[Caller, dict, bytes], Awaitable[tuple[Any, int]]]) -> Direct:
        observe = timed(fn.__name__.removesuffix("_direct"))

        async def direct(scope: dict, raw: bytes) -> tuple[bytes, int]:
            began = scope.get(READ_AT) or time.perf_counter()
            try:
                authorization = _header(scope["headers"], b"authorization")
                content, status = await fn(caller_of(authorization), scope, raw)
                return encode(content), status
            except Exception as exc:  # noqa: BLE001 - answered here (``_failure``)
                content, status = _failure(exc, scope["method"], scope["path"])
                return encode(content), status
            finally:
                observe(time.perf_counter() - began)

        return direct

    async def submit_direct(caller: Caller, scope: dict, raw: bytes) -> tuple[Any, int]:
        _expect_json(_header(scope["headers"], b"content-type"))
        return await submitted(caller, parse_json(raw), False)

    async def get_job_direct(caller: Caller, scope: dict, raw: bytes) -> tuple[Any, int]:
        return await call(service.live_job, scope["path"][9:], caller), 200

    async def cancel_direct(caller: Caller, scope: dict, raw: bytes) -> tuple[Any, int]:
        return await cancelled(caller, scope["path"][9:]), 200

    async def progress(request: Request, caller: Caller) -> Response:
        job_id = request.path_params["job_id"]
        await call(service.live_job, job_id, caller)
        out = await call(service.progress, job_id, await body_of(request), caller)
        wake()
        return JsonResponse(out)

    def plan_view(caller: Caller) -> dict:
        current = service.plan
        if current is None:
            return {
                "now": service.backend.now(),
                "decisions": [],
                "lease_plan": {},
                "lease_end": None,
                "next_decision": None,
                "solver": None,
            }
        out = current.to_dict()
        if not caller.admin:
            # each entry's tenant looked up, not a set of all the caller's jobs built first
            # (every job the service knows, whatever the plan holds)
            tenants, tenant = service.tenants, caller.tenant
            out["decisions"] = [
                {**d, "job": service.shown(d["job"], caller)}
                for d in out["decisions"]
                if tenants.get(d["job"]) == tenant
            ]
            out["lease_plan"] = {
                service.shown(j, caller): s
                for j, s in out["lease_plan"].items()
                if tenants.get(j) == tenant
            }
        return out

    async def plan(request: Request, caller: Caller) -> Response:
        return JsonResponse(await call(plan_view, caller))

    async def cluster(request: Request, caller: Caller) -> Response:
        return JsonResponse(await call(service.cluster_view))

    async def host_layers(request: Request, caller: Caller) -> Response:
        node = request.path_params["node"]
        config = None if layers is None else await call(layers.current, node)
        if config is None:
            raise ApiError(
                404,
                f"no layer config for node {node!r} (no --layers-dir, no host "
                "model for it, or no opted-in job runs there)",
                "node",
            )
        return Response(config, media_type="application/json")

    async def healthz(request: Request, caller: Caller) -> Response:
        counters = service.counters
        latest = sorted(counters.round_seconds)
        began = counters.round_began
        return JsonResponse(
            {
                "status": "ok",
                "backend": service.backend.name,
                "now": service.backend.now(),
                "rounds": counters.rounds,
                "round_seconds_p50": _quantile(latest, 0.5),
                "round_seconds_p99": _quantile(latest, 0.99),
                "round_running_seconds": None if began is None else time.monotonic() - began,
            }
        )

    async def metrics_endpoint(request: Request, caller: Caller) -> Response:
        return Response(await call(metrics.render), media_type="text/plain; version=0.0.4")

    document: list[dict] = []

    async def openapi(request: Request, caller: Caller) -> Response:
        if not document:
            models: dict[str, list[int]] = {}
            for model, batch in sorted(service.throughputs().rates):
                models.setdefault(model, []).append(batch)
            document.append(for_server(service.cluster.gpus, models))
        return JsonResponse(document[0])

    async def not_found(request: Request, exc: HTTPException) -> Response:
        """404 and 405 (with its ``Allow`` header) from routing, as JSON errors."""
        return _error(
            exc.status_code,
            exc.detail if isinstance(exc.detail, str) else "not found",
            None,
            headers=exc.headers,
        )

    jobs = {"POST": handler(submit), "GET": handler(list_jobs)}
    job = {"GET": handler(get_job), "DELETE": handler(cancel)}
    routes = [
        _route("/v1/jobs", jobs),
        _route("/v1/jobs/{job_id}", job),
        Route("/v1/jobs/{job_id}/progress", handler(progress), methods=["POST"]),
        Route("/v1/plan", handler(plan), methods=["GET"]),
        Route("/v1/cluster", handler(cluster), methods=["GET"]),
        Route("/v1/hosts/{node}/layers", handler(host_layers), methods=["GET"]),
        Route("/healthz", handler(healthz, auth=False), methods=["GET"]),
        Route("/metrics", handler(metrics_endpoint, auth=False), methods=["GET"]),
        Route("/openapi.json", handler(openapi, auth=False), methods=["GET"]),
    ]
    direct = {
        "POST": answered(submit_direct),
        "GET": answered(get_job_direct),
        "DELETE": answered(cancel_direct),
    }
    return _Api(jobs, job, direct, routes=routes, exception_handlers={HTTPException: not_found})


Endpoint = Callable[[Request], Awaitable[Response]]
Direct = Callable[[dict, bytes], Awaitable[tuple[bytes, int]]]
"""A request answered from the connection (``_Api.direct``): given its ASGI scope and whole
body, its JSON answer's body and status (every error answered, as ``handler`` answers it)."""


class _Api(Starlette):
    """The API's app: Starlette, but the requests a client sends by the hundred a second (a
    submission, a job's read or cancellation, a listing) go straight to their handlers,
    without Starlette's error and exception middleware, router and per-route wrappers: those
    layers were 4% of the server's GIL time under churn (py-spy, issue 27, session 14). The
    handlers answer every error themselves (``handler``); any other method or path, and HEAD,
    takes the full stack, so 404s, 405s and their ``Allow`` headers are Starlette's."""

    def __init__(
        self,
        jobs: dict[str, Endpoint],
        job: dict[str, Endpoint],
        direct: dict[str, Direct],
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self._jobs = jobs  # by method: /v1/jobs
        self._job = job  # by method: /v1/jobs/{job_id}
        self._direct = direct  # by method: POST /v1/jobs, GET and DELETE /v1/jobs/{job_id}

    def direct(self, scope: dict) -> Direct | None:
        """The handler that answers this request without the ASGI app (``connections.py``):
        a submission, a job's read or its cancellation, without a query string, whose body is
        framed plainly (a submission's ``Content-Length`` within ``MAX_BODY``, none for the
        others); any other request (None) goes through the app. Why: Starlette's request and
        response objects and uvicorn's ASGI messages (``receive``, two ``send``s that check
        every header) cost the event loop ~15 us a request (in-process), for answers whose
        head is always the same; under churn the loop's share of the server's GIL samples fell
        from 26% to 20% without them (py-spy, issue 27 session 18)."""
        if scope["query_string"] or scope["root_path"]:
            return None
        path, method, headers = scope["path"], scope["method"], scope["headers"]
        if _header(headers, b"transfer-encoding") is not None:
            return None
        length = _header(headers, b"content-length")
        if path == "/v1/jobs":
            if method != "POST" or length is None or not length.isdigit():
                return None
            return self._direct["POST"] if int(length) <= MAX_BODY else None
        if not path.startswith("/v1/jobs/") or "/" in path[9:] or len(path) == 9:
            return None
        if method not in ("GET", "DELETE") or length not in (None, "0"):
            return None
        return self._direct[method]

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            path = scope["path"]
            endpoint = None
            if path == "/v1/jobs":
                endpoint = self._jobs.get(scope["method"])
            elif path.startswith("/v1/jobs/") and "/" not in path[9:] and len(path) > 9:
                endpoint = self._job.get(scope["method"])
                if endpoint is not None:
                    scope["path_params"] = {"job_id": path[9:]}
            if endpoint is not None:
                scope["app"] = self
                response = await endpoint(Request(scope, receive, send))
                await response(scope, receive, send)
                return
        await super().__call__(scope, receive, send)


def _route(path: str, by_method: dict[str, Endpoint]) -> Route:
    """One route for a path with several methods, so that a 405 lists all of them in its
    ``Allow`` header (two routes for one path would each name only their own)."""

    async def endpoint(request: Request) -> Response:
        return await by_method["GET" if request.method == "HEAD" else request.method](request)

    return Route(path, endpoint, methods=list(by_method))


def _flag(request: Request, name: str) -> bool:
    if not request.scope["query_string"]:
        # the common case, a submission without a query: Starlette parses even an empty one,
        # ~20 us a request (3% of the server's GIL time under churn, issue 27, session 14)
        return False
    value = query_params(request, (name,)).get(name, "false")
    if value not in ("true", "false"):
        raise ApiError(422, "expected true or false", name)
    return value == "true"


def query_params(request: Request, names: tuple[str, ...]) -> dict[str, str]:
    """A request's query parameters, each one of ``names`` and given once (else a 422 naming
    it); the web view's pages take theirs by it too. Why: Starlette keeps the last of a
    repeated one and ignores unknown ones, so ``?state=running&state=pending`` listed only
    pending jobs, and a misspelt ``POST /v1/jobs?dryrun=true`` submitted the job it meant to
    try."""
    out: dict[str, str] = {}
    for name, value in request.query_params.multi_items():
        if name not in names:
            raise ApiError(422, f"unknown query parameter (have: {', '.join(names)})", name)
        if name in out:
            raise ApiError(422, "given more than once", name)
        out[name] = value
    return out


class _NotANumber:
    """What Python's parser makes of NaN, Infinity or -Infinity (JSON has none of them): kept as
    a marker so the error can name the field it stands in."""

    def __init__(self, name: str):
        self.name = name


_DECODE = json.JSONDecoder(parse_constant=_NotANumber).decode
"""``json.loads(..., parse_constant=_NotANumber)`` without building a decoder per body: with
any keyword, ``json.loads`` makes a new one (and its scanner) for every call, 2-3 times the
parse of a submission's body (5.5 against 17.7 us in-process, issue 27 session 15)."""


def parse_json(raw: bytes) -> Any:
    """A request body as JSON, or an ApiError naming the field at fault. It is read as
    ``json.loads`` reads bytes (UTF-8, -16 or -32)."""
    try:
        text = raw.decode(json.detect_encoding(raw), "surrogatepass")
        value = _DECODE(text)
    except RecursionError:  # deeper than the decoder goes (Python 3.11: ~1,000 levels)
        raise ApiError(422, f"nests deeper than {MAX_DEPTH} levels", _too_deep(text)) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"body is not valid JSON: {exc}", "body") from None
    if text.count("[") + text.count("{") >= MAX_DEPTH or "NaN" in text or "Infinity" in text:
        # else neither can be in it: no NaN nor Infinity, and fewer containers than the depth
        # refused (the walk, which names every field it passes, took ~8 us a submission)
        _check_tree(value)
    return value


_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"?\s*:?|[\[\]{}]')
"""A body's strings (a key with its colon) and brackets: all that nesting depends on. A
string left open runs to the end of the text, so the scan stays linear on any body."""


def _too_deep(text: str) -> str:
    """The top-level field under which ``text`` first opens a container ``MAX_DEPTH`` levels
    below the top (``body`` if the top is a list), scanned from the text: for a body the
    decoder gave up on, so that the field is named as ``_check_tree`` names it where the
    decoder goes deeper (Python 3.13's does; 3.11's stops at ~1,000 levels)."""
    depth, key = 0, "body"
    for token in _TOKENS.finditer(text):
        mark = token.group()
        if mark[0] == '"':
            if depth == 1 and mark[-1] == ":":
                key = mark[1 : mark.rindex('"')]
        elif mark in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return key
        else:
            depth -= 1
    return "body"


def _check_tree(value: Any) -> None:
    """No NaN or Infinity, and no nesting deeper than ``MAX_DEPTH`` anywhere in ``value``;
    fields are named as ``jobspec`` names them (``deadlines[0].at``)."""
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, _NotANumber):
            raise ApiError(422, f"{item.name} is not a JSON number", path or "body")
        if not isinstance(item, (dict, list)):
            continue
        if depth >= MAX_DEPTH:
            top = path.partition(".")[0].partition("[")[0]
            raise ApiError(422, f"nests deeper than {MAX_DEPTH} levels", top or "body")
        if isinstance(item, dict):
            stack.extend((v, f"{path}.{k}" if path else str(k), depth + 1) for k, v in item.items())
        else:
            stack.extend((v, f"{path}[{i}]", depth + 1) for i, v in enumerate(item))


def _quantile(ordered: list[float], q: float) -> float | None:
    """A quantile of the last 1,000 rounds (nearest rank), or None before the first."""
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)] if ordered else None
