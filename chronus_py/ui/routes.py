"""The web view's routes under ``/ui``, for ``chronus serve`` on any backend.

Pages are server-rendered (Jinja2, inline SVG) and follow the scheduler by polling their live
part (htmx, every ``POLL`` seconds) with ETags. A poll of an unchanged part is a 304 decided
before any read or drawing: a page is drawn again only when the service's version
(``Reader.version``: a write, a re-plan, a node's health), its clock step or the caller's choice
changed since it was last drawn for that caller. Every read takes the service's lock for as long
as it copies what it shows (a :class:`~chronus_py.ui.snapshot.Snapshot`); rendering happens
after, outside the lock.

A refusal, an unknown address or a method a page does not take is a page in the view's look
with the line and a way back; a script asking for JSON alone gets the API's JSON error.

Read-only, except ``POST /ui/jobs/{id}/cancel``, which calls the same ``Service.cancel`` as
``DELETE /v1/jobs/{id}`` (so a tenant cancels only its own jobs) and, for a cookie caller,
needs the page's CSRF token.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import sqlite3
import time
from dataclasses import dataclass, replace
from http import HTTPStatus
from typing import Any, Awaitable, Callable, Mapping, Sequence
from urllib.parse import parse_qs, urlencode, urlsplit

from markupsafe import Markup
from starlette.exceptions import HTTPException
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.middleware.gzip import GZipMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route, Router
from starlette.staticfiles import StaticFiles

from chronus_py.backends.base import BackendUnavailable
from chronus_py.service.api import JsonResponse, query_params
from chronus_py.service.core import ECHOED, ApiError, Caller
from chronus_py.service.db import storage_error
from chronus_py.service.jobspec import shown as shown_value
from chronus_py.service.rounds import GUARANTEED
from chronus_py.ui import charts, timeline, views
from chronus_py.ui.figures import FIGURES, FiguresCollector, History, figures
from chronus_py.ui.format import job_url
from chronus_py.ui.pages import HERE, RENDERING, TEMPLATES
from chronus_py.ui.session import COOKIE, Session, check_csrf, check_origin, csrf
from chronus_py.ui.snapshot import FRESH, Reader

log = logging.getLogger("chronus.serve")
POLL = 2
MEMO = 64
TAGS = 4096
"""ETags kept by what their pages depend on (``unchanged``); all are dropped when full."""
MAX_FORM = 4096
MAX_TEXT = 100
PAGE_FOR = "X-Chronus-Page-For"
"""The header a page's polls carry: who the page was drawn for (``_page_for``)."""
DRAWN_BY = "X-Chronus-Rendering"
"""The header a page's polls carry: the ``RENDERING`` that drew the page."""
DRAWER = RENDERING.encode()
"""The key of every ETag's hash: a page's ETag names what drew it, not only what it shows."""
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
STATES = ("pending", "running", "finished", "cancelled", "failed")
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; "
    "script-src 'self'; connect-src 'self'; frame-ancestors 'none'; form-action 'self'; "
    "base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "private, no-cache",
}


def attach(app, service, *, tokens, metrics, lock: asyncio.Lock, wake: Callable[[], None]) -> None:
    """Serve the view under ``/ui`` of ``app``; export the headline figures on ``/metrics``
    and sample their history after each round."""
    history = History(service)
    before = service.on_round

    def on_round(seconds: float) -> None:
        before(seconds)
        history.after_round()

    service.on_round = on_round
    if metrics is not None:
        metrics.registry.register(FiguresCollector(service))
    # Starlette answers a path that differs by a trailing slash with a 307 to an absolute
    # ``http://{Host}/...``: behind an HTTPS proxy that sent browsers to plain HTTP (where the
    # ``Secure`` cookie is not sent), or to the proxy's upstream address. No such redirects
    # (a JSON 404 for the API), and ``/ui`` goes to ``/ui/`` by a relative one.
    app.router.redirect_slashes = False
    # every method: the others get the view's 405 (a function's route takes only GET)
    app.router.routes.append(Route("/ui", _to_the_view, methods=list(METHODS)))
    app.router.routes.append(
        Mount("/ui", app=GZipMiddleware(ui_app(service, tokens, lock, wake, history)))
    )


