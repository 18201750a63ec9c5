"""The web view in a real browser against a real ``chronus serve``: what it shows, to whom, the
one change it allows (cancelling one's own job), and that it follows the scheduler live."""

from __future__ import annotations

import re
from pathlib import Path

from polling import wait_for
from serving import TOKENS, Server
from ui_helpers import TOKEN, bearer


def submit(server, who: str, body: dict) -> dict:
    r = server.http.post("/v1/jobs", headers=bearer(who), json=body)
    assert r.status_code == 201, r.text
    return r.json()


def now_of(server) -> float:
    return server.http.get("/v1/cluster", headers=bearer("admin")).json()["now"]


def cell(page, job: str, column: int):
    return page.locator(f'tr[data-job="{job}"] td').nth(column)


def test_pages_show_state_plan_and_deadlines_to_their_tenant_only(server, open_as):
    now = now_of(server)
    # On 32 GPUs: team-b's 8-GPU job and team-a's two run; then team-a's 16-GPU job is
    # guaranteed leases after them.
    deadline = [{"at": now + 80000}]
    submit(
        server, "team-b", {"id": "b0", "gpus": 8, "estimate_seconds": 20000, "deadlines": deadline}
    )
    for i, gpus in enumerate((8, 8, 16)):
        if i == 2:
            for job, who in (("b0", "team-b"), ("a0", "team-a"), ("a1", "team-a")):
                wait_for(
                    lambda: (
                        server.http.get(f"/v1/jobs/{job}", headers=bearer(who)).json()["state"]
                        == "running"
                    ),
                    timeout=20.0,
                )
        body = {"id": f"a{i}", "gpus": gpus, "estimate_seconds": 20000}
        submit(server, "team-a", {**body, "deadlines": [{"at": now + 80000 + 1000 * i}]})
    page, _ = open_as("team-a")
    cookie = next(c for c in page.context.cookies() if c["name"] == "chronus_token")
    assert cookie["httpOnly"] and cookie["secure"] and cookie["sameSite"] == "Strict"
    assert cookie["path"] == "/ui"

    page.goto(f"{page.url}jobs")
    rows = page.locator("tr[data-job]")
    assert sorted(rows.evaluate_all("rs => rs.map(r => r.dataset.job)")) == ["a0", "a1", "a2"]
    plan = server.http.get("/v1/plan", headers=bearer("team-a")).json()
    for job in ("a0", "a1", "a2"):
        api = server.http.get(f"/v1/jobs/{job}", headers=bearer("team-a")).json()
        row = page.locator(f'tr[data-job="{job}"]')
        assert row.get_attribute("data-state") == api["state"]
        assert "guaranteed" in cell(page, job, 4).inner_text()
        guaranteed = float(cell(page, job, 5).get_attribute("data-t"))
        assert abs(guaranteed - api["guaranteed"]["at"]) <= 1
    # The pending one: its planned start is its first reserved lease in the lease plan.
    pending = "a2"
    assert server.http.get("/v1/jobs/a2", headers=bearer("team-a")).json()["state"] == "pending"
    start = float(cell(page, pending, 6).get_attribute("data-t"))
    assert abs(start - plan["lease_plan"][pending][0]) <= 1
    finish = float(cell(page, pending, 7).get_attribute("data-t"))
    assert start < finish <= float(cell(page, pending, 5).get_attribute("data-t"))

    # The timeline: bars for the running jobs on their nodes, a reserved lease for the pending
    # one, deadline marks, and the now line; nothing of team-b's jobs but anonymous occupancy.
    page.goto(page.url.replace("/jobs", "/?span=1d"))
    svg = page.locator("svg.timeline")
    assert svg.locator('a[href="/ui/jobs/a0"] rect').count() >= 1
    assert svg.locator(f'a[href="/ui/jobs/{pending}"] rect[stroke-dasharray]').count() >= 1
    assert svg.locator("text.now").count() == 1
    # as a word: the static files' version in the page's links is hex ("...7b05da...")
    assert re.search(r"\bb0\b", page.content()) is None
    for span in ("1h", "7d"):
        page.click(f'.zoom a:text-is("{span}")')
        page.wait_for_url(re.compile(f"span={span}"))
        assert page.locator("svg.timeline rect").count() > 0

    # Another tenant's job does not exist for team-a, in the table or by its address.
    response = page.goto(page.url.split("/ui/")[0] + "/ui/jobs/b0")
    assert response.status == 404
    page.goto(page.url.split("/ui/")[0] + "/ui/cluster")
    assert page.locator("tr[data-tenant]").evaluate_all("rs => rs.map(r => r.dataset.tenant)") == [
        "team-a"
    ]
    assert page.locator('[data-count="busy"]').inner_text().startswith("24 ")


