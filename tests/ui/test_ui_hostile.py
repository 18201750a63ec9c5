"""The web view against a hostile site, a careless tenant and a demanding operator, in a real
browser (Debian's Chromium) against a real ``chronus serve``."""

from __future__ import annotations

from polling import wait_for
from serving import TOKENS, Server
from ui_helpers import TOKEN, bearer


def state_of(server, job: str) -> str:
    return server.http.get(f"/v1/jobs/{job}", headers=bearer("team-a")).json()["state"]


def submit(server, who: str, body: dict) -> dict:
    r = server.http.post("/v1/jobs", headers=bearer(who), json=body)
    assert r.status_code == 201, r.text
    return r.json()


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


def own_server(tmp_path) -> tuple[Server, tuple[str, ...]]:
    """A server of the test's own, which it stops and starts again, and the arguments to."""
    (tmp_path / "tokens.yaml").write_text(TOKENS)
    args = ("--tokens", str(tmp_path / "tokens.yaml"), "--nodes", "2", "--speed", "50")
    return Server(tmp_path, *args).start(), args


def stopped(*servers) -> None:
    """Stop the servers a test started itself (None: not started)."""
    for server in servers:
        if server is not None:
            server.stop()
            server.http.close()


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


def test_a_page_says_when_it_stops_following_the_scheduler(browser, tmp_path):
    """With the server gone (or answering an error), htmx left the live part as it was and the
    page went on looking current: an operator read minutes-old state as now."""
    from playwright.sync_api import expect

    server, args = own_server(tmp_path)
    context = browser.new_context()
    again = None
    try:
        page = context.new_page()
        page.goto(f"{server.url}/ui/login")
        page.fill("input[name=token]", TOKEN["team-a"])
        page.click("button[type=submit]")
        page.wait_for_url(f"{server.url}/ui/")
        page.goto(f"{server.url}/ui/jobs")
        status = page.locator("#live-status")
        with page.expect_response(lambda r: "part=live" in r.url, timeout=20000):
            pass
        expect(status).to_be_hidden()
        server.stop()
        expect(status).to_be_visible(timeout=20000)
        expect(status).to_contain_text("the server does not answer")
        again = Server(tmp_path, *args, port=server.port).start()
        expect(status).to_be_hidden(timeout=20000)
    finally:
        context.close()
        stopped(server, again)


def test_a_phone_sees_every_page_without_scrolling_sideways(server, open_as):
    """At 360 px the header pushed the tenant's name and "log out" off the screen, the filter
    form its kind menu, and a long id, the job's history and the tenants table widened every
    page: the page itself scrolled sideways (only a wide table or drawing may, in its box)."""
    long_id = "a-rather-long-job-name-" + "x" * 77
    submit(server, "team-a", {"id": long_id, "gpus": 1, "estimate_seconds": 90000})
    page, _ = open_as("team-a")
    page.set_viewport_size({"width": 360, "height": 740})
    missing = "/ui/jobs/nothing-" + "y" * 300  # a 404 page, its header kept
    for path in ("/ui/", "/ui/jobs", "/ui/cluster", f"/ui/jobs/{long_id}", missing):
        page.goto(f"{server.url}{path}")
        wide = page.evaluate("document.documentElement.scrollWidth")
        assert wide <= 360, (path, wide)
        for control in ("header button.link", "header .who b"):
            box = page.locator(control).bounding_box()
            assert box is not None and box["x"] + box["width"] <= 360, (path, control, box)
    page.goto(f"{server.url}/ui/jobs")
    for control in ("input[name=q]", "select[name=state]", "select[name=kind]"):
        box = page.locator(control).bounding_box()
        assert box["x"] + box["width"] <= 360, (control, box)


def log_in(context, url: str, who: str):
    page = context.new_page()
    page.goto(f"{url}/ui/login")
    page.fill("input[name=token]", TOKEN[who])
    page.click("button[type=submit]")
    page.wait_for_url(f"{url}/ui/")
    return page


def test_back_after_log_out_shows_nothing_of_the_tenant(server, browser):
    """On a shared screen, "back" after logging out brought the jobs page back whole from the
    browser's back-forward cache, every id and placement readable until its next poll. (A
    context of its own: the other tests' request recorder keeps pages out of that cache.)"""
    from playwright.sync_api import expect

    submit(server, "team-a", {"id": "private-after-logout", "gpus": 1, "estimate_seconds": 90000})
    context = browser.new_context()
    try:
        page = log_in(context, server.url, "team-a")
        page.goto(f"{server.url}/ui/jobs")
        # (a read of the service serves the pages for a second: the row may come by a poll)
        expect(page.locator('tr[data-job="private-after-logout"]')).to_have_count(1)
        with page.expect_navigation():
            page.click("header button.link")
        assert page.url == f"{server.url}/ui/login"
        page.go_back()
        page.wait_for_load_state()
        assert "private-after-logout" not in page.content()
    finally:
        context.close()