def ui_app(
    service, tokens, lock: asyncio.Lock, wake: Callable[[], None], history: History
) -> ExceptionMiddleware:
    session = Session(tokens)
    reader = Reader(service)

    shown: list = [-math.inf, {}]

    def latest() -> dict:
        """The headline figures, computed at most once per ``FRESH`` seconds (their queries
        scan the audit log, which grows with every decision)."""
        if time.monotonic() - shown[0] >= FRESH:
            shown[:] = [time.monotonic(), figures(service)]
        return shown[1]

    async def read(fn: Callable[..., Any], *args: Any) -> Any:
        async with lock:
            return await asyncio.to_thread(fn, *args)

    def page(fn: Callable[[Request, Caller, str | None], Awaitable[Response]]):
        async def endpoint(request: Request) -> Response:
            caller = None

            def failed(status: int, message: str, field: str | None = None) -> Response:
                # with the header of the page (who is logged in, the way out), not bare
                return _failure(request, status, message, field, caller, tokens is not None)

            try:
                caller, token = session.caller(request)
                drawn_for = request.headers.get(PAGE_FOR)
                if drawn_for is not None and drawn_for != _page_for(caller):
                    # Another tab logged this browser out, or in as someone else: the poll
                    # would put that caller's rows under this page's header (its tenant, its
                    # navigation), so the whole page is drawn again, or goes to the login.
                    return Response(status_code=204, headers={"HX-Refresh": "true"})
                if request.headers.get(DRAWN_BY, RENDERING) != RENDERING:
                    # An upgraded server: the page's script and style are the old ones, and
                    # its live part would come in the new look, so it is drawn again whole.
                    return Response(status_code=204, headers={"HX-Refresh": "true"})
                if caller is None:
                    if _wants_json(request):  # a script without a token: no login form
                        return failed(401, "missing or unknown bearer token", "Authorization")
                    # back to this page once logged in (a poll: to the page it polls for)
                    if request.query_params.get("part"):
                        here = urlsplit(request.headers.get("hx-current-url", ""))
                        to = _login_to(here.path + (f"?{here.query}" if here.query else ""))
                        return Response(status_code=401, headers={"HX-Redirect": to})
                    if request.method != "GET":
                        return RedirectResponse("/ui/login", status_code=303)
                    return RedirectResponse(_login_to(_path_and_query(request)), status_code=303)
                return await fn(request, caller, token)
            except ApiError as exc:
                return failed(exc.status, exc.message, exc.field)
            except BackendUnavailable as exc:
                return failed(503, f"the backend is unavailable: {exc}")
            except sqlite3.Error as exc:
                storage = storage_error(exc)
                if storage is None:
                    raise
                # a full disk under a cancel: the API's answer (``api._failure``), as a page
                log.warning(json.dumps({"event": "storage_error", "during": request.url.path}))
                status, what = storage
                return failed(status, f"{what}: nothing was changed; retry once that is fixed")

        return endpoint

    async def unknown(request: Request, exc: Exception) -> Response:
        """A path or method the view does not have (routing's 404 and 405, the static files'
        404): a page saying so, in the view's look, to a browser. They were the API's JSON
        error, which a browser shows as a line of raw JSON without a way back."""
        assert isinstance(exc, HTTPException)
        try:
            caller = session.caller(request)[0]
        except ApiError:  # a wrong bearer header: the page without its navigation
            caller = None
        return _failure(
            request,
            exc.status_code,
            _unknown_line(request, exc),
            None,
            caller,
            tokens is not None,
            headers=exc.headers,
            api_message=exc.detail,
        )

    drawn: dict[tuple, bytes] = {}
    tags: dict[tuple, str] = {}

    def memo(
        key: tuple, name: str, context: Callable[[], dict], request: Request, tag: tuple
    ) -> Response:
        """A page drawn once per read of the service for everyone who asks the same of it
        (open pages poll together: the drawing, not the read, is what they would repeat)."""
        body = drawn.get(key)
        if body is None:
            if len(drawn) >= MEMO:
                drawn.clear()
            body = drawn[key] = TEMPLATES.get_template(name).render(**context()).encode()
        return html(name, {}, request=request, body=body, tag=tag)

    def html(
        name: str,
        context: dict,
        status: int = 200,
        request: Request | None = None,
        body: bytes | None = None,
        tag: tuple | None = None,
    ) -> Response:
        if body is None:
            body = TEMPLATES.get_template(name).render(**context).encode()
        # The hash of what the caller sees, not of ``tag``: a tenant's ETag then changes only
        # with its own page, never because another tenant's jobs changed the service; and of
        # what drew it, so that no page an older server drew is a 304 after an upgrade.
        etag = '"' + hashlib.blake2b(body, digest_size=12, key=DRAWER).hexdigest() + '"'
        headers = {**HEADERS, "ETag": etag}
        if tag is not None and status == 200:
            if len(tags) >= TAGS:
                tags.clear()
            tags[tag] = etag
        if request is not None and status == 200:
            if _matches(request.headers.get("if-none-match"), etag):
                return Response(status_code=304, headers=headers)
        return HTMLResponse(body, status_code=status, headers=headers)

    def tag_of(
        name: str,
        version: tuple,
        clock: float,
        caller: Caller,
        token: str | None,
        choice: tuple = (),
    ) -> tuple:
        """What a page drawn for ``caller`` depends on: the service's version
        (``Reader.version``), the page's clock step, who asks (its tenant, and its form token,
        which the page carries) and what it asked (``choice``: the query, the job)."""
        return (name, version, clock, caller.tenant, caller.admin, csrf(token), choice)

    def unchanged(
        request: Request,
        name: str,
        span: str | None,
        caller: Caller,
        token: str | None,
        choice: tuple = (),
    ) -> Response | None:
        """A 304 decided before any read or drawing: the poll names the ETag this page had
        when last drawn for the same caller and choice, and the service's version and the
        page's clock step are what they were then. The jobs page at 5,000 jobs was read,
        sorted and drawn again only to be hashed: 15 ms for each unchanged poll."""
        given = request.headers.get("if-none-match")
        if given is None:
            return None
        clock = views.quantize(service.backend.now(), span)
        etag = tags.get(tag_of(name, reader.version(), clock, caller, token, choice))
        if etag is None or not _matches(given, etag):
            return None
        return Response(status_code=304, headers={**HEADERS, "ETag": etag})

    def common(request: Request, caller: Caller, token: str | None) -> dict:
        return {
            "caller": caller,
            "csrf": csrf(token),
            "auth": tokens is not None,
            "path": request.url.path,
            "poll": POLL,
            "query": str(request.url.query),
            "page_for": {PAGE_FOR: _page_for(caller), DRAWN_BY: RENDERING},
        }

    def part_of(request: Request) -> str | None:
        part = request.query_params.get("part")
        if part not in (None, "live"):
            raise ApiError(422, "unknown part (have: live)", "part")
        return part

    async def overview(request: Request, caller: Caller, token: str | None) -> Response:
        span = query_params(request, ("span", "part")).get("span", views.DEFAULT_SPAN)
        if span not in views.SPANS:
            raise ApiError(422, f"unknown span (have: {', '.join(views.SPANS)})", "span")
        name = "overview_live.html" if part_of(request) else "overview.html"
        # the figures refresh with their sparklines' samples (``EVERY`` seconds) at the latest
        cached = unchanged(request, name, span, caller, token, (span, _sampled(history)))
        if cached is not None:
            return cached

        def gather():
            return reader.read(caller), latest(), _series(history), _sampled(history)

        reading, values, series, sampled = await read(gather)

        def build() -> Response:  # rows, drawing and rendering: off the event loop and lock
            snap = reader.view(reading, caller)
            snap.now = views.quantize(snap.now, span)
            key = (snap.generation, name, caller.tenant, caller.admin, csrf(token), span)
            key += (tuple(values.items()), sampled)
            tag = tag_of(name, snap.version, snap.now, caller, token, (span, sampled))

            def context() -> dict:
                return {
                    **common(request, caller, token),
                    "snap": snap,
                    "span": span,
                    "spans": list(views.SPANS),
                    "timeline": views.draw_timeline(snap, span),
                    "legend": timeline.legend(
                        ("guaranteed", "pool", "best_effort", "elastic")
                        + (() if caller.admin else ("other",))
                    ),
                    "figures": [
                        (f, values[f.key], charts.sparkline(series[f.key])) for f in FIGURES
                    ],
                    "waiting": sum(1 for j in snap.jobs if j.state == "pending" and not j.leases),
                    "live_url": f"/ui/?span={span}&part=live",
                }

            return memo(key, name, context, request, tag)

        return await asyncio.to_thread(build)

    async def jobs(request: Request, caller: Caller, token: str | None) -> Response:
        q = query_params(request, ("sort", "desc", "state", "kind", "q", "page", "part"))
        sort = q.get("sort", "slack")
        if sort not in views.SORTS:
            raise ApiError(422, f"unknown sort (have: {', '.join(views.SORTS)})", "sort")
        state = q.get("state", "")
        if state not in ("", *STATES):
            raise ApiError(422, f"unknown state (have: {', '.join(STATES)})", "state")
        kinds = [k for k in timeline.LABELS if k != "other"]  # "other": no job of the caller's
        kind = q.get("kind", "")
        if kind not in ("", *kinds):
            raise ApiError(422, f"unknown kind (have: {', '.join(kinds)})", "kind")
        if q.get("desc", "") not in ("", "0", "1"):
            raise ApiError(422, "expected 1 (descending) or 0", "desc")
        if len(q.get("q", "")) > MAX_TEXT:
            raise ApiError(422, f"at most {MAX_TEXT} characters", "q")
        page = q.get("page", "1")
        if not (page.isascii() and page.isdigit() and 1 <= len(page) <= 6 and int(page) >= 1):
            raise ApiError(422, "expected a page number, 1 or more", "page")
        page = int(page)
        name = "jobs_live.html" if part_of(request) else "jobs.html"
        choice = (sort, q.get("desc", ""), state, kind, q.get("q", ""), page)
        cached = unchanged(request, name, None, caller, token, choice)
        if cached is not None:
            return cached
        ended = views.ENDED if state in ("", "finished", "cancelled", "failed") else 0

        reading = await read(lambda: reader.read(caller, ended=ended))

        def choose():
            snap = reader.view(reading, caller)
            snap.now = views.quantize(snap.now)
            return snap, views.table(
                snap.jobs,
                sort=sort,
                descending=q.get("desc") == "1",
                state=state,
                kind=kind,
                text=q.get("q", ""),
                page=page,
            )

        snap, result = await asyncio.to_thread(choose)
        if page > result.pages:
            # (a poll of a page the table no longer reaches says so above the rows it showed)
            raise ApiError(
                422, f"no page {page}: {result.total} job(s) make {result.pages} page(s)", "page"
            )
        result = replace(result, rows=await read(reader.describe, result.rows))
        filters = {
            "sort": sort,
            "desc": q.get("desc", ""),
            "state": state,
            "kind": kind,
            "q": q.get("q", ""),
        }

        chosen = {k: v for k, v in filters.items() if v}
        address = "/ui/jobs?" + urlencode({**chosen, **({"page": page} if page > 1 else {})})

        def page_url(n: int) -> str | None:
            if not 1 <= n <= result.pages or n == page:
                return None
            return "/ui/jobs?" + urlencode({**chosen, **({"page": n} if n > 1 else {})})

        def build() -> Response:  # drawing and rendering: off the event loop
            context = {
                **common(request, caller, token),
                "snap": snap,
                "table": result,
                "filters": filters,
                "kinds": timeline.LABELS,
                "pages": {"previous": page_url(page - 1), "next": page_url(page + 1)},
                # ended jobs are read up to ``ended``: say so when there may be more
                "ended": ended if ended and len(reading.ended) >= ended else 0,
                "live_url": address + "&part=live",
            }
            tag = tag_of(name, snap.version, snap.now, caller, token, choice)
            response = html(name, context, request=request, tag=tag)
            if request.headers.get("hx-request") and not part_of(request):
                response.headers["HX-Push-Url"] = address  # the filter form's choice, kept
            return response

        return await asyncio.to_thread(build)

    async def job(request: Request, caller: Caller, token: str | None) -> Response:
        query_params(request, ("part",))
        job_id = request.path_params["job_id"]
        name = "job_live.html" if part_of(request) else "job.html"
        cached = unchanged(request, name, None, caller, token, (job_id,))
        if cached is not None:
            return cached

        def gather():
            version, now = reader.version(), service.backend.now()
            own = service.resolve(job_id, caller)  # 404 for another tenant's job
            view = service.get_job(job_id, caller)
            row = reader.one(own, caller)
            shown = None if row is None else replace(row, id=view["id"])
            return view, shown, _history(service, own), version, views.quantize(now)

        try:
            view, row, events, version, now = await read(gather)
        except ApiError as exc:
            if exc.status != 404 or not caller.admin:
                raise  # a tenant: another tenant's job is a missing one
            elsewhere = await shared(request, caller, job_id)
            if elsewhere is None:
                raise
            return elsewhere

        def build() -> Response:  # drawing and rendering: off the event loop
            context = {
                **common(request, caller, token),
                "job": view,
                "row": row,
                "events": events,
                "now": now,
                "live_url": job_url(job_id) + "?part=live",
            }
            tag = tag_of(name, version, now, caller, token, (job_id,))
            return html(name, context, request=request, tag=tag)

        return await asyncio.to_thread(build)

    async def shared(request: Request, caller: Caller, job_id: str) -> Response | None:
        """An admin at a job's address as its tenant names it (a link the tenant shared:
        ``/ui/jobs/a1`` for ``team-a:a1``): on to the job's own page, or, when several tenants
        name a job so, a page that lists them; None when no tenant names one so. Only after the
        admin's own id found nothing. The caller raises its 404 again: raised here, from a
        variable of this frame, it would hold the frame that holds it, a reference cycle."""
        named = await read(service.named_by_tenants, job_id)
        if not named:
            return None
        if len(named) == 1:
            query = request.url.query
            return RedirectResponse(job_url(named[0]) + (f"?{query}" if query else ""), 303)
        context = {
            "caller": caller,
            "auth": tokens is not None,
            "path": request.url.path,
            "status": 300,
            "phrase": "several jobs",
            "message": f"Several tenants name a job {shown_value(job_id, ECHOED)}:",
            "choices": [(job_url(name), name) for name in named],
            "back": "/ui/jobs",
            "back_label": "Back to the jobs",
        }
        return html("error.html", context, 300)

    async def cancel(request: Request, caller: Caller, token: str | None) -> Response:
        query_params(request, ())
        job_id = request.path_params["job_id"]
        form = await _form(request)
        check_csrf(request, token, form.get("csrf", ""))
        await read(service.cancel, job_id, caller)
        reader.forget()
        wake()
        return RedirectResponse(job_url(job_id), status_code=303)

    async def cluster(request: Request, caller: Caller, token: str | None) -> Response:
        query_params(request, ("part",))
        name = "cluster_live.html" if part_of(request) else "cluster.html"
        cached = unchanged(request, name, None, caller, token)
        if cached is not None:
            return cached
        reading = await read(reader.read, caller)

        def build() -> Response:  # rows, drawing and rendering: off the event loop and lock
            snap = reader.view(reading, caller)
            snap.now = views.quantize(snap.now)

            def context() -> dict:
                counts = views.gpu_counts(snap)
                parts = [
                    ("busy", counts["busy"], "#334155"),
                    ("reserved for guaranteed jobs this lease", counts["reserved"], "#93c5fd"),
                    ("free", counts["free"], "#e2e8f0"),
                    ("unhealthy", counts["unhealthy"], charts.STATES["unhealthy"]),
                ]
                return {
                    **common(request, caller, token),
                    "snap": snap,
                    "counts": counts,
                    "share": charts.share_bar(parts, snap.total_gpus, width=480),
                    "heatmap": charts.heatmap(snap.nodes, titles=len(snap.nodes) <= 256),
                    "tenants": [
                        {
                            **t,
                            "bar": charts.share_bar(
                                [("running", t["used"], "#2563eb")],
                                t["quota"] or snap.total_gpus,
                            ),
                        }
                        for t in views.tenant_shares(snap)
                    ],
                    "unhealthy": [n for n in snap.nodes if not n.healthy],
                    "legend": [(s, c) for s, c in charts.STATES.items()],
                    "hatch": Markup(timeline.HATCH),
                    "live_url": "/ui/cluster?part=live",
                }

            key = (snap.generation, name, caller.tenant, caller.admin, csrf(token))
            tag = tag_of(name, snap.version, snap.now, caller, token)
            return memo(key, name, context, request, tag)

        return await asyncio.to_thread(build)

    async def login_form(request: Request) -> Response:
        if tokens is None:
            return RedirectResponse("/ui/", status_code=303)
        then = _then(request.query_params.get("next"))
        error = None
        stale = request.cookies.get(COOKIE)
        if stale and session.login(stale) is None:
            # the token this browser logged in with was revoked (or the server's tokens file
            # changed): say so, and forget it; the page only came back to the form, unexplained
            error = "The token this browser logged in with is no longer accepted: log in again."
        response = html(
            "login.html",
            {"error": error, "auth": True, "caller": None, "path": "/ui/login", "next": then},
        )
        if error is not None:
            response.delete_cookie(
                COOKIE, path="/ui", secure=True, httponly=True, samesite="strict"
            )
        return response

    async def login(request: Request) -> Response:
        try:
            # another site's form must not log this browser in under a token of its choosing
            check_origin(request)
            form = await _form(request)
        except ApiError as exc:
            return html(
                "login.html", {"error": exc.message, "auth": True, "caller": None}, exc.status
            )
        token = form.get("token", "").strip()
        then = _then(form.get("next"))
        if session.login(token) is None:
            return html(
                "login.html",
                {
                    "error": "unknown token",
                    "auth": True,
                    "caller": None,
                    "path": "/ui/login",
                    "next": then,
                },
                401,
            )
        response = RedirectResponse(then, status_code=303)
        response.set_cookie(
            COOKIE, token, path="/ui", secure=True, httponly=True, samesite="strict"
        )
        return response

    async def logout(request: Request) -> Response:
        if request.method != "POST":
            # a person typing /ui/logout got the API's JSON 405: ask instead (a GET changes
            # nothing, so that no link or image elsewhere logs anyone out)
            try:
                caller, _ = session.caller(request) if tokens is not None else (None, None)
            except ApiError:  # a wrong bearer header: nobody to log out
                caller = None
            if caller is None:
                return RedirectResponse("/ui/login", status_code=303)
            return html("logout.html", {"caller": caller, "auth": True, "path": request.url.path})
        try:
            check_origin(request)  # another site's form must not log this browser out
        except ApiError as exc:
            return _failure(request, exc.status, exc.message, exc.field, None, True)
        # "cache" also drops the back-forward cache's pages: "back" after logging out brought
        # the last page back whole (every id and placement) until its next poll
        response = RedirectResponse(
            "/ui/login", status_code=303, headers={"Clear-Site-Data": '"cache"'}
        )
        response.delete_cookie(COOKIE, path="/ui", secure=True, httponly=True, samesite="strict")
        return response

    async def login_page(request: Request) -> Response:
        """One route for both methods, so that a 405 names both in its ``Allow`` header (two
        routes of one path each name only their own: ``Allow: GET, HEAD``)."""
        return await (login if request.method == "POST" else login_form)(request)

    router = Router(
        routes=[
            Route("/", page(overview), methods=["GET"]),
            Route("/jobs", page(jobs), methods=["GET"]),
            Route("/jobs/{job_id}", page(job), methods=["GET"]),
            Route("/jobs/{job_id}/cancel", page(cancel), methods=["POST"]),
            Route("/cluster", page(cluster), methods=["GET"]),
            Route("/login", login_page, methods=["GET", "POST"]),
            Route("/logout", logout, methods=["GET", "POST"]),
            Mount("/static", app=StaticFiles(directory=HERE / "static")),
        ],
        redirect_slashes=False,  # as the app's (``attach``)
    )
    return ExceptionMiddleware(router, handlers={HTTPException: unknown})


