# ruff: noqa: E402, E501  (a measurement script: it imports the checkout named on its command line)
"""The HTTP layer alone: N requests through the guarded protocol to a service with a few jobs,
min over repeats of process CPU per request. usage: httpbench.py CHECKOUT"""

import argparse
import asyncio
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, sys.argv[1])
import uvicorn
from uvicorn.server import ServerState

from chronus_py.backends import backend_module
from chronus_py.service import server as srv
from chronus_py.service.api import build_app
from chronus_py.service.core import Service
from chronus_py.service.db import Database

logging.basicConfig(level="INFO", handlers=[logging.FileHandler(tempfile.mktemp(suffix=".log"))])
work = Path(tempfile.mkdtemp(prefix="hb-"))
p = argparse.ArgumentParser()
srv.add_arguments(p)
opts = srv.resolve(p.parse_args(["--db", str(work / "c.db"), "--nodes", "16", "--speed", "1"]))
backend = backend_module(opts.backend).from_args(opts.args, db_path=opts.db, nodes=None)
service = Service(backend, Database(opts.db), opts.settings)
app = build_app(service, lock=asyncio.Lock())
from chronus_py.service.connections import guarded_protocol


class T:
    def __init__(self):
        self.out = []

    waiting = 0
    done = None

    def write(self, d):
        self.out.append(d)
        T.waiting -= 1
        if T.waiting == 0:
            T.done.set_result(None)

    def is_closing(self):
        return False

    def close(self):
        pass

    def get_extra_info(self, k, d=None):
        return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 5555)}.get(k, d)

    def pause_reading(self):
        pass

    def resume_reading(self):
        pass


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
            outs += [b"".join(t.out) for (proto, t), _ in zip(conns, chunk)]
        return outs

    body = {"id": "x", "gpus": 1, "estimate_seconds": 60.0}
    outs = await run([req("POST", "/v1/jobs", body)])
    print(outs[0][:400], file=sys.stderr)
    kinds = {
        "get404": [req("GET", "/v1/jobs/nope")] * 1600,
        "get200": [req("GET", "/v1/jobs/x")] * 1600,
    }
    for name, reqs in kinds.items():
        best = []
        for _ in range(7):
            c0 = time.process_time()
            await run(reqs)
            best.append((time.process_time() - c0) / len(reqs) * 1e6)
        print(
            json.dumps(
                {
                    "checkout": sys.argv[1],
                    "kind": name,
                    "us_min": min(best),
                    "us_med": sorted(best)[3],
                }
            )
        )
    print((await run([req("GET", "/v1/jobs/x")]))[0][:500], file=sys.stderr)


import uvloop

with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
    runner.run(main())
