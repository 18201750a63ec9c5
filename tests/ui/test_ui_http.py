"""The web view over plain HTTP, as a script or a hostile client would use it against a real
``chronus serve``: what it refuses, and how it says so (a 4xx page with one line naming the
field at fault, never a 500 or a traceback)."""

from __future__ import annotations

import re

import pytest
from polling import wait_for
from serving import running
from ui_helpers import TOKEN, bearer


def error_line(text: str) -> str:
    found = re.search(r'<p class="error">([^<]*)</p>', text)
    assert found, text[:2000]
    return found.group(1)


@pytest.mark.parametrize(
    ("address", "line"),
    [
        ("/ui/jobs?sort=id&sort=gpus", "sort: given more than once"),
        ("/ui/?span=1h&span=7d", "span: given more than once"),
        ("/ui/jobs?limit=500", "limit: unknown query parameter (have: sort, desc, state, kind,"),
        ("/ui/cluster?span=1h", "span: unknown query parameter (have: part)"),
        ("/ui/jobs?desc=2", "desc: expected 1 (descending) or 0"),
        ("/ui/jobs?kind=other", "kind: unknown kind (have: guaranteed, pool, best_effort, elas"),
        ("/ui/jobs?state=done", "state: unknown state (have: pending, running, finished,"),
        ("/ui/jobs?q=" + "x" * 101, "q: at most 100 characters"),
        ("/ui/?span=2h", "span: unknown span (have: 1h, 6h, 1d, 3d, 7d)"),
    ],
)
def test_a_bad_query_is_a_422_naming_the_field(server, address, line):
    """Starlette kept the last of a repeated parameter and ignored unknown ones: ``?sort=id&
    sort=gpus`` sorted by GPUs and ``?limit=500`` showed 200 rows, without a word; a
    ``q`` of any length was echoed into the page fourteen times (3,000 characters made a
    123 KB page) while only its first 100 filtered."""
    r = server.http.get(address, headers=bearer("team-a"))
    assert r.status_code == 422, r.text[:500]
    assert error_line(r.text).replace("&#39;", "'").startswith(line)
    assert len(r.content) < 4000


def test_the_filter_form_as_a_browser_sends_it_is_taken(server):
    """What the jobs page's own form sends (an empty ``desc``, every field once) is served."""
    address = "/ui/jobs?q=x&state=&kind=pool&sort=gpus&desc="
    assert server.http.get(address, headers=bearer("team-a")).status_code == 200
    assert server.http.get(address + "&part=live", headers=bearer("team-a")).status_code == 200


def test_a_cancel_through_an_https_proxy_is_taken_and_a_cross_site_one_is_not(server):
    """Behind the README's HTTPS reverse proxy the browser's ``Origin`` is
    ``https://chronus.example`` while the request reaches the server as plain HTTP, its
    ``Host`` whatever the proxy sends: comparing the two refused every cancel from the view.
    The browser's own ``Sec-Fetch-Site`` says whether the form was this site's."""
    r = server.http.post(
        "/v1/jobs",
        headers=bearer("team-a"),
        json={"id": "proxied", "gpus": 1, "estimate_seconds": 90000},
    )
    assert r.status_code == 201, r.text
    login = server.http.post(
        "/ui/login", data={"token": TOKEN["team-a"]}, headers={"Sec-Fetch-Site": "same-origin"}
    )
    assert login.status_code == 303, login.text
    cookie = {"Cookie": f"chronus_token={login.cookies['chronus_token']}"}
    page = server.http.get("/ui/jobs/proxied", headers=cookie)
    token = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text).group(1)
    proxied = {**cookie, "Host": "chronus.example", "Origin": "https://chronus.example"}
    for site, status in (("cross-site", 403), ("same-site", 403), ("same-origin", 303)):
        r = server.http.post(
            "/ui/jobs/proxied/cancel",
            data={"csrf": token},
            headers={**proxied, "Sec-Fetch-Site": site},
        )
        assert r.status_code == status, (site, r.text[:300])
    assert r.headers["location"] == "/ui/jobs/proxied"
    listed = server.http.get("/v1/jobs?state=cancelled", headers=bearer("team-a")).json()
    assert "proxied" in [j["id"] for j in listed["jobs"]]


