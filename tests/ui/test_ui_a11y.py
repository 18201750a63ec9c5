"""The web view for a keyboard and a screen reader: axe-core (the engine of browsers'
accessibility audits, as the axe-playwright-python package bundles it) run in Chromium on every
page of the view as a real ``chronus serve`` draws it for a tenant and for an admin, and the
timeline's bars reached and followed by keyboard."""

from __future__ import annotations

from playwright.sync_api import expect
from polling import wait_for
from ui_helpers import TOKEN, bearer

SEVERE = ("serious", "critical")
HOLD_POLLS = """
window.held = false;
window.inflight = 0;
document.addEventListener("htmx:beforeRequest", (event) => {
  if (window.held) { event.preventDefault(); } else { window.inflight += 1; }
});
document.addEventListener("htmx:afterRequest", () => { window.inflight -= 1; });
"""
"""The live part is swapped by every poll that brings a change (about one a poll here, the sim
running 50 times real time): axe reads the page while polls are held, so that no swap lands in
the middle of its checks."""


def submit(server, who: str, body: dict) -> None:
    r = server.http.post("/v1/jobs", headers=bearer(who), json=body)
    assert r.status_code == 201, r.text


def severe(axe, page) -> list[str]:
    """The serious and critical violations axe finds on ``page`` as it is now, one line each."""
    page.evaluate("window.held = true")
    page.wait_for_function("window.inflight === 0")
    try:
        found = axe.run(page).response["violations"]
    finally:
        page.evaluate("window.held = false")
    return [
        f"{page.url}: {v['id']} ({v['impact']}) {v['help']}: "
        + "; ".join(n["html"][:120] for n in v["nodes"][:3])
        for v in found
        if v["impact"] in SEVERE
    ]


def test_no_page_has_a_serious_or_critical_accessibility_violation(server, browser, axe):
    """Every page of the view, filled: the timeline with running bars, a reserved lease and
    other tenants' GPUs, the jobs table (and one that matches nothing), a job's page with its
    cancel question open, the cluster, the log-in form (and its refusal), the log-out page,
    the pages of a refusal (404, a job one may not see, 422, an admin's choice between two
    tenants' jobs) and a page that says it stopped updating. The timeline was an image holding
    links (axe's nested-interactive): a screen reader heard one picture while the keyboard's
    focus went into the links within it."""
    now = server.http.get("/v1/cluster", headers=bearer("admin")).json()["now"]
    deadline = {"deadlines": [{"at": now + 80000}]}
    submit(server, "team-a", {"id": "a0", "gpus": 8, "estimate_seconds": 20000, **deadline})
    submit(server, "team-b", {"id": "b0", "gpus": 8, "estimate_seconds": 20000, **deadline})
    submit(server, "team-a", {"id": "a1", "gpus": 8, "estimate_seconds": 20000})
    for who in ("team-a", "team-b"):
        submit(server, who, {"id": "twice", "gpus": 1, "estimate_seconds": 20000})
    submit(server, "team-a", {"id": "a2", "gpus": 16, "estimate_seconds": 20000, **deadline})
    wait_for(
        lambda: (
            server.http.get("/v1/jobs/a0", headers=bearer("team-a")).json()["state"] == "running"
        ),
        timeout=20.0,
    )
    wait_for(
        lambda: "a2" in server.http.get("/v1/plan", headers=bearer("team-a")).json()["lease_plan"],
        timeout=20.0,
    )
    pages = {
        "team-a": [
            "/ui/",
            "/ui/?span=7d",
            "/ui/jobs",
            "/ui/jobs?q=nothing-matches",
            "/ui/jobs/a0",
            "/ui/cluster",
            "/ui/logout",
            "/ui/no-such-page",
            "/ui/jobs/b0",
            "/ui/?span=2h",
        ],
        "admin": ["/ui/", "/ui/jobs", "/ui/jobs/team-a%3Aa0", "/ui/cluster", "/ui/jobs/twice"],
    }
    found = []
    for who, addresses in pages.items():
        context = browser.new_context(viewport={"width": 1300, "height": 900})
        context.add_init_script(HOLD_POLLS)
        page = context.new_page()
        page.goto(f"{server.url}/ui/login")
        if who == "team-a":
            found += severe(axe, page)
            page.fill("input[name=token]", "not-a-token")
            page.click("button[type=submit]")
            page.wait_for_selector("p.error[role=alert]")
            found += severe(axe, page)
        page.fill("input[name=token]", TOKEN[who])
        page.click("button[type=submit]")
        page.wait_for_url(f"{server.url}/ui/")
        for address in addresses:
            page.goto(server.url + address)
            found += severe(axe, page)
        if who == "team-a":
            page.goto(f"{server.url}/ui/jobs/a0")
            page.click("#cancel summary")
            found += severe(axe, page)
            # the server gone: the page says it stopped updating
            context.route("**/*part=live*", lambda route: route.abort())
            page.wait_for_selector("#live-status:not([hidden])", timeout=10000)
            found += severe(axe, page)
        context.close()
    assert found == [], "\n".join(found)


def test_a_keyboard_follows_a_timeline_bar_to_its_job(server, browser):
    """The timeline's bars are links a keyboard reaches (after the zoom) and follows, each
    named for a screen reader by its job, and the focus shows where it is."""
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    context.add_init_script(HOLD_POLLS)
    page = context.new_page()
    page.goto(f"{server.url}/ui/login")
    page.fill("input[name=token]", TOKEN["team-a"])
    page.keyboard.press("Enter")
    page.wait_for_url(f"{server.url}/ui/")
    submit(server, "team-a", {"id": "by-key", "gpus": 1, "estimate_seconds": 20000})
    page.wait_for_selector('svg.timeline a[href="/ui/jobs/by-key"]', timeout=20000)
    page.evaluate("window.held = true")  # the part the focus moves through stays as it is
    page.wait_for_function("window.inflight === 0")
    page.focus(".zoom a:last-child")
    for _ in range(40):  # past the other bars to this one
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.getAttribute('href')") == "/ui/jobs/by-key":
            break
    bar = page.locator("svg.timeline").get_by_role("link", name="by-key (team-a): best-effort")
    expect(bar).to_be_focused()
    stroke = page.evaluate(
        "getComputedStyle(document.activeElement.querySelector('rect')).strokeWidth"
    )
    assert stroke == "2px"
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.url == f"{server.url}/ui/jobs/by-key"
    context.close()