async def _to_the_view(request: Request) -> Response:
    if request.method not in ("GET", "HEAD"):
        headers = {"Allow": "GET, HEAD"}
        line = _unknown_line(request, HTTPException(405, headers=headers))
        return _failure(request, 405, line, None, None, False, headers, "Method Not Allowed")
    return RedirectResponse("/ui/", status_code=308)


def _page_for(caller: Caller | None) -> str:
    """Who a page is drawn for, as its polls say it (``PAGE_FOR``)."""
    if caller is None:
        return ""
    return "admin" if caller.admin else f"tenant:{caller.tenant}"


def _wants_json(request: Request) -> bool:
    """A script asking for JSON (``Accept: application/json``, not ``text/html``): it gets the
    API's JSON errors under ``/ui`` too. A browser names ``text/html`` (or ``*/*``) in every
    request it makes."""
    accept = request.headers.get("accept", "").lower()
    return "application/json" in accept and "text/html" not in accept


def _failure(
    request: Request,
    status: int,
    message: str,
    field: str | None,
    caller: Caller | None,
    auth: bool,
    headers: dict | None = None,
    api_message: str | None = None,
) -> Response:
    """A refusal: to a browser, a page in the view's look with the line and a way back; to a
    script asking for JSON, the API's error (``{"error", "field"}``, ``api_message`` if the
    API words it otherwise)."""
    if _wants_json(request):
        content = {"error": api_message or message, "field": field}
        return JsonResponse(content, status_code=status, headers=headers)
    path = request.url.path
    line = f"{field}: {message}" if field else message
    back, label = ("/ui/", "Back to the timeline")
    if caller is not None and path.startswith("/ui/jobs/"):
        back, label = ("/ui/jobs", "Back to the jobs")
        if path.endswith("/cancel") and status != 404:
            # a cancel refused (a stale form's token, a job that ended meanwhile): to the
            # job's page, whose form it came from, not to the list
            back, label = (job_url(request.path_params["job_id"]), "Back to the job")
        if status == 404 and field == "id":
            # the same words for a job that never was and another tenant's (the service's
            # 404 does not tell them apart either)
            job = shown_value(request.path_params.get("job_id", ""), ECHOED)
            line = f"There is no job {job}"
            if not caller.admin:
                line += " that you can see: it does not exist, or it is not yours"
            line += "."
    context = {
        "caller": caller,
        "auth": auth,
        "path": path,
        "status": status,
        "phrase": _phrase(status),
        "message": line,
        "back": back,
        "back_label": label,
    }
    body = TEMPLATES.get_template("error.html").render(**context).encode()
    return HTMLResponse(body, status_code=status, headers={**HEADERS, **(headers or {})})


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase.lower()
    except ValueError:
        return "error"


