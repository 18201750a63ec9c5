"""A real ``chronus serve`` (sim backend) and Debian's Chromium driven by Playwright.

The browser is the system's (``/usr/bin/chromium``, installed by ``.ci/browser.sh``); Playwright
never downloads one; axe-core comes in the axe-playwright-python package (the test extras).
Without the browser (or without the playwright or axe package) the tests skip and say why;
in CI (``CI=true``) that is a failure instead. Every request the browser makes is recorded, so a
test can check that none left the machine.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "service"))
from serving import running  # noqa: E402
from ui_helpers import ARGS, CHROMIUM, TOKEN  # noqa: E402


def _why_not() -> str | None:
    if not CHROMIUM.exists():
        return f"no {CHROMIUM} (apt-get install chromium; .ci/browser.sh does)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install '.[test]')"
    return None


@pytest.fixture(scope="module")
def browser():
    """Chromium, for one test module: Playwright's sync API keeps an event loop running in
    the thread while it is open, and a session's browser left one there for every later test
    of its xdist worker (tests/service's ``asyncio.run`` then failed, by the order tests
    were dealt in)."""
    why = _why_not()
    if why is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but the browser tests cannot run: {why}")
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        # launch() gives the browser a fresh temporary profile (user-data-dir) of its own.
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def axe(browser):
    """axe-core, as the axe-playwright-python package bundles it (the test extras install it);
    without the package the tests skip and say why, and with ``CI=true`` fail instead."""
    try:
        from axe_playwright_python.sync_playwright import Axe
    except ImportError:
        why = "the axe-playwright-python package is not installed (pip install '.[test]')"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but the accessibility tests cannot run: {why}")
        pytest.skip(why)
    return Axe()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One daemon per test module: 4 nodes of 8 GPUs, 50 simulated seconds per wall second."""
    with running(
        tmp_path_factory.mktemp("ui"), "--nodes", "4", "--speed", "50", "--headroom", "0.5"
    ) as server:
        yield server


class Requests:
    """Every URL the browser asked for."""

    def __init__(self):
        self.urls: list[str] = []

    def foreign(self) -> list[str]:
        return [u for u in self.urls if urlsplit(u).hostname not in ("127.0.0.1", None)]


@pytest.fixture
def open_as(browser, server):
    """``open_as(who)``: a fresh browser context logged in through the login form as ``who``
    (team-a, team-b or admin), and its request log; every context is checked to have stayed on
    the machine."""
    made = []

    def make(who: str):
        context = browser.new_context(viewport={"width": 1300, "height": 900})
        seen = Requests()

        def record(route):
            seen.urls.append(route.request.url)
            route.continue_()

        context.route("**/*", record)
        page = context.new_page()
        page.goto(f"{server.url}/ui/login")
        page.fill("input[name=token]", TOKEN[who])
        page.click("button[type=submit]")
        page.wait_for_url(f"{server.url}/ui/")
        made.append((context, seen))
        return page, seen

    yield make
    for context, seen in made:
        context.close()
        assert seen.urls, "the route recorder saw no request"
        assert seen.foreign() == [], f"requests left the machine: {seen.foreign()}"
