"""Take the README's screenshots of the web view (docs/ui/*.png).

    python docs/ui/shoot.py [--large]

Starts a real ``chronus serve`` (sim backend, 12 nodes x 8 GPUs, 30 simulated seconds per
wall second, two tenants and an admin), submits a mix of jobs through the API, and photographs
each page in Debian's Chromium. ``--large`` also fills a 1,024-node server with ~5,000 jobs
(as benchmarks/ui_view.py does) and photographs its timeline.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TOKENS = """tokens:
  - {token: "team-a-token-0123456789", tenant: team-a}
  - {token: "team-b-token-0123456789", tenant: team-b}
  - {token: "admin-token-0123456789", admin: true}
"""
ADMIN = {"Authorization": "Bearer admin-token-0123456789"}


def start(work: Path, *args: str) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "chronus_py", "serve", "--listen", f"127.0.0.1:{port}"]
    cmd += ["--db", str(work / "c.db"), *args]
    log = open(work / "serve.log", "wb")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, stdout=log, stderr=log, cwd=work, env=env)
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if httpx.get(url + "/healthz").status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.1)
    raise RuntimeError((work / "serve.log").read_text())


def small_scenario(http: httpx.Client) -> None:
    now = http.get("/v1/cluster", headers=ADMIN).json()["now"]

    def job(tenant: str, **body) -> None:
        r = http.post("/v1/jobs", headers=ADMIN, json={"tenant": tenant, **body})
        assert r.status_code == 201, r.text

    h = 3600.0
    job("team-a", id="bert-large", gpus=16, estimate_seconds=3 * h, deadlines=[{"at": now + 9 * h}])
    job(
        "team-a", id="resnet-sweep", gpus=8, estimate_seconds=2 * h, deadlines=[{"at": now + 8 * h}]
    )
    job("team-b", id="gpt-small", gpus=24, estimate_seconds=4 * h, deadlines=[{"at": now + 12 * h}])
    job("team-b", id="vit-eval", gpus=4, estimate_seconds=1.5 * h)
    job("team-a", id="notebook-42", gpus=2, estimate_seconds=600)
    job(
        "team-b",
        id="resnet50-elastic",
        model="resnet50",
        elastic={"batch": 256, "iterations": 40000},
        deadlines=[{"at": now + 14 * h}],
    )
    job(
        "team-b",
        id="detr-train",
        gpus=16,
        estimate_seconds=2.5 * h,
        deadlines=[{"at": now + 14 * h}],
    )
    job(
        "team-a",
        id="tight-deadline",
        gpus=8,
        estimate_seconds=2 * h,
        deadlines=[{"at": now + 2.5 * h}],
    )
    job("team-b", id="hparam-7", gpus=8, estimate_seconds=5 * h)
    time.sleep(1)
    job("team-a", id="llama-ft", gpus=32, estimate_seconds=3 * h, deadlines=[{"at": now + 16 * h}])
    job(
        "team-b",
        id="sd-finetune",
        gpus=16,
        estimate_seconds=3 * h,
        deadlines=[{"at": now + 18 * h}],
    )
    job("team-a", id="cancel-me", gpus=4, estimate_seconds=h)
    time.sleep(1)
    http.delete("/v1/jobs/cancel-me", headers=ADMIN)
    time.sleep(25)  # notebook-42 finishes; the figures collect a few samples


def large_scenario(http: httpx.Client) -> None:
    rng = random.Random(29)
    now = http.get("/v1/cluster").json()["now"]
    for i in range(1024):
        work = rng.uniform(4, 20) * 3600
        body = {"id": f"run{i}", "gpus": 8, "estimate_seconds": work}
        if rng.random() < 0.7:
            body["deadlines"] = [{"at": now + work * rng.uniform(1.5, 4)}]
        http.post("/v1/jobs", json=body)
    for i in range(4000):
        work = rng.uniform(2, 16) * 3600
        body = {"id": f"wait{i}", "gpus": rng.choice((1, 2, 4, 8)), "estimate_seconds": work}
        if rng.random() < 0.7:
            body["deadlines"] = [{"at": now + work * rng.uniform(1.5, 4)}]
        http.post("/v1/jobs", json=body)
    time.sleep(3)


def shoot(url: str, shots: list[tuple[str, str, str | None]]) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path="/usr/bin/chromium",
            args=["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"],
        )
        for name, path, token in shots:
            headers = None if token is None else {"Authorization": f"Bearer {token}"}
            context = browser.new_context(
                viewport={"width": 1320, "height": 800}, extra_http_headers=headers
            )
            page = context.new_page()
            page.goto(url + path)
            page.wait_for_timeout(300)
            page.screenshot(path=str(HERE / name), full_page=True)
            context.close()
        browser.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--large", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ui-shots-"))
    (work / "tokens.yaml").write_text(TOKENS)
    proc, url = start(
        work,
        "--tokens",
        str(work / "tokens.yaml"),
        "--nodes",
        "12",
        "--speed",
        "30",
        "--headroom",
        "0.5",
    )
    try:
        with httpx.Client(base_url=url, timeout=60) as http:
            small_scenario(http)
        admin = "admin-token-0123456789"
        shoot(
            url,
            [
                ("timeline.png", "/ui/?span=1d", admin),
                ("jobs.png", "/ui/jobs", admin),
                ("job.png", "/ui/jobs/llama-ft", admin),
                ("cluster.png", "/ui/cluster", admin),
                ("tenant.png", "/ui/?span=1d", "team-a-token-0123456789"),
                ("login.png", "/ui/login", None),
            ],
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    if args.large:
        big = Path(tempfile.mkdtemp(prefix="ui-shots-large-"))
        proc, url = start(big, "--nodes", "1024", "--gpus-per-node", "8")
        try:
            with httpx.Client(base_url=url, timeout=120) as http:
                large_scenario(http)
            shoot(url, [("timeline-8192.png", "/ui/?span=1d", None)])
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
