"""Who is asking, for the web view: the ``Authorization: Bearer`` header as the API reads it
(scripts, tests), else the login cookie a browser got by giving its token once.

The cookie holds the token itself (the service keeps no sessions, so a restart or a second
replica accepts it as it accepts the header): ``HttpOnly`` (no script reads it), ``Secure``
(browsers send it over HTTPS, and to loopback), ``SameSite=Strict`` (no other site's page sends
it), and ``Path=/ui``: the JSON API never reads it, only the view does. The one thing the view
changes, cancelling a job, also needs a CSRF token: an HMAC of the cookie under a key made at
start, which only a page served to that cookie carries.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from starlette.requests import Request

from chronus_py.service.core import ApiError, Caller

COOKIE = "chronus_token"
KEY = secrets.token_bytes(32)


class Session:
    def __init__(self, tokens):
        self.tokens = tokens

    def caller(self, request: Request) -> tuple[Caller | None, str | None]:
        """(the caller, the cookie's token if that is how it came) or (None, None): not logged
        in. A wrong bearer header is refused outright, as the API does."""
        if self.tokens is None:
            return Caller("default", admin=True), None
        header = request.headers.get("authorization")
        if header is not None:
            caller = self.tokens.caller(header)
            if caller is None:
                raise ApiError(401, "missing or unknown bearer token", "Authorization")
            return caller, None
        token = request.cookies.get(COOKIE)
        if token:
            caller = self.tokens.caller("Bearer " + token)
            if caller is not None:
                return caller, token
        return None, None

    def login(self, token: str) -> Caller | None:
        return None if self.tokens is None else self.tokens.caller("Bearer " + token.strip())


def csrf(token: str | None) -> str:
    """The form token of a cookie (empty without one: a bearer caller needs none)."""
    if token is None:
        return ""
    return hmac.new(KEY, token.encode(), hashlib.sha256).hexdigest()


def check_origin(request: Request) -> None:
    """A form's post must come from a page of this view. A browser says so itself in
    ``Sec-Fetch-Site`` (which no page can set), whatever a reverse proxy did to the scheme and
    ``Host``; only without it is ``Origin`` compared with the address the request came to.
    (Compared alone, behind the README's HTTPS proxy ``https://host`` never equalled
    ``http://host`` or the proxy's upstream address, and every cancel was refused.)"""
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        if site != "same-origin":
            raise ApiError(403, f"{site} request refused", "Sec-Fetch-Site")
        return
    origin = request.headers.get("origin")
    if origin is not None and origin != f"{request.url.scheme}://{request.url.netloc}":
        raise ApiError(403, "cross-origin request refused", "Origin")


def check_csrf(request: Request, token: str | None, given: str) -> None:
    """A cookie caller's change must carry the page's CSRF token and come from this origin."""
    if token is None:
        return
    check_origin(request)
    if not hmac.compare_digest(csrf(token), given):
        raise ApiError(403, "missing or wrong CSRF token: reload the page", "csrf")
