"""An upgrade of chronus under a browser's open pages: a real ``chronus serve`` run from a copy
of the package (an install), restarted on the same database from a copy whose templates or
static files changed, with the same service state."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

from ui_helpers import bearer

sys.path.insert(0, str(Path(__file__).parent.parent / "service"))
from serving import TOKENS, Server  # noqa: E402

ROOT = Path(__file__).parent.parent.parent
PACKAGES = ("chronus_py", "placement", "solvers")
LIVE = "/ui/jobs?part=live"
PAGE = "/ui/jobs"
DRAWN_BY = "X-Chronus-Rendering"


def install(where: Path) -> Path:
    for package in PACKAGES:
        shutil.copytree(
            ROOT / package, where / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    return where


def test_an_upgrade_redraws_what_an_older_server_drew(tmp_path, monkeypatch):
    """A poll's 304 is decided from the ETag a page had: an ETag of the body alone stayed the
    same across an upgrade that changed only a script or a style (the page kept the old ones,
    and its polls were 304s), and a template changed on disk under a running server was
    drawn at once while the ETags handed out before still answered 304. The ETag now holds
    what drew the page: the same install restarted still answers 304, a changed template or
    static file gives a 200, and an open page whose polls name an older drawing is reloaded."""
    old = install(tmp_path / "old")
    template = install(tmp_path / "template")
    jobs = template / "chronus_py/ui/templates/jobs_live.html"
    assert "No jobs yet{%" in jobs.read_text()
    jobs.write_text(jobs.read_text().replace("No jobs yet{%", "Nothing submitted yet{%"))
    style = install(tmp_path / "style")
    with (style / "chronus_py/ui/static/ui.css").open("a") as css:
        css.write("\nmain { max-width: 90rem; }\n")
    state = tmp_path / "state"
    state.mkdir()
    (state / "tokens.yaml").write_text(TOKENS)
    a = bearer("team-a")

    def serve(install: Path) -> Server:
        monkeypatch.setenv("PYTHONPATH", str(install))
        # the clock (speed 0.001) stays within the pages' one-minute step the whole test
        args = ("--tokens", str(state / "tokens.yaml"), "--nodes", "1", "--speed", "0.001")
        return Server(state, *args).start()

    server = serve(old)
    try:
        live = server.http.get(LIVE, headers=a)
        page = server.http.get(PAGE, headers=a)
        assert live.status_code == page.status_code == 200
        assert "No jobs yet of team-a" in live.text
        drawn_by = re.search(f'"{DRAWN_BY}": "([0-9a-f]+)"', page.text).group(1)
        # a template edited under the running server is not drawn until it restarts
        edited = old / "chronus_py/ui/templates/jobs_live.html"
        text = edited.read_text()
        edited.write_text("edited")
        assert server.http.get(LIVE, headers=a).text == live.text
        edited.write_text(text)
    finally:
        server.stop()

    def polls(install: Path) -> dict:
        server = serve(install)
        try:
            return {
                "live": server.http.get(LIVE, headers={**a, "If-None-Match": live.headers["etag"]}),
                "page": server.http.get(PAGE, headers={**a, "If-None-Match": page.headers["etag"]}),
                "open page": server.http.get(
                    LIVE, headers={**a, "HX-Request": "true", DRAWN_BY: drawn_by}
                ),
            }
        finally:
            server.stop()

    same = polls(old)
    assert {k: r.status_code for k, r in same.items()} == {
        "live": 304,
        "page": 304,
        "open page": 200,
    }
    assert same["open page"].headers["etag"] == live.headers["etag"]

    for changed in (template, style):
        after = polls(changed)
        assert after["live"].status_code == 200 and after["page"].status_code == 200, changed
        assert after["live"].headers["etag"] != live.headers["etag"]
        assert after["open page"].status_code == 204
        assert after["open page"].headers["hx-refresh"] == "true"
        if changed == template:
            assert "Nothing submitted yet of team-a" in after["live"].text
