# ruff: noqa: E402, E501  (a measurement script: it imports the checkout named on its command line)
"""In-process: the churn's requests through the real protocol (uvicorn httptools + guarded +
the app + service), no sockets, no rounds. Prints CPU per request (process_time).
usage: inproc.py CHECKOUT [rounds]"""

import argparse
import asyncio
import gc
import json
import logging
import random
import sys
import tempfile
import time
from pathlib import Path

ck = sys.argv[1]
sys.path.insert(0, ck)
import uvicorn
from uvicorn.server import ServerState

from chronus_py.backends import backend_module
from chronus_py.service import server as srv
from chronus_py.service.api import build_app
from chronus_py.service.connections import guarded_protocol
from chronus_py.service.core import Service
from chronus_py.service.db import Database
from chronus_py.service.metrics import ServiceMetrics

logging.basicConfig(level="INFO", handlers=[logging.FileHandler(tempfile.mktemp(suffix=".log"))])
logging._srcfile = None
logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
work = Path(tempfile.mkdtemp(prefix="inproc-"))
p = argparse.ArgumentParser()
srv.add_arguments(p)
args = p.parse_args(
    ["--db", str(work / "c.db"), "--nodes", "1024", "--gpus-per-node", "8", "--speed", "1"]
)
opts = srv.resolve(args)
backend = backend_module(opts.backend).from_args(opts.args, db_path=opts.db, nodes=None)
db = Database(opts.db)
metrics = ServiceMetrics()
service = Service(
    backend,
    db,
    opts.settings,
    on_round=metrics.round_seconds.observe,
    on_admission=metrics.admission_seconds.observe,
)
metrics.attach(service)
lock = asyncio.Lock()
app = build_app(service, metrics=metrics, lock=lock)
from chronus_py.ui.routes import attach as attach_ui

attach_ui(app, service, tokens=None, metrics=metrics, lock=lock, wake=lambda: None)


class T:
    def __init__(self):
        self.out = []
        self.closing = False

    waiting = 0
    done = None

    def write(self, d):
        self.out.append(d)
        T.waiting -= 1
        if T.waiting == 0:
            T.done.set_result(None)

    def writelines(self, ls):
        self.out.append(b"".join(ls))

    def is_closing(self):
        return self.closing

    def close(self):
        self.closing = True

    def get_extra_info(self, k, d=None):
        return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 5555)}.get(k, d)

    def pause_reading(self):
        pass

    def resume_reading(self):
        pass

    def set_write_buffer_limits(self, *a, **k):
        pass

    def get_write_buffer_size(self):
        return 0


def job(i, rng, now, gpus=None, estimate=None, share=0.7):
    est = estimate or rng.choice((7200.0, 14400.0, 28800.0, 57600.0))
    body = {"id": f"b{i}", "gpus": gpus or rng.choice((1, 1, 1, 2, 4, 8)), "estimate_seconds": est}
    if rng.random() < share:
        body["deadlines"] = [{"at": now + est * rng.uniform(1.5, 4.0)}]
    return body


def req(method, path, body=None):
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nUser-Agent: Python/3.11 aiohttp/3.9\r\nAccept: */*\r\nAccept-Encoding: gzip, deflate\r\n"
    if body is None:
        return (head + "\r\n").encode()
    data = json.dumps(body).encode()
    return (
        head + f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
    ).encode() + data


async def main():
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="off",
        http=guarded_protocol(300.0, 10000),
        proxy_headers=False,
    )
    config.load()
    state = ServerState()
    loop = asyncio.get_running_loop()
    conns = []
    for _ in range(16):
        proto = config.http_protocol_class(
            config=config, server_state=state, app_state={}, _loop=loop
        )
        t = T()
        proto.connection_made(t)
        conns.append((proto, t))

    async def run(reqs):
        # reqs: list of bytes, spread over connections, one outstanding per connection
        outs = []
        for i in range(0, len(reqs), 16):
            chunk = reqs[i : i + 16]
            for (proto, t), r in zip(conns, chunk):
                t.out = []
            T.waiting = len(chunk)
            T.done = loop.create_future()
            for (proto, t), r in zip(conns, chunk):
                proto.data_received(r)
            await T.done
            for (proto, t), _ in zip(conns, chunk):
                outs.append(b"".join(t.out))
        return outs

    rng = random.Random(1)
    now = service.backend.now()
    await run([req("POST", "/v1/jobs", job(i, rng, now, 8, 800.0)) for i in range(1024)])
    service.tick()
    fill = [job(1024 + i, rng, now, share=0.7) for i in range(5000)]
    outs = await run([req("POST", "/v1/jobs", b) for b in fill])
    service.tick()
    print(
        "cluster:",
        {
            k: v
            for k, v in service.cluster_view().items()
            if k in ("running", "pending", "free_gpus")
        },
        file=sys.stderr,
    )
    cancellable = [b["id"] for b in fill]
    known = list(cancellable)
    n = 20000 + 6024
    rng2 = random.Random(7)
    plan = []
    for k in range(int(sys.argv[2]) if len(sys.argv) > 2 else 5):
        batch = []
        for i in range(500):
            b = job(n, rng, now)
            n += 1
            batch.append(req("POST", "/v1/jobs", b))
            known.append(b["id"])
            cancellable.append(b["id"])
            batch.append(req("DELETE", f"/v1/jobs/{cancellable.pop(0)}"))
            if i % 5 == 0:
                batch.append(req("GET", f"/v1/jobs/{rng2.choice(known)}"))
        plan.append(batch)
    gc.collect()
    gc.freeze()
    results = []
    for batch in plan:
        c0, w0 = time.process_time(), time.perf_counter()
        outs = await run(batch)
        c1, w1 = time.process_time(), time.perf_counter()
        results.append((1000 * (c1 - c0) / len(batch), 1000 * (w1 - w0) / len(batch)))
        service.tick()
        st = {}
        for o in outs:
            code = o[9:12].decode()
            st[code] = st.get(code, 0) + 1
        print(
            f"cpu {results[-1][0]:.4f} ms/req wall {results[-1][1]:.4f} statuses {st}",
            file=sys.stderr,
        )
    cpu = sorted(r[0] for r in results)
    print(json.dumps({"checkout": ck, "cpu_ms_per_req": cpu, "median": cpu[len(cpu) // 2]}))
    return outs


import uvloop

with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
    runner.run(main())
