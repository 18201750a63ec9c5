"""The HTTP API (JSON, under ``/v1``), as a Starlette app over a :class:`~.core.Service`.

Every error is a JSON object ``{"error": message, "field": name-or-null}``: 400 (body not JSON),
401 (no or unknown token), 404 (no such job, or another tenant's), 409 (duplicate id, job not
active), 413 (body too large), 422 (a field is wrong), 503 (the backend is unreachable, or an
unexpected error, which is logged with its traceback and never shown).

Every handler that reads or changes the service takes ``lock``, the lock the scheduling loop
holds for a round, and calls the service on the event loop itself: a request is a millisecond of
work, and handing it to a worker thread cost more than the work (two thread wake-ups per
request, each a scheduler latency on a loaded machine: issue 27 measured cancellations waiting
700 ms at p99 that way). The scheduler is still never used by two threads at once, since the
round, which runs in a worker thread, holds the lock. ``/healthz`` takes no lock, so it answers
at once even while a round runs, and says so.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any, Awaitable, Callable

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from chronus_py.service.backend import BackendUnavailable
from chronus_py.service.core import ApiError, Caller, Service
from chronus_py.service.openapi import OPENAPI

log = logging.getLogger("chronus.serve")
MAX_BODY = 64 * 1024
MAX_LIMIT = 10_000
STATES = ("pending", "running", "finished", "cancelled", "failed")


def _error(status: int, message: str, field: str | None = None) -> JSONResponse:
    return JSONResponse({"error": message, "field": field}, status_code=status)


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

    async def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        async with lock:
            return fn(*args, **kwargs)

    def caller_of(request: Request) -> Caller:
        if tokens is None:
            return Caller("default", admin=True)
        caller = tokens.caller(request.headers.get("authorization"))
        if caller is None:
            raise ApiError(401, "missing or unknown bearer token", "Authorization")
        return caller

    async def body_of(request: Request) -> Any:
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY):
            raise ApiError(413, f"body larger than {MAX_BODY} bytes", "body")
        raw = b""
        async for chunk in request.stream():
            raw += chunk
            if len(raw) > MAX_BODY:
                raise ApiError(413, f"body larger than {MAX_BODY} bytes", "body")
        try:
            return json.loads(raw, parse_constant=_no_constant)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ApiError(400, f"body is not valid JSON: {exc}", "body") from None

    def handler(fn: Callable[[Request, Caller], Awaitable[Response]], *, auth: bool = True):
        async def endpoint(request: Request) -> Response:
            try:
                caller = caller_of(request) if auth else Caller("anonymous")
                return await fn(request, caller)
            except ApiError as exc:
                return _error(exc.status, exc.message, exc.field)
            except BackendUnavailable as exc:
                log.warning(
                    json.dumps(
                        {"event": "backend_error", "during": request.url.path, "error": str(exc)}
                    )
                )
                return _error(503, f"the backend is unavailable: {exc}")

        return endpoint

    async def submit(request: Request, caller: Caller) -> Response:
        dry_run = _flag(request, "dry_run")
        body = await body_of(request)
        status, out = await call(service.submit, body, caller, dry_run=dry_run)
        if status == 201:
            wake()
        return JSONResponse(out, status_code=status)

    async def list_jobs(request: Request, caller: Caller) -> Response:
        query = request.query_params
        for name in query:
            if name not in ("tenant", "state", "limit", "after"):
                raise ApiError(
                    422, "unknown query parameter (have: tenant, state, limit, after)", name
                )
        state = query.get("state")
        if state is not None and state not in STATES:
            raise ApiError(422, f"unknown state (have: {', '.join(STATES)})", "state")
        limit = query.get("limit", "1000")
        if not limit.isdigit() or not 1 <= int(limit) <= MAX_LIMIT:
            raise ApiError(422, f"expected an integer in [1, {MAX_LIMIT}]", "limit")
        jobs = await call(
            service.list_jobs,
            caller,
            tenant=query.get("tenant"),
            state=state,
            limit=int(limit),
            after=query.get("after"),
        )
        return JSONResponse(
            {"jobs": jobs, "next_after": jobs[-1]["id"] if len(jobs) == int(limit) else None}
        )

    async def get_job(request: Request, caller: Caller) -> Response:
        return JSONResponse(await call(service.get_job, request.path_params["job_id"], caller))

    async def cancel(request: Request, caller: Caller) -> Response:
        out = await call(service.cancel, request.path_params["job_id"], caller)
        wake()
        return JSONResponse(out)

    async def progress(request: Request, caller: Caller) -> Response:
        job_id = request.path_params["job_id"]
        await call(service.get_job, job_id, caller)
        out = await call(service.progress, job_id, await body_of(request), caller)
        wake()
        return JSONResponse(out)

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
            mine = {j for j, t in service.tenants.items() if t == caller.tenant}
            out["decisions"] = [d for d in out["decisions"] if d["job"] in mine]
            out["lease_plan"] = {j: s for j, s in out["lease_plan"].items() if j in mine}
        return out

    async def plan(request: Request, caller: Caller) -> Response:
        return JSONResponse(await call(plan_view, caller))

    async def cluster(request: Request, caller: Caller) -> Response:
        return JSONResponse(await call(service.cluster_view))

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
        return JSONResponse(
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

    async def openapi(request: Request, caller: Caller) -> Response:
        return JSONResponse(OPENAPI)

    async def not_found(request: Request, exc: HTTPException) -> Response:
        return _error(
            exc.status_code, exc.detail if isinstance(exc.detail, str) else "not found", None
        )

    async def unexpected(request: Request, exc: Exception) -> Response:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return _error(
            503,
            "internal error (logged by the server); nothing was changed that "
            "the next round will not reconcile, retry later",
        )

    routes = [
        Route("/v1/jobs", handler(submit), methods=["POST"]),
        Route("/v1/jobs", handler(list_jobs), methods=["GET"]),
        Route("/v1/jobs/{job_id}", handler(get_job), methods=["GET"]),
        Route("/v1/jobs/{job_id}", handler(cancel), methods=["DELETE"]),
        Route("/v1/jobs/{job_id}/progress", handler(progress), methods=["POST"]),
        Route("/v1/plan", handler(plan), methods=["GET"]),
        Route("/v1/cluster", handler(cluster), methods=["GET"]),
        Route("/v1/hosts/{node}/layers", handler(host_layers), methods=["GET"]),
        Route("/healthz", handler(healthz, auth=False), methods=["GET"]),
        Route("/metrics", handler(metrics_endpoint, auth=False), methods=["GET"]),
        Route("/openapi.json", handler(openapi, auth=False), methods=["GET"]),
    ]
    return Starlette(
        routes=routes, exception_handlers={HTTPException: not_found, Exception: unexpected}
    )


def _flag(request: Request, name: str) -> bool:
    value = request.query_params.get(name, "false").lower()
    if value not in ("true", "false", "1", "0"):
        raise ApiError(422, "expected true or false", name)
    return value in ("true", "1")


def _no_constant(name: str) -> Any:
    """JSON has no NaN or Infinity; Python's parser would accept them."""
    raise ValueError(f"{name} is not a JSON number")


def _quantile(ordered: list[float], q: float) -> float | None:
    """A quantile of the last 1,000 rounds (nearest rank), or None before the first."""
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)] if ordered else None
