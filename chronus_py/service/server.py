"""The daemon: options (flags over a config file), the scheduling loop, and the HTTP server.

The loop and the request handlers share one lock, so a round's decisions and a request never
interleave; both run the service in a worker thread, so the event loop still answers
``/healthz`` during a long round. A round's backend commands (starts, preemptions) are issued
between its decisions and their records, without that lock (``commands.py``): a request waits
for a round's planning, never for its batch of commands. The lease re-plan, seconds long with
thousands of guarantees, runs in a child process on a fork of the scheduler
(``rounds.start_replan``); its result is read and the plan it replaces freed in small pieces off
the lock, and it is committed in steps of at most ``CATCH_UP_STEP`` under the lock
(``Service.commit_replan``): no request waits for the re-plan, and none long for its commit.

The loop sleeps until the earliest of: a submission or cancellation (woken at
once, rounds at most every ``--round-interval`` wall seconds so a burst makes one round), the
scheduler's next decision point (lease boundary, laxity trigger), the backend's next known event
(a sim completion or trace arrival), or one second (a backend may change on its own). SIGTERM,
SIGINT and SIGHUP stop the server after the round in progress; the database is closed cleanly.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import gc
import ipaddress
import json
import logging
import math
import signal
import socket
import sqlite3
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from chronus_py.backends import BACKENDS, DEFAULT_BACKEND, backend_module, cannot_resize
from chronus_py.backends.base import BackendUnavailable
from chronus_py.cli.options import add_settings_arguments, settings_given
from chronus_py.engine.loop import YOUNG_PASS
from chronus_py.errors import ChronusError, InputError
from chronus_py.inputs import load_yaml
from chronus_py.service import wal
from chronus_py.service.db import storage_error
from chronus_py.service.rounds import SchedulerSettings, small_pages
from chronus_py.service.worker import Worker

log = logging.getLogger("chronus.serve")
MAX_IDLE = 1.0
BIND_WAIT = 3.0
"""Seconds a port in use is tried again before giving up: the front processes of a server just
killed hold its listening socket until they notice, within a second (``front.py``)."""
DEFAULTS: dict[str, Any] = {
    "listen": "127.0.0.1:8080",
    "db": "chronus.db",
    "db_sync": "normal",
    "backend": DEFAULT_BACKEND,
    "tokens": None,
    "policy": "chronus",
    "cluster": None,
    "round_interval": 0.05,
    "log_level": "info",
    "layers_dir": None,
    "hosts": None,
    "throughputs": None,
    "read_timeout": 10.0,
    "max_connections": 1000,
    "http_workers": 0,
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Every option defaults to None here so a config file can fill it; DEFAULTS fill the rest."""
    p.add_argument(
        "--config",
        type=Path,
        help="YAML file of options (keys as the flags, without "
        "--; flags given on the command line win)",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="validate the options and config file, print them, and exit",
    )
    p.add_argument("--listen", help=f"HOST:PORT (default {DEFAULTS['listen']})")
    p.add_argument("--db", help=f"the service's SQLite database (default ./{DEFAULTS['db']})")
    p.add_argument(
        "--db-sync",
        choices=("normal", "full"),
        help="normal: commits survive a crash of the daemon (default); full: also a "
        "power cut (an fsync per commit)",
    )
    p.add_argument(
        "--backend", help=f"cluster backend: {', '.join(BACKENDS)} (default {DEFAULT_BACKEND})"
    )
    p.add_argument(
        "--tokens",
        help="YAML file of bearer tokens; without it the server only "
        "listens on loopback and every caller is an admin",
    )
    p.add_argument("--policy", help="scheduling policy (default chronus)")
    p.add_argument(
        "--cluster",
        help="a HiveD cluster config: its nodes, and the cell allocator "
        "places each job in its tenant's virtual cluster",
    )
    p.add_argument(
        "--layers-dir",
        help="keep DIR/<node>.json and .env (scx_layered configs) "
        "current for nodes with a host model (--hosts)",
    )
    p.add_argument("--hosts", help="YAML mapping node -> host model YAML, for --layers-dir")
    p.add_argument(
        "--throughputs",
        help="directory of <model>.csv throughput tables elastic jobs are sized by "
        "(default: the bundled A100 tables of ElasticFlow)",
    )
    p.add_argument(
        "--round-interval", type=float, help="least wall seconds between rounds (default 0.05)"
    )
    p.add_argument(
        "--read-timeout",
        type=float,
        help="seconds a request (headers and body) may take to arrive from its first byte, and a "
        "new connection to send its first byte; slower clients get 408 (default 10)",
    )
    p.add_argument(
        "--max-connections",
        type=int,
        help="open connections at most; one more gets 503 and is closed (default 1000)",
    )
    p.add_argument(
        "--http-workers",
        type=int,
        help="front processes that read and write HTTP and forward each request to the "
        "scheduler process; 0 (default): one process does both",
    )
    p.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        help="default info: one line per decision",
    )
    add_settings_arguments(p)
    for name in BACKENDS:
        backend_module(name).add_arguments(p)