def test_empty_pages_say_what_to_do(server):
    """A tenant with no jobs saw "no jobs" and a timeline of empty rows, and a filter that
    matched nothing said the same: neither how to submit one nor how to see the rest."""
    jobs = server.http.get("/ui/jobs", headers=bearer("team-b")).text
    assert "No jobs yet of team-b. Submit one with <code>chronus submit" in jobs
    none = server.http.get("/ui/jobs?state=running&q=zzz", headers=bearer("team-b")).text
    assert 'No job matches these filters. <a href="/ui/jobs">Show all jobs</a>' in none
    timeline = server.http.get("/ui/", headers=bearer("team-b")).text
    assert "Nothing runs or is planned for team-b. Submit a job with" in timeline


def test_the_jobs_table_pages_through_every_active_job(server):
    """The table showed the first 200 rows of the choice and no way on: at 5,000 jobs, rows
    201 on were out of reach but by guessing a filter (and ``?page=2`` was ignored)."""
    for i in range(201):
        r = server.http.post(
            "/v1/jobs",
            headers=bearer("team-a"),
            json={"id": f"pg-{i:03d}", "gpus": 1, "estimate_seconds": 90000},
        )
        assert r.status_code == 201, r.text

    def first_page() -> str:  # (a read of the service serves the pages for a second)
        return server.http.get("/ui/jobs?q=pg-&sort=id", headers=bearer("team-a")).text

    wait_for(lambda: "201 job(s), rows 1–200" in first_page(), timeout=20.0)
    first = first_page()
    assert re.findall(r'data-job="(pg-\d+)"', first) == [f"pg-{i:03d}" for i in range(200)]
    assert '<a href="/ui/jobs?sort=id&amp;q=pg-&amp;page=2" rel="next">' in first
    second = server.http.get("/ui/jobs?sort=id&q=pg-&page=2", headers=bearer("team-a")).text
    assert "201 job(s), rows 201–201" in second
    assert re.findall(r'data-job="(pg-\d+)"', second) == ["pg-200"]
    assert '<a href="/ui/jobs?sort=id&amp;q=pg-" rel="prev">' in second
    assert 'rel="next"' not in second
    live = server.http.get("/ui/jobs?sort=id&q=pg-&page=2&part=live", headers=bearer("team-a"))
    assert re.findall(r'data-job="(pg-\d+)"', live.text) == ["pg-200"]
    for page, line in (("3", "page: no page 3: 201 job(s) make 2 page(s)"), ("0", "page: ex")):
        r = server.http.get(f"/ui/jobs?q=pg-&page={page}", headers=bearer("team-a"))
        assert r.status_code == 422 and error_line(r.text).startswith(line), r.text[:300]


def test_a_typed_logout_address_asks_and_changes_nothing(server):
    """``GET /ui/logout`` (typed, or a bookmark) answered the API's JSON 405."""
    r = server.http.get("/ui/logout", headers=bearer("team-b"))
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert '<form method="post" action="/ui/logout">' in r.text
    assert "tenant <b>team-b</b>" in r.text and "set-cookie" not in r.headers
    gone = server.http.get("/ui/logout", follow_redirects=False)
    assert gone.status_code == 303 and gone.headers["location"] == "/ui/login"


@pytest.mark.parametrize(
    ("given", "then"),
    [
        ("/ui/jobs?state=running", "/ui/jobs?state=running"),
        ("//evil.example/ui/", "/ui/"),
        ("/ui//evil.example", "/ui/"),
        ("/ui/\\evil.example", "/ui/"),
        ("https://evil.example/ui/", "/ui/"),
        ("/v1/jobs", "/ui/"),
        ("/ui/logout", "/ui/"),
        ("/ui/jobs\r\nSet-Cookie: x=1", "/ui/"),
    ],
)
def test_a_login_goes_on_only_to_a_page_of_the_view(server, given, then):
    """``next`` names where a login goes on to: a page of this view, never another site."""
    r = server.http.post("/ui/login", data={"token": TOKEN["team-b"], "next": given})
    assert r.status_code == 303 and r.headers["location"] == then