def _unknown_line(request: Request, exc: HTTPException) -> str:
    """What a person reads on a 404 or 405 of routing: the page is not there (its address cut
    short as errors cut values), or is not used that way, and how it is."""
    where = shown_value(request.url.path, ECHOED)
    if exc.status_code == 404:
        return f"There is no page {where} in this view."
    if exc.status_code == 405:
        # (Starlette's ``Allow`` lists a set: its order changes from one start to the next)
        allowed = ", ".join(sorted((exc.headers or {}).get("Allow", "").split(", ")))
        if allowed == "POST":
            return f"{where} takes a form's POST only (its page has the button that sends it)."
        return f"{where} does not take {request.method} (it takes {allowed})."
    return str(exc.detail)


def _matches(header: str | None, etag: str) -> bool:
    """Whether ``If-None-Match`` names ``etag``: any of a list, ``*``, or the weak ``W/``
    form (RFC 9110 13.1.2 compares weakly). A proxy that compresses the pages (nginx's
    ``gzip``) makes their ETags weak, and an exact comparison then never answered 304."""
    if header is None:
        return False
    return any(tag.strip().removeprefix("W/") in (etag, "*") for tag in header.split(","))


def _path_and_query(request: Request) -> str:
    query = request.url.query
    return request.url.path + (f"?{query}" if query else "")


