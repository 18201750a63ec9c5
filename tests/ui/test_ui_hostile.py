"""The web view against a hostile site, a careless tenant and a demanding operator, in a real
browser (Debian's Chromium) against a real ``chronus serve``."""

from __future__ import annotations

from ui_helpers import TOKEN


def evil_page(context, html: str) -> str:
    """Another site's page (``http://evil.test/``, served by the browser's router: it never
    leaves the machine), whose script runs as that site's would."""
    context.route(
        "http://evil.test/**", lambda route: route.fulfill(body=html, content_type="text/html")
    )
    return "http://evil.test/"


def who(page, url: str) -> str:
    page.goto(f"{url}/ui/")
    return page.locator("header .who b").inner_text() if "/ui/login" not in page.url else ""


def test_another_site_can_neither_log_the_browser_in_nor_out(server, open_as):
    """A cross-site form posting a token of the attacker's to ``/ui/login`` put the browser in
    the attacker's tenant (what the victim then submits or reads is the attacker's); one
    posting to ``/ui/logout`` logged the victim out. ``SameSite=Strict`` keeps the cookie off
    such requests, not out of their answers."""
    page, _ = open_as("team-a")
    url = server.url
    form = (
        f'<form id="f" method="post" action="{url}/ui/login">'
        f'<input name="token" value="{TOKEN["team-b"]}"></form>'
        '<script>document.getElementById("f").submit()</script>'
    )
    page.goto(evil_page(page.context, form))
    page.wait_for_url(f"{url}/ui/login")
    assert "cross-site request refused" in page.locator(".error").inner_text()
    assert who(page, url) == "team-a"

    page.context.unroute("http://evil.test/**")
    form = f'<form id="f" method="post" action="{url}/ui/logout"></form>'
    page.goto(
        evil_page(page.context, form + '<script>document.getElementById("f").submit()</script>')
    )
    page.wait_for_url(f"{url}/ui/logout")
    assert who(page, url) == "team-a"
