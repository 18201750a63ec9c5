"""The requests answered straight from the connection (``api._Api.direct``, ``connections.py``:
a submission, a job's read and its cancellation without a query string) get the same bytes
as through the ASGI app (the same requests with a query, which take Starlette's path), and
an idle keep-alive connection is closed after uvicorn's keep-alive timeout, counted from its
last answer."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest
import uvicorn
from polling import wait_for
from prometheus_client.parser import text_string_to_metric_families
from serving import Server, free_port, running

from chronus_py.backends.sim import SimBackend
from chronus_py.service.api import build_app
from chronus_py.service.connections import guarded_protocol
from chronus_py.service.core import Service
from chronus_py.service.db import Database
from chronus_py.service.rounds import SchedulerSettings

TOKEN = b"Authorization: Bearer team-a-token-0123456789\r\n"
KEEP_ALIVE = 5.0
"""uvicorn's ``timeout_keep_alive``, which ``chronus serve`` keeps."""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running(tmp_path_factory.mktemp("direct"), "--nodes", "4", "--speed", "50") as server:
        yield server
    log = server.log.read_text()
    assert "Traceback" not in log, log


@pytest.mark.parametrize(
    "method, path, query, headers, direct",
    [
        ("POST", "/v1/jobs", b"", [(b"content-length", b"20")], True),
        ("GET", "/v1/jobs/j1", b"", [], True),
        ("DELETE", "/v1/jobs/j1", b"", [(b"content-length", b"0")], True),
        ("POST", "/v1/jobs", b"dry_run=true", [(b"content-length", b"20")], False),
        ("GET", "/v1/jobs/j1", b"x=1", [], False),
        ("POST", "/v1/jobs", b"", [], False),  # no Content-Length
        ("POST", "/v1/jobs", b"", [(b"content-length", b"65537")], False),  # the app's 413
        ("POST", "/v1/jobs", b"", [(b"transfer-encoding", b"chunked")], False),
        ("GET", "/v1/jobs/j1", b"", [(b"content-length", b"3")], False),
        ("GET", "/v1/jobs", b"", [], False),  # the listing
        ("PUT", "/v1/jobs/j1", b"", [], False),  # the app's 405
        ("GET", "/v1/jobs/j1/progress", b"", [], False),
        ("GET", "/v1/jobs/", b"", [], False),
    ],
)
def test_which_requests_are_answered_from_the_connection(
    tmp_path, method, path, query, headers, direct
):
    backend = SimBackend(tmp_path / "world.sim", [("n0", 8)], speed=1.0)
    service = Service(backend, Database(tmp_path / "chronus.db"), SchedulerSettings())
    app = build_app(service)
    scope = {"method": method, "path": path, "query_string": query, "root_path": ""}
    assert (app.direct({**scope, "headers": headers}) is not None) == direct
    service.db.close()


def exchange(sock: socket.socket, request: bytes) -> tuple[list[bytes], bytes]:
    """Send one request on a keep-alive connection: its answer's head lines without the
    ``date`` header (it changes every second), and its body."""
    sock.sendall(request)
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    length = next(
        int(v) for n, _, v in (x.partition(b": ") for x in lines) if n == b"content-length"
    )
    while len(body) < length:
        body += sock.recv(65536)
    return [x for x in lines if not x.startswith(b"date: ")], body


def request(method: str, path: str, body: bytes | None = None, *, token: bool = True) -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: x\r\n".encode() + (TOKEN if token else b"")
    if body is None:
        return head + b"\r\n"
    return head + b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body


@pytest.mark.parametrize(
    "method, path, body, token",
    [
        ("GET", "/v1/jobs/d1", None, True),
        ("GET", "/v1/jobs/nope", None, True),
        ("GET", "/v1/jobs/d1", None, False),
        ("DELETE", "/v1/jobs/nope", None, True),
        ("POST", "/v1/jobs", b'{"gpus": 1}', True),
        ("POST", "/v1/jobs", b'{"gpus": 1, "estimate_seconds": NaN}', True),
        ("POST", "/v1/jobs", b"not json", True),
        ("POST", "/v1/jobs", b"[" * 40 + b"]" * 40, True),
        ("POST", "/v1/jobs", b'{"id": "d1", "gpus": 1, "estimate_seconds": 60}', True),
    ],
)
def test_the_same_bytes_as_through_the_app(server: Server, method, path, body, token):
    """Each request without a query (answered from the connection) and with one that changes
    nothing (``?dry_run=false`` for a submission, ``?x=1`` for the others: through the app)."""
    first = request("POST", "/v1/jobs", b'{"id": "d1", "gpus": 1, "estimate_seconds": 60}')
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        exchange(sock, first)  # d1 exists (a 201 the first time, a 409 after)
        query = "?dry_run=false" if method == "POST" else "?x=1"
        for _ in range(20):  # d1 starts and ends meanwhile: compare while it stays as it is
            direct = exchange(sock, request(method, path, body, token=token))
            app = exchange(sock, request(method, path + query, body, token=token))
            if exchange(sock, request(method, path, body, token=token)) == direct:
                break
    assert direct == app
    status = int(direct[0][0].split(b" ")[1])
    assert status >= 400 or method == "GET", direct  # each case answered as it should be
    assert set(json.loads(direct[1])) >= ({"error", "field"} if status >= 400 else {"id"})


