"""The web view over plain HTTP, as a script or a hostile client would use it against a real
``chronus serve``: what it refuses, and how it says so (a 4xx page with one line naming the
field at fault, never a 500 or a traceback)."""

from __future__ import annotations

import re

import pytest
from ui_helpers import bearer


def error_line(text: str) -> str:
    found = re.search(r'<p class="error">([^<]*)</p>', text)
    assert found, text[:2000]
    return found.group(1)


@pytest.mark.parametrize(
    ("address", "line"),
    [
        ("/ui/jobs?sort=id&sort=gpus", "sort: given more than once"),
        ("/ui/?span=1h&span=7d", "span: given more than once"),
        ("/ui/jobs?page=2", "page: unknown query parameter (have: sort, desc, state, kind, q,"),
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
    sort=gpus`` sorted by GPUs and ``?page=2`` showed the first page, without a word; a
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