@dataclass
class Options:
    """The checked options (flags over config file over defaults) and the raw namespace the
    backend reads its own from."""

    host: str
    port: int
    db: Path
    db_sync: str
    backend: str
    tokens: Path | None
    settings: SchedulerSettings
    cluster: Path | None
    round_interval: float
    log_level: str
    read_timeout: float
    max_connections: int
    http_workers: int
    layers_dir: Path | None
    hosts: Path | None
    throughputs: Path | None
    args: argparse.Namespace


def resolve(args: argparse.Namespace) -> Options:
    if args.config is not None:
        _merge_config(args, args.config)
    for key, value in DEFAULTS.items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)
    host, port = _listen(args.listen)
    if args.tokens is None and not _loopback(host):
        raise InputError(
            "--listen",
            f"{host} is not a loopback address: without --tokens anyone "
            "could act as any tenant; give --tokens FILE",
        )
    from chronus_py.policies import ELASTIC, make_policy
    from chronus_py.policies import ROUND_POLICIES as POLICIES

    resize = cannot_resize(args.backend) if args.policy in ELASTIC else None
    if resize:
        raise InputError(
            "--policy",
            f"{args.policy} resizes running jobs, and backend {args.backend} cannot: {resize}",
        )
    if args.policy not in POLICIES:
        raise InputError(
            "--policy", f"unknown policy {args.policy!r} (have: {', '.join(sorted(POLICIES))})"
        )
    value = args.round_interval
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise InputError("--round-interval", f"must be a number >= 0, got {value!r}")
    value = args.read_timeout
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1e6:
        raise InputError("--read-timeout", f"must be a number of seconds > 0, got {value!r}")
    value = args.max_connections
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError("--max-connections", f"must be an integer >= 1, got {value!r}")
    value = args.http_workers
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 64:
        raise InputError("--http-workers", f"must be an integer in [0, 64], got {value!r}")
    backend_module(args.backend)
    settings = SchedulerSettings(policy=args.policy, options=settings_given(args, args.policy))
    make_policy(settings.policy, settings.options, source=str(args.config or "policy settings"))
    if args.tokens is not None:
        from chronus_py.service.auth import load_tokens

        load_tokens(Path(args.tokens))
    if (args.layers_dir is None) != (args.hosts is None):
        raise InputError("--layers-dir/--hosts", "give both or neither")
    if args.throughputs is not None:
        from chronus_py.jobs.throughputs import read_throughputs

        read_throughputs(args.throughputs)  # a bad directory is refused at start, not per job
    return Options(
        host=host,
        port=port,
        db=Path(args.db),
        db_sync=args.db_sync,
        backend=args.backend,
        tokens=None if args.tokens is None else Path(args.tokens),
        settings=settings,
        cluster=None if args.cluster is None else Path(args.cluster),
        round_interval=float(args.round_interval),
        log_level=args.log_level,
        read_timeout=float(args.read_timeout),
        max_connections=args.max_connections,
        http_workers=args.http_workers,
        layers_dir=None if args.layers_dir is None else Path(args.layers_dir),
        hosts=None if args.hosts is None else Path(args.hosts),
        throughputs=None if args.throughputs is None else Path(args.throughputs),
        args=args,
    )