def test_cancel_own_job_only_with_the_page_token(server, open_as):
    submit(server, "team-a", {"id": "mine", "gpus": 1, "estimate_seconds": 90000})
    submit(server, "team-b", {"id": "theirs", "gpus": 1, "estimate_seconds": 90000})
    page, _ = open_as("team-a")
    base = page.url.split("/ui/")[0]
    # A forged form without the CSRF token is refused; so is another tenant's job.
    forged = page.request.post(f"{base}/ui/jobs/mine/cancel", form={"csrf": "nope"})
    assert forged.status == 403
    token = None
    page.goto(f"{base}/ui/jobs/mine")
    token = page.locator("#cancel input[name=csrf]").get_attribute("value")
    other = page.request.post(f"{base}/ui/jobs/theirs/cancel", form={"csrf": token})
    assert other.status == 404
    assert server.http.get("/v1/jobs/theirs", headers=bearer("team-b")).json()["state"] in (
        "pending",
        "running",
    )
    page.click("#cancel summary")  # the question first: one click does not cancel
    with page.expect_navigation():
        page.click("#cancel button")
    assert page.url == f"{base}/ui/jobs/mine", page.content()
    assert page.locator("#job-state").inner_text() == "cancelled"
    # The API forgets a cancelled job's address (404) and lists it as cancelled.
    assert server.http.get("/v1/jobs/mine", headers=bearer("team-a")).status_code == 404
    listed = server.http.get("/v1/jobs?state=cancelled", headers=bearer("team-a")).json()
    assert [j["id"] for j in listed["jobs"]] == ["mine"]
    assert page.locator('tr[data-event="cancel"]').count() == 1
    assert page.locator("#cancel").count() == 0
    # The cookie is for the view only: the JSON API does not take it.
    assert page.request.get(f"{base}/v1/jobs").status == 401


def test_the_page_follows_a_round_without_reloading(server, open_as):
    page, seen = open_as("admin")
    page.goto(page.url + "jobs?state=running")
    page.evaluate("window.stayed = true")
    submit(server, "team-b", {"id": "live1", "gpus": 1, "estimate_seconds": 50000})
    # An admin names every job by the service's own id, its tenant's scope included.
    page.wait_for_selector('tr[data-job="team-b:live1"][data-state="running"]', timeout=20000)
    assert page.evaluate("window.stayed") is True  # updated in place, not reloaded
    assert any("part=live" in u for u in seen.urls)
    # Headline figures are the numbers /metrics exports.
    page.goto(page.url.split("/ui/")[0] + "/ui/")
    metrics = server.http.get("/metrics").text
    made = re.search(r"^chronus_guarantees_made ([0-9.e+]+)$", metrics, re.M)
    assert float(page.locator('[data-figure="made"]').get_attribute("data-value")) == float(
        made.group(1)
    )