def test_a_keyboard_or_a_selection_in_the_table_is_not_thrown_out_by_a_poll(server, open_as):
    """Tabbing through the jobs table, or selecting an id to copy it, lasted until the
    scheduler next changed something (a 2 s poll on a busy cluster): the swap sent the focus
    back to the top of the page and dropped the selection."""
    from playwright.sync_api import expect

    submit(server, "team-a", {"id": "kbd-first", "gpus": 1, "estimate_seconds": 90000})
    page, _ = open_as("team-a")
    page.goto(f"{server.url}/ui/jobs?q=kbd")
    page.locator("input[name=q]").focus()
    for _ in range(3):  # the state and kind menus, then the table's first column head
        page.keyboard.press("Tab")
    focused = "document.activeElement.closest('#live') && document.activeElement.textContent"
    assert page.evaluate(focused).startswith("job")

    def changed(response) -> bool:
        return "part=live" in response.url and "kbd-second" in response.text()

    submit(server, "team-a", {"id": "kbd-second", "gpus": 1, "estimate_seconds": 90000})
    with page.expect_response(changed, timeout=20000):
        pass
    with page.expect_response(lambda r: "part=live" in r.url, timeout=20000):
        pass  # one more poll: the first's swap, had there been one, is done by then
    assert page.evaluate(focused).startswith("job")
    assert page.locator('tr[data-job="kbd-second"]').count() == 0
    page.keyboard.press("Shift+Tab")  # the focus leaves the table: it follows the scheduler again
    expect(page.locator('tr[data-job="kbd-second"]')).to_have_count(1, timeout=20000)

    page.locator("input[name=q]").focus()  # out of the table
    select = """() => { const cell = document.querySelector('tr[data-job="kbd-first"] td.id a');
        document.getSelection().selectAllChildren(cell); }"""
    page.evaluate(select)  # as a mouse drag would, without moving the focus
    submit(server, "team-a", {"id": "kbd-third", "gpus": 1, "estimate_seconds": 90000})
    with page.expect_response(lambda r: "part=live" in r.url and "kbd-third" in r.text()):
        pass
    with page.expect_response(lambda r: "part=live" in r.url, timeout=20000):
        pass
    assert page.evaluate("document.getSelection().toString()") == "kbd-first"
    assert page.locator('tr[data-job="kbd-third"]').count() == 0
    page.evaluate("document.getSelection().removeAllRanges()")
    expect(page.locator('tr[data-job="kbd-third"]')).to_have_count(1, timeout=20000)


def test_cancel_asks_first_and_is_done_by_keyboard(server, open_as):
    """One click on "Cancel job" killed the job, its work lost, with nothing to undo it."""
    from playwright.sync_api import expect

    submit(server, "team-a", {"id": "asked", "gpus": 2, "estimate_seconds": 90000})
    wait_for(lambda: state_of(server, "asked") == "running", timeout=20.0)
    page, _ = open_as("team-a")
    page.goto(f"{server.url}/ui/jobs/asked")
    expect(page.locator("#cancel button")).to_be_hidden()
    page.click("#cancel summary")
    expect(page.locator("#cancel button")).to_be_visible()
    expect(page.locator("#cancel form")).to_contain_text("stops now, on 2 GPU(s)")

    def changed(response) -> bool:  # a poll with news (the progress bar moves every poll)
        return "part=live" in response.url and response.status == 200

    for _ in range(2):  # the question stays open over the page's polls
        with page.expect_response(changed, timeout=20000):
            pass
    expect(page.locator("#cancel button")).to_be_visible()
    assert state_of(server, "asked") == "running"
    # by keyboard: close the question, open it again, and answer it
    page.locator("#cancel summary").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#cancel button")).to_be_hidden()
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Yes, cancel it"
    with page.expect_navigation():
        page.keyboard.press("Enter")
    expect(page.locator("#job-state")).to_have_text("cancelled")


def test_a_revoked_token_ends_the_session_with_a_word(browser, tmp_path):
    """A token taken out of the tokens file (and the server restarted) sent an open page back
    to the login form without a word, the dead token still in the cookie."""
    from playwright.sync_api import expect

    server, args = own_server(tmp_path)
    context = browser.new_context()
    again = None
    try:
        page = log_in(context, server.url, "team-a")
        page.goto(f"{server.url}/ui/jobs")
        server.stop()
        revoked = "".join(line for line in TOKENS.splitlines(True) if "team-a" not in line)
        (tmp_path / "tokens.yaml").write_text(revoked)
        again = Server(tmp_path, *args, port=server.port).start()
        # by the live part's poll, to come back here once logged in again
        page.wait_for_url(f"{server.url}/ui/login?next=%2Fui%2Fjobs", timeout=20000)
        expect(page.locator(".error")).to_have_text(
            "The token this browser logged in with is no longer accepted: log in again."
        )
        assert [c for c in context.cookies() if c["name"] == "chronus_token"] == []
        page.reload()
        expect(page.locator(".error")).to_have_count(0)
    finally:
        context.close()
        stopped(server, again)