def test_a_jobs_history_writes_placements_as_the_page_does(server):
    """The history's placements were raw JSON (``{"node0": [2, 3]}``) under facts that write
    the same placement ``node0: 2-3``."""
    r = server.http.post(
        "/v1/jobs",
        headers=bearer("team-a"),
        json={"id": "placed", "gpus": 1, "estimate_seconds": 90000},
    )
    assert r.status_code == 201, r.text

    def running() -> list[str]:  # this one, or (on a cluster the module filled) another
        listed = server.http.get("/v1/jobs?state=running", headers=bearer("team-a")).json()
        return [j["id"] for j in listed["jobs"]]

    wait_for(running, timeout=20.0)
    page = server.http.get(f"/ui/jobs/{running()[0]}", headers=bearer("team-a")).text
    found = re.search(r'<tr data-event="start">.*?<td class="placement">([^<]*)</td>', page)
    assert found and re.fullmatch(r"node\d+: \d+(-\d+|,\d+)*", found.group(1)), page[-1500:]


def test_a_guarantee_reads_as_a_time_from_now_not_the_clock_s_seconds(server):
    """The admission's reason is the API's words, "guaranteed to finish by 57606.4" (on a
    Slurm or Kubernetes clock a Unix time): the jobs table showed it under "guaranteed",
    beside the column that says the same from now, and the job's page showed only it."""
    r = server.http.post(
        "/v1/jobs",
        headers=bearer("team-a"),
        json={"id": "promised", "gpus": 1, "estimate_seconds": 600, "deadlines": [{"at": 200000}]},
    )
    assert r.status_code == 201 and r.json()["admission"]["decision"] == "guaranteed", r.text
    at = r.json()["admission"]["deadline"]["at"]

    def listed() -> str | None:  # once a round has put it in the view
        text = server.http.get("/ui/jobs?q=promised", headers=bearer("team-a")).text
        return text if 'data-job="promised"' in text else None

    table = wait_for(listed, timeout=20.0)
    cell = re.search(r'<tr data-job="promised".*?<td class="decision"[^>]*>(.*?)</td>', table, re.S)
    assert cell and cell.group(1) == "guaranteed", table[-2000:]
    page = server.http.get("/ui/jobs/promised", headers=bearer("team-a")).text
    said = re.search(r"<dt>admission</dt><dd>([^<]*)</dd>", page)
    assert said and re.fullmatch(
        rf"guaranteed — for its deadline in \d+d \d+h \({at:.0f} s\)",
        said.group(1),
    ), said and said.group(1)


def test_a_jobs_history_writes_deadlines_and_estimates_as_the_page_does(tmp_path):
    """The history wrote the clock's raw seconds ("guaranteed to finish by 200000", "deadline
    200000", "3600 s → 7 s") under facts that say "for its deadline in 2d 7h (200000 s)", and
    its actions as codes ("admit:guaranteed"). A server of its own: the module's is full, and
    progress re-estimates only a running job."""
    with running(tmp_path, "--nodes", "1", "--speed", "50") as server:
        r = server.http.post(
            "/v1/jobs",
            headers=bearer("team-a"),
            json={
                "id": "storied",
                "gpus": 1,
                "estimate_seconds": 3600,
                "iterations": 1000,
                "deadlines": [{"at": 200000}],
            },
        )
        assert r.status_code == 201 and r.json()["admission"]["decision"] == "guaranteed", r.text

        def progressed() -> bool:  # once it has run past its restart, progress re-estimates it
            answer = server.http.post(
                "/v1/jobs/storied/progress", headers=bearer("team-a"), json={"iterations_done": 100}
            )
            return answer.status_code == 200 and answer.json()["reestimated"]

        wait_for(progressed, timeout=20.0)
        page = server.http.get("/ui/jobs/storied", headers=bearer("team-a")).text
        found = re.findall(
            r'<tr data-event="([^"]+)">(?:<td[^>]*>[^<]*</td>){2}<td>([^<]*)</td>'
            r"<td>([^<]*)</td>",
            page,
        )
        rows = {event: detail for event, _, detail in found}
        assert ("admit:guaranteed", "admit: guaranteed") in {(e, w) for e, w, _ in found}, found
        when = r"in (\d+d \d+h|\d+h \d\dm|\d+m)"
        assert re.fullmatch(rf"for its deadline {when} \(200000 s\)", rows["admit:guaranteed"]), (
            rows
        )
        assert re.fullmatch(rf"deadline {when} \(200000 s\)", rows["promised"]), rows
        assert re.fullmatch(r"1h 00m → (\d+h \d\dm|\d+m) \(3600 s → \d+ s\)", rows["estimate"]), (
            rows
        )