def _merge_config(args: argparse.Namespace, path: Path) -> None:
    data = load_yaml(path, what="config file") or {}
    if not isinstance(data, dict):
        raise InputError(path, "expected a mapping of option: value")
    for key, value in data.items():
        dest = str(key).replace("-", "_")
        if dest in ("config", "check", "func", "command") or not hasattr(args, dest):
            raise InputError(path, "unknown option", field=str(key))
        if isinstance(value, (dict, list)):
            raise InputError(path, "expected a single value", field=str(key))
        if getattr(args, dest) is None:
            setattr(args, dest, Path(value) if dest in ("sim_state",) else value)


def _listen(text: Any) -> tuple[str, int]:
    """``HOST:PORT``, an IPv6 host in brackets (``[::1]:8080``); a bracket left open or
    stray (``[::1:8080``, which was taken as host ``::1``) is refused."""
    host, sep, port = str(text).rpartition(":")
    inner = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if (
        not sep
        or not inner
        or "[" in inner
        or "]" in inner
        or not port.isascii()
        or not port.isdigit()
        or int(port) > 65535
    ):
        raise InputError("--listen", f"expected HOST:PORT, got {text!r}")
    return inner, int(port)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check(options: Options) -> str:
    """What ``--check`` prints: the options as they would run, and what the backend answered
    where it can be asked (Slurm: the slurmrestd API version chronus will use)."""
    out = {
        "listen": f"{options.host}:{options.port}",
        "db": str(options.db),
        "backend": options.backend,
        "tokens": str(options.tokens) if options.tokens else None,
        "policy": options.settings.policy,
        **_settings(options.settings),
        "cluster": None if options.cluster is None else str(options.cluster),
    }
    nodes = _hived(options.cluster)[0]  # a HiveD config ``serve`` refuses is refused here too
    probe = getattr(backend_module(options.backend), "check", None)
    if probe is not None:  # a backend that can be asked: what it answered (InputError if not)
        out["backend_check"] = probe(options.args, nodes=nodes)
    return "config OK\n" + yaml.safe_dump(out, sort_keys=False)


def _settings(settings: SchedulerSettings) -> dict[str, Any]:
    """The policy's settings in force (every Chronus setting, given or default)."""
    if settings.policy != "chronus":
        return {}
    from chronus_py.selector import ChronusSettings

    return {"settings": ChronusSettings.from_mapping(settings.options).to_dict()}


def serve(options: Options) -> int:
    """Build the service and run until SIGTERM/SIGINT, on a listening socket closed however
    that ends (e.g. a bad option found once it was bound, which left it open to the process's
    end when ``serve`` was called in a process that goes on)."""
    with _bind(options.host, options.port) as sock, _hold(options.db):
        return _serve_on(sock, options)


def _hold(path: Path) -> contextlib.AbstractContextManager:
    """The database held for this daemon (``db.hold``) until ``serve`` returns, however it
    returns: its directory made first, the lock file closed on the way out."""
    from chronus_py.service.db import hold

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError("--db", f"cannot make {path.parent}: {exc.strerror}") from None
    held = hold(path)
    return contextlib.nullcontext() if held is None else held


