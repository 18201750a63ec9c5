"""What an operator and a sloppy or hostile client do to a real ``chronus serve`` beyond
``test_hostile_clients.py``: heads that never end, odd query strings, a second daemon on the
same database, a database it cannot read, a full disk. Each is refused in a JSON 4xx/5xx or in
one line at start, never with a traceback, and no accepted job is lost."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys

import pytest
from polling import wait_for
from serving import ADMIN, TOKENS, A, Server, free_port, running

from chronus_py.backends.sim import SimBackend
from chronus_py.service.connections import MAX_HEAD, MAX_URL
from chronus_py.service.core import ApiError, Caller, Service
from chronus_py.service.db import Database
from chronus_py.service.jobspec import TENANT_RULE
from chronus_py.service.rounds import SchedulerSettings

JOB = {"gpus": 1, "estimate_seconds": 600, "deadlines": [{"at": 900000}]}


@pytest.fixture(scope="module", params=["0", "1"], ids=["one-process", "a-front"])
def server(tmp_path_factory, request):
    with running(
        tmp_path_factory.mktemp("edges"), "--nodes", "2", "--http-workers", request.param
    ) as server:
        yield server
    log = server.log.read_text()
    assert "Traceback" not in log, log


def exchange(server: Server, data: bytes, *, piece: int | None = None) -> bytes:
    """Send ``data`` (in writes of ``piece`` bytes, if given) and read until the server
    closes the connection or stops answering for a second."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    try:
        step = piece or len(data)
        for i in range(0, len(data), step):
            sock.sendall(data[i : i + step])
        sock.settimeout(1.0)
        out = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except (TimeoutError, ConnectionResetError):
                return out
            if not chunk:
                return out
            out += chunk
    finally:
        sock.close()