BROWSER = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}
SCRIPT = {"Accept": "application/json"}


@pytest.mark.parametrize("path", ["/ui/nope", "/ui/jobs/x/y", "/ui/..%2f", "/ui/static/no.css"])
def test_an_unknown_page_is_a_page_saying_so_and_json_only_to_a_script(server, path):
    """A mistyped or stale address under ``/ui`` answered the API's JSON 404, which a browser
    shows as a line of raw JSON with no way back into the view."""
    r = server.http.get(path, headers={**bearer("team-a"), **BROWSER})
    assert r.status_code == 404 and r.headers["content-type"].startswith("text/html"), r.text
    assert "<h1>404 · not found</h1>" in r.text
    assert error_line(r.text).startswith("There is no page &#39;/ui/")
    assert re.search(r'<a href="/ui/(jobs)?">Back to the (timeline|jobs)</a>', r.text)
    assert "tenant <b>team-a</b>" in r.text  # the view's header, with its navigation
    api = server.http.get(path, headers={**bearer("team-a"), **SCRIPT})
    assert api.status_code == 404 and api.json() == {"error": "Not Found", "field": None}


@pytest.mark.parametrize(
    ("method", "path", "allow", "line"),
    [
        ("DELETE", "/ui/jobs", "GET, HEAD", "&#39;/ui/jobs&#39; does not take DELETE (it takes"),
        ("GET", "/ui/jobs/x/cancel", "POST", "&#39;/ui/jobs/x/cancel&#39; takes a form&#39;s"),
        ("POST", "/ui", "GET, HEAD", "&#39;/ui&#39; does not take POST (it takes GET, HEAD)"),
        ("PUT", "/ui/static/ui.css", "GET, HEAD", "&#39;/ui/static/ui.css&#39; does not take"),
    ],
)
def test_a_method_a_page_does_not_take_is_a_405_page(server, method, path, allow, line):
    r = server.http.request(method, path, headers={**bearer("team-a"), **BROWSER})
    allowed = set(allow.split(", "))
    assert r.status_code == 405 and set(r.headers["allow"].split(", ")) == allowed, r.text
    assert r.headers["content-type"].startswith("text/html")
    assert error_line(r.text).startswith(line)
    api = server.http.request(method, path, headers={**bearer("team-a"), **SCRIPT})
    assert api.status_code == 405 and set(api.headers["allow"].split(", ")) == allowed
    assert api.json() == {"error": "Method Not Allowed", "field": None}


def test_another_tenants_job_is_answered_as_a_missing_one(server):
    """A job of team-b's and one that never was are one answer to team-a, whichever way it
    asks: a 404 page in the view's look that says so and leads back to the jobs (a script
    gets the API's JSON), never a word that the first exists."""
    r = server.http.post(
        "/v1/jobs",
        headers=bearer("team-b"),
        json={"id": "b-secret", "gpus": 1, "estimate_seconds": 9e4},
    )
    assert r.status_code == 201, r.text
    answers = {}
    for job in ("b-secret", "never-was"):
        seen = []
        for method, path in (
            ("GET", f"/ui/jobs/{job}"),
            ("GET", f"/ui/jobs/{job}?part=live"),
            ("POST", f"/ui/jobs/{job}/cancel"),
        ):
            form = {"data": {"csrf": ""}} if method == "POST" else {}
            r = server.http.request(method, path, headers={**bearer("team-a"), **BROWSER}, **form)
            assert r.status_code == 404 and r.headers["content-type"].startswith("text/html")
            assert '<a href="/ui/jobs">Back to the jobs</a>' in r.text
            seen.append(r.text.replace(job, "ID"))
            api = server.http.request(method, path, headers={**bearer("team-a"), **SCRIPT}, **form)
            assert api.status_code == 404
            seen.append(api.text.replace(job, "ID"))
        answers[job] = seen
    assert answers["b-secret"] == answers["never-was"]
    assert error_line(answers["never-was"][0]) == (
        "There is no job &#39;ID&#39; that you can see: it does not exist, or it is not yours."
    )
    assert server.http.get("/ui/jobs/b-secret", headers=bearer("team-b")).status_code == 200