def _serve_on(sock: socket.socket, options: Options) -> int:
    import uvicorn

    from chronus_py.service.api import build_app
    from chronus_py.service.connections import guarded_protocol
    from chronus_py.service.core import Service
    from chronus_py.service.db import Database
    from chronus_py.service.metrics import ServiceMetrics

    logging.basicConfig(level=options.log_level.upper(), handlers=[line_handler()])
    # The decision log writes a line per request: not finding each line's caller (a walk up
    # the stack) nor the thread's and process's names, which the format never shows, halves
    # a line's cost (35 -> 18 us; the logging HOWTO's "Optimization"; issue 27, session 14).
    logging._srcfile = None
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    tokens = None
    if options.tokens is not None:
        from chronus_py.service.auth import load_tokens

        tokens = load_tokens(options.tokens)
    nodes, allocator_factory = _hived(options.cluster)
    backend = backend_module(options.backend).from_args(
        options.args, db_path=options.db, nodes=nodes
    )
    db = Database(options.db, sync=options.db_sync)  # only once the backend has answered
    layers = None
    if options.layers_dir is not None:
        from chronus_py.service.layers import LayersWriter, load_hosts

        node_gpus = {n.name: len(n.gpus) for n in backend.nodes()}
        layers = LayersWriter(options.layers_dir, load_hosts(options.hosts, node_gpus))
    metrics = ServiceMetrics()
    wake = asyncio.Event()
    try:
        service = Service(
            backend,
            db,
            options.settings,
            allocator_factory=allocator_factory,
            on_round=metrics.round_seconds.observe,
            on_admission=metrics.admission_seconds.observe,
            layers=layers,
            throughputs=options.throughputs,
            replan_in_child=True,
            on_replan=wake.set,
        )
    except BackendUnavailable as exc:
        error = ChronusError(f"--backend {options.backend}: cannot read the cluster: {exc}")
        error.exit_code = 1
        raise error from None
    metrics.attach(service)
    # A long-lived heap of job records makes the cyclic collector's full passes the longest
    # pauses an admission answer waits behind: what was rebuilt at start is frozen out of them,
    # and young collections run less often.
    gc.freeze()
    gc.set_threshold(YOUNG_PASS, 20, 100)
    small_pages()
    hook = getattr(backend, "checkpoints", None)
    files = [db.checkpoints()] + ([] if hook is None else [hook()])
    lock = asyncio.Lock()
    app = build_app(
        service, tokens=tokens, metrics=metrics, layers=layers, wake=wake.set, lock=lock
    )
    # The web view (/ui): its own package; it reads the service under the same lock.
    from chronus_py.ui.routes import attach as attach_ui

    attach_ui(app, service, tokens=tokens, metrics=metrics, lock=lock, wake=wake.set)

    end_serving: list[Callable[[], None]] = []  # uvicorn's, or the fronts' (below)

    @contextlib.asynccontextmanager
    async def lifespan(_app):
        # Our own handlers (uvicorn's would re-raise the signal after shutdown, so a clean stop
        # would still exit -15): SIGTERM/SIGINT end serving after the current round, and
        # SIGHUP too (the terminal it was started from closed): by default it killed the
        # daemon without its clean stop.
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            asyncio.get_running_loop().add_signal_handler(signum, lambda: end_serving[0]())
        stop = asyncio.Event()
        task = asyncio.create_task(_loop(service, wake, stop, lock, options.round_interval))
        copying = asyncio.create_task(_checkpoints(files, stop))
        yield
        stop.set()
        wake.set()
        await task
        await copying
        for file in files:
            file.close()
        db.close()
        backend.close()
        log.info('{"event": "stopped"}')

    app.router.lifespan_context = lifespan
    host, port = sock.getsockname()[:2]
    if tokens is None:
        log.warning(
            '{"event": "no_tokens", "message": "no --tokens: listening on loopback only, '
            'every caller acts as admin"}'
        )
    log.info(
        '{"event": "listening", "url": "http://%s:%d", "backend": "%s", "db": "%s"}',
        f"[{host}]" if ":" in host else host,  # an IPv6 address, as a URL writes it
        port,
        options.backend,
        options.db,
    )
    if options.http_workers:
        with asyncio.Runner(loop_factory=loop_factory()) as runner:
            return runner.run(_serve_with_fronts(app, lifespan, sock, options, end_serving))
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="on",
        log_config=None,  # uvicorn's lines through the service's handler (``line_handler``)
        # httptools' parser (a dependency), with the bounds on slow clients (connections.py)
        http=guarded_protocol(options.read_timeout, options.max_connections, app.direct),
        # no WebSocket route: an upgrade is served as the plain request it also is, as the
        # fronts serve it (it was a 403 with an empty body, not the API's JSON)
        ws="none",
        # nothing reads a client's address, so no X-Forwarded-For is worth parsing per request
        proxy_headers=False,
    )
    server = uvicorn.Server(config)
    end_serving.append(lambda: setattr(server, "should_exit", True))
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        runner.run(server.serve(sockets=[sock]))
    return 0