def _login_to(then: str) -> str:
    then = _then(then)
    return "/ui/login" if then == "/ui/" else "/ui/login?" + urlencode({"next": then})


def _then(given: str | None) -> str:
    """Where a login goes on to: the view's page it was sent from (``?next=``), never another
    site's (``//elsewhere``, ``/\\elsewhere``) nor the login or logout page; else the timeline.
    A login always went to the timeline, so a bookmarked ``/ui/jobs?state=running`` was lost."""
    if (
        not given
        or len(given) > 2000
        or not given.startswith("/ui/")
        or "//" in given
        or "\\" in given
        or any(ord(c) < 0x21 or ord(c) == 0x7F for c in given)
        or given.split("?")[0] in ("/ui/login", "/ui/logout")
    ):
        return "/ui/"
    return given


async def _form(request: Request) -> dict[str, str]:
    """A small urlencoded form (the login and cancel forms), without a multipart parser."""
    kind = request.headers.get("content-type", "").split(";")[0].strip()
    if kind != "application/x-www-form-urlencoded":
        raise ApiError(415, "expected a form (application/x-www-form-urlencoded)", "Content-Type")
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_FORM:
            raise ApiError(413, f"form larger than {MAX_FORM} bytes", "body")
    try:
        parsed = parse_qs(raw.decode(), max_num_fields=8)
    except (UnicodeDecodeError, ValueError):
        raise ApiError(400, "not a form", "body") from None
    return {k: v[0] for k, v in parsed.items()}