def test_a_cancellation_and_a_submission_answered_from_the_connection(server: Server):
    """201 with the job's id, a read of it, then its cancellation: the answers as through the
    app, but for the ids and times in them."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        made = exchange(
            sock, request("POST", "/v1/jobs", b'{"id": "c1", "gpus": 1, "estimate_seconds": 60}')
        )
        other = exchange(
            sock,
            request(
                "POST", "/v1/jobs?dry_run=false", b'{"id": "c2", "gpus": 1, "estimate_seconds": 60}'
            ),
        )
        assert made[0][0] == other[0][0] == b"HTTP/1.1 201 Created"
        assert [x.partition(b": ")[0] for x in made[0]] == [x.partition(b": ")[0] for x in other[0]]
        assert json.loads(made[1])["id"] == "c1" and json.loads(other[1])["id"] == "c2"
        read = exchange(sock, request("GET", "/v1/jobs/c1"))
        assert json.loads(read[1])["id"] == "c1"  # read-your-write
        gone = exchange(sock, request("DELETE", "/v1/jobs/c1"))
        again = exchange(sock, request("DELETE", "/v1/jobs/c1?x=1"))  # idempotent
        assert gone[0][0] == b"HTTP/1.1 200 OK" and json.loads(gone[1])["state"] == "cancelled"
        assert gone == again


def submit_times(server: Server) -> tuple[float, float]:
    """The submissions ``chronus_request_seconds`` has counted, and those within 0.2 s."""
    seen = {
        (sample.name.rpartition("_")[2], sample.labels.get("le")): sample.value
        for family in text_string_to_metric_families(server.http.get("/metrics").text)
        if family.name == "chronus_request_seconds"
        for sample in family.samples
        if sample.labels["handler"] == "submit"
    }
    return seen["count", None], seen["bucket", "0.2"]


def test_a_direct_answer_is_timed_from_its_head_not_from_its_handler(server: Server):
    """A submission whose body comes 0.4 s after its head: its handler runs once the body is
    in, but its time counts from the head, so it lands in no bucket up to 0.2 s. (Timed from
    its handler's start, as it would be without the connection's stamp, it would take
    milliseconds.)"""
    body = b'{"gpus": 1, "estimate_seconds": 60}'
    whole = request("POST", "/v1/jobs", body)
    count, quick = submit_times(server)
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(whole[: -len(body)])
        time.sleep(0.4)
        answer = exchange(sock, body)
    assert answer[0][0] == b"HTTP/1.1 201 Created"
    assert submit_times(server) == (count + 1, quick)


def test_an_idle_connection_is_closed_after_the_keep_alive_timeout(server: Server):
    """Counted from the last answer: a request 0.6 of the timeout after the first keeps the
    connection open past the first's timeout, and it closes a timeout after the second's."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=3 * KEEP_ALIVE) as sock:
        exchange(sock, request("GET", "/v1/jobs/nope"))
        time.sleep(0.6 * KEEP_ALIVE)
        exchange(sock, request("GET", "/v1/jobs/nope"))
        answered = time.monotonic()
        assert sock.recv(1) == b""  # closed by the server
        idle = time.monotonic() - answered
    assert KEEP_ALIVE - 0.2 < idle < KEEP_ALIVE + 1.5


def test_the_guarded_protocol_answers_what_direct_takes_without_the_app(tmp_path):
    """uvicorn serving ``guarded_protocol`` with the API's ``direct``, as ``chronus serve``
    does: a job's read is answered by ``direct``'s handler, a read with a query by the app."""
    backend = SimBackend(tmp_path / "world.sim", [("n0", 8)], speed=1.0)
    service = Service(backend, Database(tmp_path / "chronus.db"), SchedulerSettings())
    app = build_app(service)
    taken: list[str] = []

    def direct(scope):
        handler = app.direct(scope)
        if handler is not None:
            taken.append(scope["path"])
        return handler

    port = free_port()
    config = uvicorn.Config(
        app, port=port, log_level="warning", lifespan="off", http=guarded_protocol(5.0, 10, direct)
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            direct_answer = exchange(sock, request("GET", "/v1/jobs/nope", token=False))
            app_answer = exchange(sock, request("GET", "/v1/jobs/nope?x=1", token=False))
    finally:
        server.should_exit = True
        thread.join(10)
        service.db.close()
    assert taken == ["/v1/jobs/nope"]
    assert direct_answer == app_answer and direct_answer[0][0] == b"HTTP/1.1 404 Not Found"