async def _serve_with_fronts(
    app, lifespan, sock: socket.socket, options: Options, end_serving: list
) -> int:
    """``--http-workers N``: the app's lifespan (the scheduling loop) here, HTTP in N front
    processes that forward to it (``fronts.py``), until SIGTERM/SIGINT or failing fronts."""
    from chronus_py.service.fronts import Fronts

    stopping = asyncio.Event()
    end_serving.append(stopping.set)
    async with lifespan(app):
        fronts = Fronts(
            app,
            sock,
            options.http_workers,
            read_timeout=options.read_timeout,
            max_connections=options.max_connections,
            log_level=options.log_level,
            stop=stopping.set,
        )
        await fronts.start()
        await stopping.wait()
        await fronts.stop()
    return fronts.exit_code


def line_handler() -> logging.Handler:
    """The log's handler: one line per record on stderr (``_LineFormat``). uvicorn's own
    warnings (``Invalid HTTP request received.``, ``Unsupported upgrade request.``) go to it
    too, as JSON lines (``_uvicorn_line``): uvicorn's logging config wrote them as
    ``WARNING:  Invalid ...``, without the time, among the service's lines."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_LineFormat())
    logging.getLogger("uvicorn.error").addFilter(_uvicorn_line)
    return handler


def _uvicorn_line(record: logging.LogRecord) -> bool:
    """A uvicorn record's message as the service writes its own: one JSON object."""
    record.msg = json.dumps({"event": "http", "message": record.getMessage()})
    record.args = ()
    return True


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop where it is installed (a dependency, but not on Windows), else
    asyncio's own (None)."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


class _LineFormat(logging.Formatter):
    """``%(asctime)s %(levelname)s %(message)s``, the time's text up to the second made once
    per second rather than per line: with a line per request, ``time.strftime`` was a quarter
    of the decision log's cost (py-spy, issue 27, session 14). The lines are the same. Called
    under the handler's lock, one line at a time."""

    def __init__(self):
        super().__init__("%(asctime)s %(levelname)s %(message)s")
        self._second: tuple[int, str] = (-1, "")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        second = int(record.created)
        if self._second[0] != second:
            text = time.strftime(self.default_time_format, self.converter(record.created))
            self._second = (second, text)
        return self.default_msec_format % (self._second[1], record.msecs)

    def formatMessage(self, record: logging.LogRecord) -> str:
        """Every line of a record of several (a batch's decisions, ``core.held_decisions``)
        with the time and level, as if each were its own record."""
        text = super().formatMessage(record)
        if "\n" not in record.message:
            return text
        head = text[: len(text) - len(record.message)]
        return head + record.message.replace("\n", "\n" + head)


async def _loop(
    service, wake: asyncio.Event, stop: asyncio.Event, lock: asyncio.Lock, interval: float
) -> None:
    steps = Worker("chronus-rounds")  # the round's steps, off the event loop, one at a time
    last, held = -math.inf, 0.0
    wake.set()  # the first round at once: after a restart, work is waiting
    collecting: asyncio.Task | None = None
    while not stop.is_set():
        if service.fork_wait() == 0.0:
            await _fork(service, lock, steps)
        if service.replan is not None and (collecting is None or collecting.done()):
            collecting = asyncio.create_task(_collect_replan(service, service.replan, lock, wake))
        # in a worker thread: the backend's next event takes the backend's lock, which a
        # request's command (a cancellation) may hold, and the event loop must never wait
        due = await steps.run(service.next_wakeup)
        timeout = (
            MAX_IDLE if due is None else min(service.backend.wall_seconds_until(due), MAX_IDLE)
        )
        fork = service.fork_wait()
        if fork is not None:
            timeout = min(timeout, fork)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), timeout)
        if stop.is_set():
            break
        if service.fork_wait() == 0.0:
            continue  # the owed re-plan's fork first; the round follows (``wake`` is kept)
        wake.clear()
        # At most one round per ``interval``, and rounds hold the request lock at most a third
        # of the loop's time, so a burst of submissions is answered between rounds, not behind
        # them. Only the lock counts: a round's backend commands run outside it, and counting
        # a slow API server's writes too held a Kueue round every 23 s (issue 24, session 11).
        gap = max(interval, 2 * held) - (time.monotonic() - last)
        if gap > 0:
            await asyncio.sleep(gap)
        held = 0.0
        try:
            # the round's steps under the request lock, its backend commands (the arrivals'
            # submits, then the starts and preemptions) outside it; this loop is the only caller,
            # so one round's commands are all issued and recorded before the next round begins
            # (core.py, commands.py)
            try:
                if service.to_look:
                    await steps.run(service.look)  # the backend's read, off the lock
                held += await _locked(lock, steps, service.take_arrivals)
                if service.to_act:
                    await steps.run(service.act)
                held += await _locked(lock, steps, service.decide)
                if service.to_act:
                    await steps.run(service.act)
            finally:
                held += await _locked(lock, steps, service.record)
        except Exception as exc:  # noqa: BLE001 - the loop must outlive a bug: log, resync, go on
            storage = storage_error(exc)
            if storage is None:
                log.exception("round failed; the scheduler is rebuilt from the backend next round")
            else:  # a full disk is no bug: a line a round until it is fixed, not a traceback
                log.warning(json.dumps({"event": "round_failed", "error": f"{storage[1]}: {exc}"}))
            service.failed(exc)
        last = time.monotonic()
    if collecting is not None:
        await collecting