def test_bearer_header_is_served_as_is_and_nothing_else_is(server):
    http = server.http
    assert http.get("/ui/jobs", headers=bearer("team-b")).status_code == 200
    assert (
        http.get("/ui/jobs", headers={"Authorization": "Bearer wrong-token-0123456789"}).status_code
        == 401
    )
    # Read-only: the one change is POST .../cancel; nothing else takes a write.
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        assert http.request(method, "/ui/jobs/a0", headers=bearer("admin")).status_code == 405
    assert http.post("/ui/", headers=bearer("admin")).status_code == 405
    login = http.get("/ui/jobs", follow_redirects=False)
    assert login.status_code == 303 and login.headers["location"] == "/ui/login?next=%2Fui%2Fjobs"
    assert (
        http.get("/v1/jobs", headers={"Cookie": f"chronus_token={TOKEN['admin']}"}).status_code
        == 401
    )
    first = http.get("/ui/cluster?part=live", headers=bearer("team-a"))
    again = http.get(
        "/ui/cluster?part=live",
        headers={**bearer("team-a"), "If-None-Match": first.headers["etag"]},
    )
    assert again.status_code == 304
    page = http.get("/ui/", headers=bearer("team-a"))
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert re.findall(r'(?:src|href)="(https?:)?//', page.text) == []


def test_rows_are_grouped_by_tenant_cell_under_a_hived_config(tmp_path):
    config = Path(__file__).parent.parent / "placement" / "configs" / "rack-2x2.yaml"
    (tmp_path / "tokens.yaml").write_text(
        TOKENS.replace("tenant: team-a", "tenant: vcA").replace("tenant: team-b", "tenant: vcB")
    )
    args = ("--tokens", str(tmp_path / "tokens.yaml"), "--cluster", str(config), "--speed", "50")
    server = Server(tmp_path, *args).start()
    try:
        r = server.http.post(
            "/v1/jobs",
            headers=bearer("team-a"),
            json={"id": "x", "gpus": 8, "estimate_seconds": 9000},
        )
        assert r.status_code == 201, r.text
        wait_for(
            lambda: (
                server.http.get("/v1/jobs/x", headers=bearer("team-a")).json()["state"] == "running"
            ),
            timeout=20.0,
        )
        page = server.http.get("/ui/", headers=bearer("admin")).text
        assert "cells of vcA" in page and "unbound cells" in page
        cluster = server.http.get("/ui/cluster", headers=bearer("team-a")).text
        assert re.search(
            r'data-tenant="vcA">.*?<td class="num">8</td><td class="num">16</td>', cluster
        )
        assert "vcB" not in cluster
    finally:
        server.stop()
        server.http.close()


def test_jobs_table_filters_and_sorts(server, open_as):
    for i, gpus in enumerate((1, 3, 2)):
        submit(server, "team-b", {"id": f"sort{i}", "gpus": gpus, "estimate_seconds": 70000})
    submit(server, "team-a", {"id": "other-order", "gpus": 1, "estimate_seconds": 70000})
    page, _ = open_as("admin")
    page.goto(page.url + "jobs")
    page.fill("input[name=q]", "sort")
    # (Playwright's expect polls from its own world: the page's CSP forbids evaluating strings.)
    from playwright.sync_api import expect

    expect(page.locator("tr[data-job]")).to_have_count(3)
    expect(page.locator('tr[data-job="team-a:other-order"]')).to_have_count(0)
    expect(page).to_have_url(re.compile("q=sort"))  # kept in the address: survives a reload
    page.click('th a:text-is("GPUs")')
    page.wait_for_url(re.compile("sort=gpus"))
    jobs = page.locator("tr[data-job]").evaluate_all("rs => rs.map(r => r.dataset.job)")
    assert jobs == ["team-b:sort0", "team-b:sort2", "team-b:sort1"]
    page.click('th a:has-text("GPUs")')
    page.wait_for_url(re.compile("desc=1"))
    jobs = page.locator("tr[data-job]").evaluate_all("rs => rs.map(r => r.dataset.job)")
    assert jobs == ["team-b:sort1", "team-b:sort2", "team-b:sort0"]
