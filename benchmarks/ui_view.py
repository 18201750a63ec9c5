"""The web view (``/ui``) at 8,192 GPUs and ~5,000 active jobs: page weight, server time, time
to first render in Chromium, and the cost of a live update.

    python benchmarks/ui_view.py [--out ui_view.json]

Starts the real server (sim backend, 1,024 nodes x 8 GPUs, --speed 1) as a subprocess, fills
it as benchmarks/serve_load.py does (1,024 jobs of 8 GPUs take every GPU, 70% with deadlines),
then queues 4,000 more (1-8 GPUs, 2-16 h, 70% with deadlines 1.5-4x their work away; the
guaranteed ones get leases reserved ahead), and measures, over loopback:
- each page's bytes as sent (gzip) and uncompressed, and the server's answer time (median of 5);
- a live update: the polled part's answer time and bytes, and a conditional poll (ETag) when
  nothing changed (a 304);
- time to first render: Debian's Chromium (Playwright) loading each page, first contentful paint
  and the load event from the Navigation Timing API (median of 3);
- what open pages cost the scheduler: dry-run admissions answered with no page open and with five
  open timelines polling every 2 s, alternated;
- in process: how long one read holds the service's lock, and the drawing done without it.
Writes benchmarks/results/ui_view.json (or ``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = Path(__file__).resolve().parent.parent
PAGES = ("/ui/?span=6h", "/ui/?span=1d", "/ui/jobs", "/ui/cluster")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fill(http: httpx.Client, rng: random.Random) -> int:
    now = http.get("/v1/cluster").json()["now"]
    jobs = 0
    for i in range(1024):
        work = rng.uniform(4, 20) * 3600
        body = {"id": f"run{i}", "gpus": 8, "estimate_seconds": work}
        if rng.random() < 0.7:
            body["deadlines"] = [{"at": now + work * rng.uniform(1.5, 4)}]
        assert http.post("/v1/jobs", json=body).status_code == 201
        jobs += 1
    for i in range(4000):
        work = rng.uniform(2, 16) * 3600
        body = {"id": f"wait{i}", "gpus": rng.choice((1, 2, 4, 8)), "estimate_seconds": work}
        if rng.random() < 0.7:
            body["deadlines"] = [{"at": now + work * rng.uniform(1.5, 4)}]
        assert http.post("/v1/jobs", json=body).status_code == 201
        jobs += 1
    return jobs


def timed(http: httpx.Client, path: str, **kw) -> tuple[float, httpx.Response]:
    began = time.perf_counter()
    r = http.get(path, **kw)
    return time.perf_counter() - began, r


def server_side(http: httpx.Client, job: str) -> dict:
    out = {}
    for path in (*PAGES, f"/ui/jobs/{job}"):
        times, r = [], None
        for _ in range(5):
            seconds, r = timed(http, path)
            assert r.status_code == 200, (path, r.status_code)
            times.append(seconds)
        out[path] = {
            "answer_ms_median": round(1000 * statistics.median(times), 1),
            "answer_ms_max": round(1000 * max(times), 1),
            "bytes_gzip": r.num_bytes_downloaded,
            "bytes_html": len(r.content),
        }
    live = {}
    for path in ("/ui/?span=6h&part=live", "/ui/jobs?part=live", "/ui/cluster?part=live"):
        times, r = [], None
        for _ in range(5):
            seconds, r = timed(http, path)
            times.append(seconds)
        etag = r.headers["etag"]
        cond = []
        statuses = []
        for _ in range(5):
            seconds, c = timed(http, path, headers={"If-None-Match": etag})
            cond.append(seconds)
            statuses.append(c.status_code)
            etag = c.headers["etag"]
        live[path] = {
            "poll_ms_median": round(1000 * statistics.median(times), 1),
            "poll_bytes_gzip": r.num_bytes_downloaded,
            "conditional_ms_median": round(1000 * statistics.median(cond), 1),
            "conditional_statuses": statuses,
        }
    static = http.get("/ui/static/htmx.min.js")
    return {
        "pages": out,
        "live": live,
        "htmx_bytes_gzip": static.num_bytes_downloaded,
        "htmx_bytes": len(static.content),
    }


def admission_beside_viewers(url: str, rounds: int = 2, each: int = 100) -> dict:
    """Dry-run admissions answered with no page open, then with 5 open timelines polling
    every 2 s (each poll a full render: no ETag sent), alternating ``rounds`` times."""
    out: dict[str, list[float]] = {"no_viewer": [], "five_viewers": []}
    rng = random.Random(7)
    with httpx.Client(base_url=url, timeout=120) as http:
        now = http.get("/v1/cluster").json()["now"]
        for _ in range(rounds):
            for phase in ("no_viewer", "five_viewers"):
                stop = threading.Event()
                viewers = []
                if phase == "five_viewers":
                    for _ in range(5):
                        viewer = threading.Thread(target=_poll, args=(url, stop), daemon=True)
                        viewer.start()
                        viewers.append(viewer)
                    time.sleep(2)
                for _ in range(each):
                    work = rng.uniform(1, 8) * 3600
                    body = {"gpus": 4, "estimate_seconds": work}
                    body["deadlines"] = [{"at": now + 3 * work}]
                    seconds, _ = _post(http, "/v1/jobs?dry_run=true", body)
                    out[phase].append(seconds)
                    time.sleep(0.02)
                stop.set()
                for viewer in viewers:
                    viewer.join()
    return {
        phase: {
            "n": len(values),
            "p50_ms": round(1000 * statistics.median(values), 1),
            "p99_ms": round(1000 * sorted(values)[int(0.99 * len(values))], 1),
        }
        for phase, values in out.items()
    }


def _poll(url: str, stop: threading.Event) -> None:
    with httpx.Client(base_url=url, timeout=120) as http:
        while not stop.is_set():
            http.get("/ui/?span=6h&part=live")
            stop.wait(2.0)


def _post(http: httpx.Client, path: str, body: dict) -> tuple[float, httpx.Response]:
    began = time.perf_counter()
    r = http.post(path, json=body)
    return time.perf_counter() - began, r


def in_process() -> dict:
    """The same fill on an in-process service: how long one read of it holds the service's
    lock (every open page shares it for ``FRESH`` seconds), and the drawing, done outside."""
    from chronus_py.backends.sim import SimBackend
    from chronus_py.jobs.model import Cluster
    from chronus_py.service.core import Caller, Service
    from chronus_py.service.db import Database
    from chronus_py.service.rounds import SchedulerSettings
    from chronus_py.ui import charts, views
    from chronus_py.ui.figures import figures
    from chronus_py.ui.snapshot import Reader

    work = Path(tempfile.mkdtemp(prefix="ui_view-inproc-"))
    nodes = [(n.name, n.gpus) for n in Cluster.uniform(1024, 8).nodes]
    service = Service(
        SimBackend(work / "w.sim", nodes, speed=1.0), Database(work / "c.db"), SchedulerSettings()
    )
    admin = Caller("admin", admin=True)

    class Local:
        def get(self, path):
            return type("R", (), {"json": lambda _: {"now": service.backend.now()}})()

        def post(self, path, json):
            status, _ = service.submit(json, admin)
            service.tick() if json["id"] == "run1023" else None
            return type("R", (), {"status_code": status})()

    fill(Local(), random.Random(29))
    service.tick()
    service.tick()
    reader = Reader(service)
    reader.read(admin)  # the fixed fields of every job, parsed once

    def ms(fn, repeat=5):
        times = []
        for _ in range(repeat):
            reader.forget()
            began = time.perf_counter()
            fn()
            times.append(time.perf_counter() - began)
        return round(1000 * statistics.median(times), 1)

    reader.forget()
    reading = reader.read(admin)
    snap = reader.view(reading, admin)
    return {
        "read_under_lock_ms": ms(lambda: reader.read(admin)),
        "rows_outside_lock_ms": ms(lambda: reader.view(reading, admin)),
        "figures_under_lock_ms": ms(lambda: figures(service)),
        "draw_timeline_6h_ms": ms(lambda: views.draw_timeline(snap, "6h")),
        "draw_timeline_1d_ms": ms(lambda: views.draw_timeline(snap, "1d")),
        "draw_heatmap_ms": ms(lambda: charts.heatmap(snap.nodes, titles=False)),
        "jobs_table_ms": ms(lambda: views.table(snap.jobs)),
        "active_jobs": len(snap.jobs),
    }


def browser_side(url: str) -> dict:
    from playwright.sync_api import sync_playwright

    out = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path="/usr/bin/chromium",
            args=["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"],
        )
        for path in (*PAGES,):
            fcp, load, transfer = [], [], []
            for _ in range(3):
                context = browser.new_context()  # a cold cache each time
                page = context.new_page()
                page.goto(url + path, wait_until="load")
                timing = page.evaluate(
                    """() => new Promise(done => {
                      const nav = performance.getEntriesByType('navigation')[0];
                      const res = performance.getEntriesByType('resource');
                      const bytes = nav.transferSize
                        + res.reduce((a, r) => a + r.transferSize, 0);
                      const finish = fcp => done({fcp, load: nav.loadEventEnd, bytes});
                      new PerformanceObserver(list => {
                        const paint = list.getEntriesByName('first-contentful-paint')[0];
                        if (paint) finish(paint.startTime);
                      }).observe({type: 'paint', buffered: true});
                      setTimeout(() => finish(null), 3000);
                    })"""
                )
                fcp.append(timing["fcp"])
                load.append(timing["load"])
                transfer.append(timing["bytes"])
                context.close()
            out[path] = {
                "first_contentful_paint_ms": fcp,
                "load_event_ms_median": round(statistics.median(load), 1),
                "transfer_bytes_cold": transfer[-1],
            }
        browser.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="ui_view.json")
    args = parser.parse_args()
    port = free_port()
    work = Path(tempfile.mkdtemp(prefix="ui_view-"))
    log = open(work / "serve.log", "wb")
    cmd = [sys.executable, "-m", "chronus_py", "serve", "--listen", f"127.0.0.1:{port}"]
    cmd += ["--db", str(work / "c.db"), "--nodes", "1024", "--gpus-per-node", "8"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, stdout=log, stderr=log, cwd=work, env=env)
    url = f"http://127.0.0.1:{port}"
    http = httpx.Client(base_url=url, timeout=120)
    try:
        for _ in range(300):
            try:
                if http.get("/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        began = time.monotonic()
        jobs = fill(http, random.Random(29))
        filled = time.monotonic() - began
        time.sleep(3)  # a few rounds, and the figures' first samples
        cluster = http.get("/v1/cluster").json()
        result = {
            "gpus": cluster["gpus"],
            "jobs_submitted": jobs,
            "running": cluster["running"],
            "pending": cluster["pending"],
            "fill_seconds": round(filled, 1),
            "server": server_side(http, "wait17"),
            "browser": browser_side(url),
            "admission": admission_beside_viewers(url),
            "in_process": in_process(),
            "load_average_at_end": os.getloadavg(),
        }
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        http.close()
    path = RESULTS / args.out
    path.parent.mkdir(parents=True, exist_ok=True)  # --out may name a folder under results/
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