async def _checkpoints(files: list[wal.Checkpoints], stop: asyncio.Event) -> None:
    """Each file's WAL copied into it every ``wal.INTERVAL`` seconds in a thread of its own,
    beside the requests' commits rather than inside one of them (``wal.py``). A failure (a full
    disk) is logged once per file and error, not at every copy, and tried again: the log keeps
    every commit meanwhile, and the writers' own checkpoint still bounds it."""
    copier = Worker("chronus-checkpoints")
    failing: list[str | None] = [None] * len(files)  # each file's error, as last logged
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), wal.INTERVAL)
        for i, file in enumerate(files):
            try:
                await copier.run(file.run)
            except sqlite3.Error as exc:
                if failing[i] != str(exc):
                    log.warning(json.dumps({"event": "checkpoint_failed", "error": str(exc)}))
                failing[i] = str(exc)
            else:
                failing[i] = None


async def _fork(service, lock: asyncio.Lock, steps) -> None:
    """Fork the owed lease re-plan in a hold of the lock of its own, between the requests'
    batches and the rounds (``Service.fork_replan``): no request's call pays for the fork
    (issue 27, session 17). A failed fork is logged; the committed plan goes on deciding."""
    try:
        await _locked(lock, steps, service.fork_replan)
    except Exception:  # noqa: BLE001 - the loop must outlive a failed fork
        log.exception("the lease re-plan could not be forked; the committed plan goes on")


async def _locked(lock: asyncio.Lock, steps, step) -> float:
    """Run ``step`` in the ``steps`` worker thread under the request lock; the seconds it held
    the lock."""
    async with lock:
        began = time.monotonic()
        await steps.run(step)
        return time.monotonic() - began


async def _collect_replan(service, replan, lock: asyncio.Lock, wake: asyncio.Event) -> None:
    """Wait (in a worker thread, without the lock) for the child computing the lease re-plan,
    then commit its plan under the lock: requests wait only for a step of the commit, not the
    re-plan."""
    result = await asyncio.to_thread(service.replan_result, replan)
    done = False
    while not done:  # in steps, each a short hold of the lock (``Service.commit_replan``)
        async with lock:
            done = await asyncio.to_thread(service.commit_replan, replan, result)
    wake.set()
    await asyncio.to_thread(service.release_replaced)
    wake.set()  # a re-plan owed meanwhile may be forked ``FORK_GAP`` after (``fork_wait``)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    deadline = time.monotonic() + BIND_WAIT
    while True:
        try:
            sock.bind((host, port))
            break
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE and time.monotonic() < deadline:
                time.sleep(0.05)  # the fronts of a server just killed, still ending
                continue
            sock.close()
            raise InputError(
                "--listen", f"cannot listen on {host}:{port}: {exc.strerror or exc}"
            ) from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _hived(path: Path | None):
    """(nodes, allocator factory) of a HiveD config, or (None, None)."""
    if path is None:
        return None, None
    from placement import CellAllocator, PlacementError, load_config

    try:
        config = load_config(path)
        nodes = list(CellAllocator(config).config.nodes())
    except PlacementError as exc:
        raise InputError(path, str(exc)) from None
    return nodes, lambda: CellAllocator(config)