def test_logging_in_returns_to_the_page_asked_for(server, browser):
    """A bookmarked or shared address (``/ui/jobs?state=running``) went to the login form, and
    the login then to the timeline: the address was lost."""
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(f"{server.url}/ui/jobs?state=running&sort=gpus")
        assert page.url.startswith(f"{server.url}/ui/login?next=")
        page.fill("input[name=token]", "not-a-token-0123456789")
        page.click("button[type=submit]")  # a wrong token first: the address is kept
        page.fill("input[name=token]", TOKEN["team-a"])
        page.click("button[type=submit]")
        page.wait_for_url(f"{server.url}/ui/jobs?state=running&sort=gpus")
        assert page.locator("select[name=state] option[selected]").inner_text() == "running"
    finally:
        context.close()


def test_a_tab_logged_in_as_someone_else_redraws_the_other_tabs_whole(server, browser):
    """Two tabs of one browser share its cookie: logging in as team-b in the second turned the
    first's live part into team-b's jobs under a header that still said team-a (and an
    operator read one tenant's jobs as the other's). The first tab now draws itself again,
    all of it for team-b."""
    from playwright.sync_api import expect

    submit(server, "team-a", {"id": "tab-a", "gpus": 1, "estimate_seconds": 90000})
    context = browser.new_context()
    try:
        first = log_in(context, server.url, "team-a")
        first.goto(f"{server.url}/ui/jobs?q=tab-")
        expect(first.locator('tr[data-job="tab-a"]')).to_have_count(1)
        log_in(context, server.url, "team-b")
        expect(first.locator("header .who b")).to_have_text("team-b", timeout=15000)
        expect(first.locator('tr[data-job="tab-a"]')).to_have_count(0)
        assert first.url == f"{server.url}/ui/jobs?q=tab-"
    finally:
        context.close()


def test_long_names_and_many_deadlines_keep_the_pages_readable(browser, tmp_path):
    """A tenant's 128-character name (no space in it) widened every page of that tenant's on a
    phone; an admin's 257-character id of that tenant's job pushed every column but the ids
    out of the jobs table's view; a job's 16 deadlines ran on in one line, their values
    written as floats print them (``0.44999999999999996``)."""
    tenant = "t" * 60 + "-" + "x" * 67
    (tmp_path / "tokens.yaml").write_text(
        TOKENS + f'  - {{token: "long-tenant-token-0123456789", tenant: {tenant}}}\n'
    )
    server = Server(tmp_path, "--tokens", str(tmp_path / "tokens.yaml"), "--nodes", "2").start()
    long_token = {"Authorization": "Bearer long-tenant-token-0123456789"}
    r = server.http.post(
        "/v1/jobs", headers=long_token, json={"id": "j" * 128, "gpus": 1, "estimate_seconds": 9e4}
    )
    assert r.status_code == 201, r.text
    now = server.http.get("/v1/cluster", headers=bearer("admin")).json()["now"]
    options = [{"at": now + 20000 + 1000 * i, "value": 1 - i / 20} for i in range(16)]
    submit(
        server, "team-a", {"id": "d16", "gpus": 1, "estimate_seconds": 9000, "deadlines": options}
    )
    context = browser.new_context(viewport={"width": 360, "height": 740})
    try:
        page = context.new_page()
        page.goto(f"{server.url}/ui/login")
        page.fill("input[name=token]", "long-tenant-token-0123456789")
        page.click("button[type=submit]")
        page.wait_for_url(f"{server.url}/ui/")
        for path in ("/ui/", "/ui/jobs", f"/ui/jobs/{'j' * 128}", "/ui/cluster", "/ui/nope"):
            page.goto(f"{server.url}{path}")
            wide = page.evaluate("document.documentElement.scrollWidth")
            assert wide <= 360, (path, wide)
        context.close()
        context = browser.new_context(viewport={"width": 1300, "height": 900})
        page = log_in(context, server.url, "admin")
        page.goto(f"{server.url}/ui/jobs?sort=id&desc=1")
        row = page.locator(f'tr[data-job="{tenant}:{"j" * 128}"]')
        state = row.locator("span.state").bounding_box()
        assert state is not None and state["x"] + state["width"] <= 1300, state
        assert row.locator("td.id a").get_attribute("title") == f"{tenant}:{'j' * 128}"
        page.goto(f"{server.url}/ui/jobs/team-a:d16")
        deadlines = page.locator("ul.deadlines li")
        assert deadlines.count() == 16
        assert deadlines.nth(11).inner_text().endswith("s), value 0.45"), deadlines.nth(11)
    finally:
        context.close()
        stopped(server)