def _sampled(history: History) -> float | None:
    """When the figures' history was last sampled (None: not yet)."""
    return history.samples[-1][0] if history.samples else None


def _series(history: History) -> dict[str, list[tuple[float, float]]]:
    return {f.key: history.series(f.key) for f in FIGURES}


@dataclass(frozen=True)
class Event:
    """One row of a job's history. Deadlines and estimates stay numbers for the page to write
    as it writes them everywhere else: the detail column showed "deadline 1796020200" and
    "guaranteed to finish by 1796020200" (a Unix clock) under facts that say "for its deadline
    in 2h 10m"."""

    at: float
    what: str
    detail: str = ""
    placement: Mapping[str, Sequence[int]] | None = None
    deadline: float | None = None
    estimate: tuple[float, float] | None = None


def _history(service, job_id: str) -> list[Event]:
    """Every decision about one job, in time order: admission, promises, starts, preemptions,
    estimates, the end (the audit log). An admission that promised names the promise's
    deadline, recorded at the same instant."""
    promises = service.db.promises(job_id)
    promised = {p["at"]: p["deadline"] for p in promises if p["event"] == "promised"}
    events = [
        Event(
            d["at"],
            d["action"],
            d["reason"],
            d["placement"],
            promised.get(d["at"]) if d["action"] == "admit:" + GUARANTEED else None,
        )
        for d in service.db.decisions(job_id)
    ]
    events += [Event(p["at"], p["event"], deadline=p["deadline"]) for p in promises]
    cur = service.db.conn.execute(
        "SELECT at, old, new FROM estimate WHERE job=? ORDER BY seq", (job_id,)
    )
    events += [Event(at, "estimate", estimate=(old, new)) for at, old, new in cur.fetchall()]
    events.sort(key=lambda e: e.at)
    return events