def test_a_refused_cancel_leads_back_to_the_jobs_page(server):
    """A cancel from a form whose token is stale (the server restarted, or the page was open
    for another login) is refused; its page led back to the list, not to the job."""
    r = server.http.post(
        "/v1/jobs",
        headers=bearer("team-a"),
        json={"id": "stale", "gpus": 1, "estimate_seconds": 9e4},
    )
    assert r.status_code == 201, r.text
    login = server.http.post(
        "/ui/login", data={"token": TOKEN["team-a"]}, headers={"Sec-Fetch-Site": "same-origin"}
    )
    cookie = {"Cookie": f"chronus_token={login.cookies['chronus_token']}"}
    r = server.http.post(
        "/ui/jobs/stale/cancel",
        data={"csrf": "0" * 64},
        headers={**cookie, **BROWSER, "Sec-Fetch-Site": "same-origin"},
    )
    assert r.status_code == 403, r.text
    assert error_line(r.text) == "csrf: missing or wrong CSRF token: reload the page"
    assert '<a href="/ui/jobs/stale">Back to the job</a>' in r.text


def test_an_admin_follows_a_link_a_tenant_shared_and_another_tenant_does_not(server):
    """A tenant's job page is at its id as the tenant names it (``/ui/jobs/shared``, the job
    ``team-a:shared``). An admin names every job by its full id, so the link a tenant shared
    was a 404 to the admin; it now leads to the job's own page (or, when several tenants name
    a job so, to a page listing them), while another tenant still gets the missing job's 404."""
    for who, job in (("team-a", "shared"), ("team-a", "twice"), ("team-b", "twice")):
        body = {"id": job, "gpus": 1, "estimate_seconds": 9e4}
        r = server.http.post("/v1/jobs", headers=bearer(who), json=body)
        assert r.status_code == 201, r.text
    shared = server.http.get("/ui/jobs/shared", headers=bearer("team-a"))
    assert shared.status_code == 200 and "<h1>shared</h1>" in shared.text

    for part in ("", "?part=live"):
        r = server.http.get(f"/ui/jobs/shared{part}", headers={**bearer("admin"), **BROWSER})
        assert r.status_code == 303, r.text[:500]
        assert r.headers["location"] == f"/ui/jobs/team-a%3Ashared{part}"
        page = server.http.get(r.headers["location"], headers=bearer("admin"))
        assert page.status_code == 200 and "<h1>team-a:shared</h1>" in page.text
        assert "<dt>tenant</dt><dd>team-a</dd>" in page.text

    r = server.http.get("/ui/jobs/twice", headers={**bearer("admin"), **BROWSER})
    assert r.status_code == 300, r.text[:500]
    assert re.findall(r'<li><a href="([^"]+)">([^<]+)</a></li>', r.text) == [
        ("/ui/jobs/team-a%3Atwice", "team-a:twice"),
        ("/ui/jobs/team-b%3Atwice", "team-b:twice"),
    ]

    never = server.http.get("/ui/jobs/never-shared", headers={**bearer("admin"), **BROWSER})
    assert never.status_code == 404
    assert error_line(never.text) == "There is no job &#39;never-shared&#39;."
    other = server.http.get("/ui/jobs/shared", headers={**bearer("team-b"), **BROWSER})
    missing = server.http.get("/ui/jobs/never-was", headers={**bearer("team-b"), **BROWSER})
    assert other.status_code == missing.status_code == 404
    assert other.text.replace("shared", "ID") == missing.text.replace("never-was", "ID")
    twice = server.http.get("/ui/jobs/twice", headers=bearer("team-b"))
    assert twice.status_code == 200 and "<dt>tenant</dt><dd>team-b</dd>" in twice.text