def get(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: {A['Authorization']}\r\n\r\n".encode()


def test_a_head_over_the_bound_is_a_431_and_one_within_it_in_tiny_writes_is_served(server):
    """A header that never ends was buffered whole (73 MB in 8 s from one connection before
    the read timeout's 408); now a head over ``MAX_HEAD`` is refused as it arrives. A head
    within the bound is served however it is cut up, and pipelined requests are counted
    each on its own."""
    head = get("/v1/jobs?limit=1").replace(b"\r\n\r\n", b"\r\nX-Big: ")
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.sendall(head)
    try:  # a header that never ends, until the server closes on it
        for _ in range(1024):
            sock.sendall(b"y" * 4096)
    except OSError:
        pass
    data = sock.recv(65536)
    sock.close()
    status, _, body = data.partition(b"\r\n\r\n")
    assert status.startswith(b"HTTP/1.1 431 "), data
    assert json.loads(body) == {
        "error": f"the request line and headers are over {MAX_HEAD} bytes",
        "field": None,
    }

    near = get("/v1/jobs?limit=1").replace(b"\r\n\r\n", b"\r\nX-Pad: " + b"p" * 60000 + b"\r\n\r\n")
    assert exchange(server, near, piece=997).startswith(b"HTTP/1.1 200 ")
    padded = get("/healthz").replace(b"\r\n\r\n", b"\r\nX-Pad: " + b"p" * 900 + b"\r\n\r\n")
    out = exchange(server, padded * 200)  # 200 KB in one write, each head 1 KB
    assert out.count(b"HTTP/1.1 200 ") == 200 and b" 431 " not in out


@pytest.mark.parametrize("length", [MAX_URL + 1, 70_000, 300_000])
def test_a_url_too_long_to_parse_is_a_414(server, length):
    """httptools parses URLs of at most 64 KB: a longer one was the 400 of a malformed request
    (and, past the head's bound, a 431)."""
    path = "/v1/jobs/" + "a" * (length - len("/v1/jobs/"))
    status, _, body = exchange(server, get(path)).partition(b"\r\n\r\n")
    assert status.startswith(b"HTTP/1.1 414 "), status
    assert json.loads(body) == {
        "error": f"the request's URL is over {MAX_URL} bytes",
        "field": None,
    }


def test_a_404_repeats_a_long_id_cut_short(server):
    """A 404 repeated the id it was asked for whole: 60 KB sent back for a 60 KB path."""
    long_id = "b" * 60_000
    for path in (f"/v1/jobs/{long_id}", f"/v1/jobs?after={long_id}"):
        r = server.http.get(path, headers=A)
        assert r.status_code == 404 and len(r.content) < 400, (r.status_code, len(r.content))
        assert r.json()["error"].startswith("no job 'bbbb") and "..." in r.json()["error"]
    r = server.http.get("/v1/jobs/" + "c" * 120, headers=A)
    assert r.json()["error"] == f"no job {'c' * 120!r}"  # an id of a legal length, whole


@pytest.mark.parametrize("limit", ["%C2%B2", "%E2%91%A0", "%EF%BC%91"])  # ², ①, fullwidth 1
def test_a_limit_of_digits_that_are_not_ascii_is_a_422(server, limit):
    """``str.isdigit`` takes "²" and "①", which ``int`` refuses: it was a 503 "internal
    error" and a traceback in the log."""
    r = server.http.get(f"/v1/jobs?limit={limit}", headers=A)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "limit"


@pytest.mark.parametrize(
    "query, field",
    [
        ("state=running&state=pending", "state"),
        ("limit=1&limit=5", "limit"),
        ("after=a&after=b", "after"),
        ("tenant=team-a&tenant=team-b", "tenant"),
    ],
)
def test_a_list_parameter_given_twice_is_a_422_naming_it(server, query, field):
    """It was the last one, silently: ``?state=running&state=pending`` listed pending jobs."""
    r = server.http.get(f"/v1/jobs?{query}", headers=A)
    assert r.status_code == 422, r.text
    assert r.json() == {"error": "given more than once", "field": field}


@pytest.mark.parametrize("tenant", ["", "a:b", "team a"])
def test_a_tenant_to_list_that_no_tenant_can_be_named_is_a_422(server, tenant):
    """``?tenant=`` listed nothing, as if a tenant of no name had no jobs; the schema says what
    a tenant's name may be, and the answer follows it."""
    r = server.http.get("/v1/jobs", params={"tenant": tenant}, headers=ADMIN)
    assert r.status_code == 422, r.text
    assert r.json() == {"error": TENANT_RULE, "field": "tenant"}


@pytest.mark.parametrize("query", ["dryrun=true", "dry-run=true", "dry_run=true&dry_run=false"])
def test_a_misspelt_or_repeated_dry_run_submits_nothing(server, query):
    """``POST /v1/jobs?dryrun=true`` submitted the job its client only meant to try."""
    before = server.http.get("/v1/jobs?limit=10000", headers=A).json()["jobs"]
    r = server.http.post(f"/v1/jobs?{query}", headers=A, json=JOB)
    assert r.status_code == 422, r.text
    assert r.json()["field"] in ("dryrun", "dry-run", "dry_run")
    assert server.http.get("/v1/jobs?limit=10000", headers=A).json()["jobs"] == before


def serve_once(workdir, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """``chronus serve ARGS`` run to its end (a start refused)."""
    return subprocess.run(
        [sys.executable, "-m", "chronus_py", "serve", *args],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_a_second_daemon_on_the_same_database_is_refused_in_one_line(serve, tmp_path):
    """A second ``chronus serve`` on another port but the same ``--db`` ran alongside the
    first, both admitting and starting jobs from one database and one simulated cluster."""
    (tmp_path / "tokens.yaml").write_text(TOKENS)
    first = serve("--tokens", str(tmp_path / "tokens.yaml"), "--nodes", "2")
    assert first.http.post("/v1/jobs", headers=A, json={**JOB, "id": "kept"}).status_code == 201
    second = serve_once(
        tmp_path,
        "--tokens",
        "tokens.yaml",
        "--listen",
        f"127.0.0.1:{free_port()}",
        "--db",
        str(tmp_path / "chronus.db"),
    )
    assert second.returncode == 2
    assert second.stderr.splitlines() == [
        f"chronus serve: {tmp_path / 'chronus.db'}: in use by another chronus serve "
        f"(pid {first.proc.pid}); stop it or give another --db"
    ]
    assert first.http.get("/v1/jobs/kept", headers=A).status_code == 200
    first.kill()  # its lock ends with it: a restart at once takes the database
    again = Server(tmp_path, "--tokens", str(tmp_path / "tokens.yaml"), "--nodes", "2")
    try:
        again.start()
        assert again.http.get("/v1/jobs/kept", headers=A).status_code == 200
    finally:
        again.stop()
        again.http.close()


@pytest.mark.parametrize("workers", ["0", "1"], ids=["one-process", "a-front"])
def test_a_hang_up_stops_the_daemon_cleanly(serve, tmp_path, workers):
    """SIGHUP (the terminal it was started from closed) killed the daemon without its clean
    stop; it now stops as SIGTERM does: exit 0, the database closed, and what it accepted is
    there for the next start."""
    (tmp_path / "tokens.yaml").write_text(TOKENS)
    args = ("--tokens", str(tmp_path / "tokens.yaml"), "--nodes", "2", "--http-workers", workers)
    first = serve(*args)
    assert first.http.post("/v1/jobs", headers=A, json={**JOB, "id": "kept"}).status_code == 201
    first.proc.send_signal(signal.SIGHUP)
    assert first.proc.wait(timeout=30) == 0
    assert '"event": "stopped"' in first.log.read_text()
    again = serve(*args)
    assert again.http.get("/v1/jobs/kept", headers=A).status_code == 200


def test_a_tenants_longest_id_survives_a_restart(serve, tmp_path):
    """A tenant's job is kept as ``TENANT:ID``: a 128-character id was accepted, then refused
    by the request's rule when the next start read it back, and ``chronus serve`` could not
    start again (a traceback)."""
    (tmp_path / "tokens.yaml").write_text(TOKENS)
    args = ("--tokens", str(tmp_path / "tokens.yaml"), "--nodes", "2")
    first = serve(*args)
    longest = "z" * 128
    assert first.http.post("/v1/jobs", headers=A, json={**JOB, "id": longest}).status_code == 201
    first.kill()
    again = serve(*args)
    assert again.http.get(f"/v1/jobs/{longest}", headers=A).json()["id"] == longest


def test_a_stored_job_that_cannot_be_read_back_is_one_line_naming_it(serve, tmp_path):
    """Should a row ever be refused when read back (a rule tightened by an upgrade), the start
    stops in one line naming the database and the job, not a traceback naming neither."""
    (tmp_path / "tokens.yaml").write_text(TOKENS)
    first = serve("--tokens", str(tmp_path / "tokens.yaml"), "--nodes", "2")
    assert first.http.post("/v1/jobs", headers=A, json={**JOB, "id": "odd"}).status_code == 201
    first.stop()
    db = tmp_path / "chronus.db"
    with sqlite3.connect(db) as conn:
        spec = json.loads(
            conn.execute("SELECT spec FROM job WHERE id = 'team-a:odd'").fetchone()[0]
        )
        conn.execute(
            "UPDATE job SET spec = ? WHERE id = 'team-a:odd'", (json.dumps({**spec, "gpus": "x"}),)
        )
    done = serve_once(
        tmp_path, "--nodes", "2", "--listen", f"127.0.0.1:{free_port()}", "--db", str(db)
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"chronus serve: {db}: job 'team-a:odd': cannot be read back: gpus: expected an integer "
        ">= 1, got 'x'"
    ]


@pytest.mark.parametrize("job_id", [".", ".."])
def test_an_id_a_url_would_drop_is_refused(server, job_id):
    """``GET /v1/jobs/..`` is ``GET /v1/`` to curl and httpx: such a job could be neither read
    nor cancelled."""
    r = server.http.post("/v1/jobs", headers=A, json={**JOB, "id": job_id})
    assert r.status_code == 422 and r.json()["field"] == "id", r.text


def test_databases_and_listen_addresses_it_cannot_use_are_one_line(tmp_path):
    """A schema version that is not a number, a ``--db`` whose directory cannot be made and a
    port of digits that are not ASCII each ended in a traceback."""
    bad = tmp_path / "other.db"
    with sqlite3.connect(bad) as conn:
        conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("INSERT INTO meta VALUES ('schema_version', 'v2')")
    cases = [
        (("--db", str(bad)), f"chronus serve: {bad}: schema version 'v2' is not a number"),
        (
            ("--db", str(tmp_path / "file" / "sub" / "c.db")),
            f"chronus serve: --db: cannot make {tmp_path / 'file' / 'sub'}",
        ),
        (("--listen", "127.0.0.1:①"), "chronus serve: --listen: expected HOST:PORT"),
        # a bracket left open was taken as host ::1
        (("--listen", "[::1:8080"), "chronus serve: --listen: expected HOST:PORT"),
        (("--listen", "[::1]]:8080"), "chronus serve: --listen: expected HOST:PORT"),
    ]
    (tmp_path / "file").write_text("a file, not a directory")
    for args, line in cases:
        listen = () if "--listen" in args else ("--listen", f"127.0.0.1:{free_port()}")
        done = serve_once(tmp_path, "--nodes", "2", *listen, *args)
        assert done.returncode == 2, done.stderr
        assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith(line), done.stderr


def _can_mount() -> bool:
    return os.geteuid() == 0 and shutil.which("mount") is not None


@pytest.fixture
def full_disk(tmp_path):
    """A 2 MB tmpfs at ``tmp_path/disk``, and a function that fills it."""
    if not _can_mount():
        pytest.skip("mounts a small tmpfs: needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)]).returncode:
        pytest.skip("cannot mount a tmpfs here")

    def fill() -> None:
        with open(disk / "filler", "wb") as out:
            try:
                while True:
                    out.write(b"\0" * 65536)
                    out.flush()
            except OSError:
                pass

    yield disk, fill
    subprocess.run(["umount", "-l", str(disk)])


def test_after_a_write_the_disk_refused_submissions_hear_why_until_the_rebuild(full_disk):
    # A failed write sets the service re-reading the cluster; until then every submission
    # was a 503 "re-reading the cluster after an error", which hid the full disk.
    from chronus_py.backends.sim import SimBackend
    from chronus_py.service.core import ApiError, Caller, Service
    from chronus_py.service.db import Database
    from chronus_py.service.rounds import SchedulerSettings

    disk, fill = full_disk
    backend = SimBackend(disk.parent / "world.sim", [("n0", 8)], origin=1000.0)
    db = Database(disk / "c.db")
    svc = Service(backend, db, SchedulerSettings())
    admin = Caller("ops", admin=True)
    try:
        assert svc.submit({**JOB, "id": "kept"}, admin)[0] == 201
        fill()
        with pytest.raises(sqlite3.OperationalError):
            svc.submit({**JOB, "id": "first"}, admin)
        with pytest.raises(ApiError) as next_one:
            svc.submit({**JOB, "id": "second"}, admin)
        assert (next_one.value.status, next_one.value.message) == (
            507,
            "the service's disk is full: nothing of this request was kept; retry once that is "
            "fixed",
        )
        (disk / "filler").unlink()
        svc.tick()  # the rebuild
        assert svc.submit({**JOB, "id": "second"}, admin)[0] == 201
    finally:
        db.close()


@pytest.mark.skipif(not _can_mount(), reason="mounts a small tmpfs: needs root")
def test_a_full_disk_is_a_507_in_a_line_and_loses_no_accepted_job(tmp_path):
    """On a full disk a submission was a 503 "internal error" with a traceback in the log for
    every request. Now: a 507 saying so, one log line, nothing of the request kept (the same
    id is taken once there is room), and every job answered 201 is there after a restart. A
    round that failed to write first (it set the service re-reading the cluster) gave a 503
    "re-reading the cluster after an error", which hid the cause: it is the 507 too."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    (tmp_path / "tokens.yaml").write_text(TOKENS)
    args = ("--tokens", str(tmp_path / "tokens.yaml"), "--nodes", "2", "--db", str(disk / "c.db"))
    server = Server(tmp_path, *args)
    filler = disk / "filler"
    try:
        server.start()
        accepted = []
        for i in range(3):
            r = server.http.post("/v1/jobs", headers=A, json={**JOB, "id": f"j{i}"})
            assert r.status_code == 201, r.text
            accepted.append(f"j{i}")
        with open(filler, "wb") as fill:  # every byte left
            try:
                while True:
                    fill.write(b"\0" * 65536)
                    fill.flush()
            except OSError:
                pass
        r = server.http.post("/v1/jobs", headers=A, json={**JOB, "id": "late"})
        assert r.status_code == 507, r.text
        assert r.json() == {
            "error": "the service's disk is full: nothing of this request was kept; "
            "retry once that is fixed",
            "field": None,
        }
        filler.unlink()

        def taken():
            r = server.http.post("/v1/jobs", headers=A, json={**JOB, "id": "late"})
            # 507 until the rebuild a round's failed write forced; 503: the rebuild under way
            assert r.status_code in (201, 503, 507), r.text
            return r.status_code == 201

        wait_for(taken, what="the refused id taken once there is room")
        accepted.append("late")
        server.kill()
        server.start()
        listed = server.http.get("/v1/jobs?limit=10000", headers=ADMIN).json()["jobs"]
        assert {j["id"] for j in listed} >= {f"team-a:{j}" for j in accepted}
    finally:
        server.stop()
        server.http.close()
        subprocess.run(["umount", "-l", str(disk)])
    log = server.log.read_text()
    assert "Traceback" not in log, log
    # in a line, from whichever write met the full disk first: the request's, or a round's
    assert re.search(
        r'"event": "storage_error", "during": "/v1/jobs"|"event": "round_failed", '
        r'"error": "the service\'s disk is full',
        log,
    ), log


def test_a_full_disk_met_by_the_backends_own_write_is_a_507_too(tmp_path):
    """The sim backend keeps its commands in a file beside the database. When its write met the
    full disk first (a start, in a round), the next submission was a 503 "re-reading the
    cluster after an error", which hid the cause (seen once in CI, session 31). SQLite's own
    page limit makes the sim's file full here; the daemon's database keeps its room."""
    backend = SimBackend(tmp_path / "world.sim", [("n0", 8)], speed=0.001)
    service = Service(backend, Database(tmp_path / "chronus.db"), SchedulerSettings())
    team_a = Caller("team-a")
    try:
        pages = backend.db.execute("PRAGMA page_count").fetchone()[0]
        backend.db.execute(f"PRAGMA max_page_count = {pages}")
        for i in range(10_000):  # until a command needs a page the file may not have
            service.submit({**JOB, "id": f"j{i}"}, team_a)
            if service.needs_resync:
                break
        assert service.needs_resync
        with pytest.raises(ApiError) as refused:
            service.submit({**JOB, "id": "late"}, team_a)
        assert refused.value.status == 507, refused.value.message
    finally:
        service.db.close()


def test_no_redirect_names_a_host_and_ui_goes_to_its_view_relatively(server):
    """Starlette redirected a path with a trailing slash, and ``/ui``, to an absolute
    ``http://{Host}/...``: behind an HTTPS proxy, to plain HTTP (where the login cookie is not
    sent) or to the proxy's upstream address. The API's such paths are a JSON 404 (the
    view's too, to a script asking for JSON; a browser gets a page saying so, tests/ui)."""
    json_only = {"Host": "elsewhere.example", "Accept": "application/json"}
    for path in ("/v1/jobs/", "/v1/jobs/x/", "/v1/plan/", "/ui/jobs/"):
        r = server.http.get(path, headers={**A, **json_only})
        assert r.status_code == 404, (path, r.status_code, r.headers)
        assert r.json() == {"error": "Not Found", "field": None}
    r = server.http.get("/ui", headers={"Host": "elsewhere.example"})
    assert r.status_code == 308 and r.headers["location"] == "/ui/"


def test_the_login_page_allows_what_it_serves(server):
    """Two routes for ``/ui/login`` (GET, POST) made a 405 name only the first's methods."""
    r = server.http.request("PUT", "/ui/login")
    assert r.status_code == 405
    assert set(r.headers["allow"].split(", ")) == {"GET", "HEAD", "POST"}


def test_a_page_is_unchanged_for_its_etag_weak_or_in_a_list(server):
    """``If-None-Match`` is compared weakly (RFC 9110): a proxy that compresses the pages makes
    their ETags ``W/"..."``, and an exact comparison then never answered 304."""
    etag = server.http.get("/ui/cluster", headers=A).headers["etag"]
    for given in (etag, f"W/{etag}", f'"other", {etag}', "*"):
        r = server.http.get("/ui/cluster", headers={**A, "If-None-Match": given})
        assert r.status_code == 304, given
    assert server.http.get("/ui/cluster", headers={**A, "If-None-Match": '"x"'}).status_code == 200


LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ \{")


def test_an_upgrade_is_served_plainly_and_uvicorn_writes_the_services_lines(server):
    """A WebSocket upgrade was a 403 with an empty body from the single process (uvicorn's
    WebSocket handling, which the fronts had off), and uvicorn's warnings were its own
    ``WARNING:  Invalid HTTP request received.``, without the time, among the service's lines
    (two for an upgrade, one advising to install a WebSocket library)."""
    upgrade = get("/v1/jobs?limit=1").replace(
        b"\r\n\r\n",
        b"\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
    )
    assert exchange(server, upgrade).startswith(b"HTTP/1.1 200 ")
    assert exchange(server, b"GET /\xff HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 400 ")

    def logged():
        text = server.log.read_text()
        return "Invalid HTTP request received." in text and "Unsupported upgrade" in text

    wait_for(logged, what="uvicorn's lines in the log")
    lines = server.log.read_text().splitlines()
    assert all(LINE.match(line) for line in lines), [x for x in lines if not LINE.match(x)]
    assert not any("WebSocket library" in line for line in lines)


@pytest.mark.parametrize("tenant", ["team:a", "team a", ""])
def test_a_tenant_name_that_could_share_a_job_id_is_refused_at_start(tmp_path, tenant):
    """A job is ``TENANT:ID`` in the service and ids may hold ``:``: tenants ``team`` and
    ``team:a`` named one job ``team:a:x`` (``team``'s ``a:x``, ``team:a``'s ``x``), and the
    second to choose it got a 409 telling that the other's exists."""
    (tmp_path / "tokens.yaml").write_text(
        "tokens:\n"
        '  - {token: "team-token-0123456789", tenant: team}\n'
        f'  - {{token: "other-token-0123456789", tenant: "{tenant}"}}\n'
    )
    done = serve_once(tmp_path, "--tokens", "tokens.yaml", "--check")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "chronus serve: tokens.yaml: tokens[1].tenant: expected 1-128 characters of "
        "A-Z a-z 0-9 . _ - (no ':', which ends a tenant in a job's id)"
    ]
