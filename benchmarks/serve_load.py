"""``chronus serve`` under load: submission throughput and admission latency at 8,192 GPUs with
5,000 pending jobs, round latency, and resident memory after 100,000 jobs.

    python benchmarks/serve_load.py [--rate 500] [--seconds 20] [--total 100000]

Starts the real server (sim backend, 1,024 nodes x 8 GPUs, --speed 1, default logging to a
file) as a subprocess. Phases:
1. fill: 1,024 jobs of 8 GPUs take every GPU for 800 s, then 5,000 more wait: jobs of 1-8 GPUs
   and 2-16 h (more GPU-time than the running ones, so the SRTF pool preempts nobody and they
   stay pending), 70% with a deadline 1.5-4x their work away as in the Philly traces;
2. measure: an open-loop client sends submissions at ``--rate`` per second for ``--seconds``
   (each request's latency counts from its scheduled instant, so a slow server cannot hide
   by slowing the client down), over 16 keep-alive connections;
3. memory: keeps submitting until ``--total`` jobs exist, then reads the server's VmRSS.
Writes benchmarks/results/serve_load.json (or ``--out``).

``--churn`` replaces phases 2 and 3 by churn (issue 27): after the fill, ``load_client.py`` (a
separate process, aiohttp, open loop) sends ``--rate`` submissions, ``--cancels`` cancellations
and ``--reads`` status reads per second for ``--seconds``, cancelling the pending fill jobs
first and then its own, so pending stays near 5,000; every fill job has a deadline with
``--all-deadlines`` (about 5,000 guarantees), and ``--lease`` shortens the lease so re-plans fall
inside the measurement. ``--checkout DIR`` runs the server from another checkout (e.g. the
pristine tree), so two versions are compared by the same command; the machine's load
(``uptime``) is recorded with every figure. The churn report classes every request by when it
waited against the server's re-plan events (``by_replan_phase``: after a fork, after a lease
ended during a re-plan, near a commit, other), with each class's slowest requests, how late the
client sent them and the longest wait counted from the send (``client_split``); and apart,
the requests due around a commit that the next fork follows within a second (``commit_to_fork``:
a re-plan that outlasted its lease). ``server`` gives each kind as the server timed it
(``chronus_request_seconds``: from reading the request's head to its answer, without the
client's process or the time its bytes waited in the socket): the share over 50 ms and the
p99's bucket.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

RESULTS = Path(__file__).resolve().parent / "results"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Conn:
    def __init__(self, port: int):
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)

    def call(self, method: str, path: str, body=None):
        """One request; a keep-alive connection the server closed while idle is reopened once
        (the request was not sent on it)."""
        data = None if body is None else json.dumps(body)
        headers = {"Content-Type": "application/json"} if data else {}
        for attempt in (0, 1):
            try:
                self.conn.request(method, path, body=data, headers=headers)
                resp = self.conn.getresponse()
                return resp.status, json.loads(resp.read())
            except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
                self.conn.close()
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
                if attempt:
                    raise


def job(
    i: int,
    rng: random.Random,
    now: float,
    gpus: int | None = None,
    estimate: float | None = None,
    deadline_share: float = 0.7,
) -> dict:
    est = estimate or rng.choice((7200.0, 14400.0, 28800.0, 57600.0))
    body = {"id": f"b{i}", "gpus": gpus or rng.choice((1, 1, 1, 2, 4, 8)), "estimate_seconds": est}
    if rng.random() < deadline_share:
        body["deadlines"] = [{"at": now + est * rng.uniform(1.5, 4.0)}]
    return body


def submit_many(port: int, bodies: list[dict], connections: int = 8) -> None:
    chunks = [bodies[i::connections] for i in range(connections)]

    def work(chunk):
        conn = Conn(port)
        for body in chunk:
            status, out = conn.call("POST", "/v1/jobs", body)
            assert status == 201, out

    threads = [threading.Thread(target=work, args=(c,)) for c in chunks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def open_loop(port: int, bodies: list[dict], rate: float, connections: int = 16) -> dict:
    """Send ``bodies`` at ``rate``/s; latency from each request's scheduled instant."""
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    lock = threading.Lock()
    next_index = [0]
    start = time.perf_counter() + 0.2

    def work():
        conn = Conn(port)
        while True:
            with lock:
                i = next_index[0]
                next_index[0] += 1
            if i >= len(bodies):
                return
            due = start + i / rate
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            status, _ = conn.call("POST", "/v1/jobs", bodies[i])
            done = time.perf_counter()
            with lock:
                latencies.append(done - due)
                statuses[status] = statuses.get(status, 0) + 1

    threads = [threading.Thread(target=work) for _ in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    latencies.sort()
    pick = lambda q: latencies[min(int(q * len(latencies)), len(latencies) - 1)]  # noqa: E731
    return {
        "requests": len(bodies),
        "target_rate": rate,
        "elapsed_s": elapsed,
        "achieved_rate": len(bodies) / elapsed,
        "statuses": statuses,
        "latency_p50_ms": 1000 * pick(0.5),
        "latency_p99_ms": 1000 * pick(0.99),
        "latency_max_ms": 1000 * latencies[-1],
    }


def histogram_buckets(port: int, family: str) -> dict[str, list[tuple[float, float]]]:
    """The server's histogram ``family`` in ``/metrics`` now, by its one label's value (``""``
    for a histogram without labels): (upper bound, count at or below it), ascending."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    buckets: dict[str, list[tuple[float, float]]] = {}
    for found in text_string_to_metric_families(text):
        if found.name == family:
            for sample in found.samples:
                if sample.name.endswith("_bucket"):
                    label = next((v for k, v in sample.labels.items() if k != "le"), "")
                    bound = float(sample.labels["le"])
                    buckets.setdefault(label, []).append((bound, sample.value))
    return {label: sorted(counts) for label, counts in buckets.items()}


def bucket_of(buckets: list[tuple[float, float]], q: float) -> float:
    """The upper bound of the bucket that holds quantile ``q`` (``histogram_buckets``' form)."""
    total = buckets[-1][1]
    return next(bound for bound, n in buckets if n >= q * total)


def server_admission_quantiles(port: int) -> dict:
    """p50/p99 of the server's own admission time (handler start to answer, without queueing
    in the event loop), as the upper bound of the histogram bucket that holds them."""
    (buckets,) = histogram_buckets(port, "chronus_admission_seconds").values()
    return {
        "server_admission_p50_ms_at_most": 1000 * bucket_of(buckets, 0.5),
        "server_admission_p99_ms_at_most": 1000 * bucket_of(buckets, 0.99),
    }


HANDLERS = {"submit": "submit", "cancel": "cancel", "read": "get_job"}
"""The churn's requests by the handler that times them (``chronus_request_seconds``)."""


def server_side(before: dict, after: dict) -> dict:
    """Each churn kind's requests as the server timed them between two scrapes of
    ``chronus_request_seconds`` (``histogram_buckets``): how many, the share over 50 ms (a
    bucket's bound, so exact), and the p99's bucket (``bucket_of``). The client's latencies
    add its own process and the machine it shares to these."""
    out = {}
    for kind, handler in HANDLERS.items():
        old = dict(before.get(handler, ()))
        counts = [(bound, n - old.get(bound, 0.0)) for bound, n in after.get(handler, ())]
        total = counts[-1][1] if counts else 0.0
        if not total:
            continue
        at_most = dict(counts)
        out[kind] = {
            "count": int(total),
            "over_50_ms": (total - at_most[0.05]) / total,
            "p99_ms_at_most": 1000 * bucket_of(counts, 0.99),
        }
    return out


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """The process's resident memory now (``VmRSS``) or at its peak so far (``VmHWM``), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rate", type=float, default=500.0)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--total", type=int, default=100_000)
    p.add_argument("--out", default="serve_load.json", help="file name under benchmarks/results")
    p.add_argument("--churn", action="store_true", help="submissions + cancellations + reads")
    p.add_argument("--cancels", type=float, default=500.0, help="--churn: cancellations per s")
    p.add_argument("--reads", type=float, default=100.0, help="--churn: status reads per s")
    p.add_argument("--client-procs", type=int, default=2, help="--churn: load_client processes")
    p.add_argument("--all-deadlines", action="store_true", help="every fill job has a deadline")
    p.add_argument("--lease", type=float, help="the server's --lease (seconds)")
    p.add_argument("--checkout", type=Path, help="run the server from this checkout")
    p.add_argument("--serve-args", default="", help="more server flags, e.g. '--headroom 0'")
    args = p.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="serve-load-"))
    port = free_port()
    log = open(workdir / "serve.log", "wb")
    checkout = (args.checkout or Path(__file__).resolve().parent.parent).resolve()
    extra = ([] if args.lease is None else ["--lease", str(args.lease)]) + args.serve_args.split()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "chronus_py",
            "serve",
            "--listen",
            f"127.0.0.1:{port}",
            "--db",
            str(workdir / "chronus.db"),
            "--nodes",
            "1024",
            "--gpus-per-node",
            "8",
            "--speed",
            "1",
            *extra,
        ],
        stdout=log,
        stderr=log,
        cwd=checkout,
        env={**os.environ, "PYTHONPATH": str(checkout)},
    )
    try:
        for _ in range(600):
            try:
                now = Conn(port).call("GET", "/v1/cluster")[1]["now"]
                break
            except OSError:
                time.sleep(0.05)
        rng = random.Random(1)
        t0 = time.perf_counter()
        submit_many(port, [job(i, rng, now, gpus=8, estimate=800.0) for i in range(1024)])
        while Conn(port).call("GET", "/v1/cluster")[1]["free_gpus"]:
            time.sleep(0.2)
        share = 1.0 if args.all_deadlines else 0.7
        fill_jobs = [job(1024 + i, rng, now, deadline_share=share) for i in range(5000)]
        submit_many(port, fill_jobs)
        time.sleep(1.0)
        cluster = Conn(port).call("GET", "/v1/cluster")[1]
        fill = {
            "seconds": time.perf_counter() - t0,
            "running": cluster["running"],
            "pending": cluster["pending"],
            "free_gpus": cluster["free_gpus"],
        }
        fill["guaranteed"] = sum(
            1
            for j in Conn(port).call("GET", "/v1/jobs?state=pending&limit=10000")[1]["jobs"]
            if j["guaranteed"] is not None
        )
        print("fill:", fill, "uptime:", uptime(), flush=True)
        if args.churn:
            cpu = tree_cpu_seconds(proc.pid)
            timed = histogram_buckets(port, "chronus_request_seconds")
            churn = run_churn(port, workdir, [b["id"] for b in fill_jobs], args)
            churn["server"] = server_side(timed, histogram_buckets(port, "chronus_request_seconds"))
            served = sum(churn[k]["count"] for k in ("submit", "cancel", "read"))
            after = tree_cpu_seconds(proc.pid)
            used = {p: after[p] - cpu.get(p, 0.0) for p in after}
            # every server process (the scheduler, its fronts), and the scheduler's alone
            churn["server_cpu_ms_per_request"] = 1000 * sum(used.values()) / served
            churn["scheduler_cpu_ms_per_request"] = 1000 * used[proc.pid] / served
            churn["round_p99_ms"] = (
                1000 * Conn(port).call("GET", "/healthz")[1]["round_seconds_p99"]
            )
            churn["pending_after"] = Conn(port).call("GET", "/v1/cluster")[1]["pending"]
            churn["rss_mb"] = rss_mb(proc.pid)
            churn["replans"] = replan_events(workdir / "serve.log")
            timeline = churn.pop("timeline")
            churn["around_replans"] = around_replans(timeline, churn["replans"])
            churn["by_replan_phase"] = by_replan_phase(timeline, churn["replans"])
            churn["commit_to_fork"] = commit_to_fork(timeline, churn["replans"])
            print("churn:", json.dumps(churn), flush=True)
            return write(args, checkout, {"fill": fill, "churn": churn})
        n = int(args.rate * args.seconds)
        load = open_loop(port, [job(10_000 + i, rng, now) for i in range(n)], args.rate)
        health = Conn(port).call("GET", "/healthz")[1]
        load.update(server_admission_quantiles(port))
        load["round_p50_ms"] = 1000 * health["round_seconds_p50"]
        load["round_p99_ms"] = 1000 * health["round_seconds_p99"]
        load["pending_after"] = Conn(port).call("GET", "/v1/cluster")[1]["pending"]
        print("load:", load, flush=True)
        have = 6024 + n
        t1 = time.perf_counter()
        submit_many(port, [job(200_000 + i, rng, now) for i in range(args.total - have)])
        memory = {
            "jobs": args.total,
            "seconds": time.perf_counter() - t1,
            "rss_mb": rss_mb(proc.pid),
            "peak_rss_mb": rss_mb(proc.pid, "VmHWM"),
            "uptime": uptime(),
        }
        print("memory:", memory, flush=True)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:  # still busy after a minute (base under a re-plan)
            proc.kill()
            proc.wait()
    write(args, checkout, {"fill": fill, "load": load, "memory": memory})


def cpu_seconds(pid: int) -> float:
    """The process's user + system CPU seconds so far: its work per request does not depend
    on how busy the machine is, where its latency does."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(pid: int) -> dict[int, float]:
    """CPU seconds so far of the server and of each of its child processes alive now (the
    front processes of ``--http-workers``, a re-plan child), by process id."""
    out = {pid: cpu_seconds(pid)}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                out[int(stat.parent.name)] = cpu_seconds(int(stat.parent.name))
        except (OSError, ValueError, IndexError):  # a process that ended meanwhile
            continue
    return out


def replan_events(log: Path) -> list[dict]:
    """The server's ``replan_started`` / ``replan_deferred`` / ``replan_committed`` log lines
    (simulated times, the jobs the commit caught up and in how many steps), in order."""
    out = []
    for line in log.read_text(errors="replace").splitlines():
        if '"replan_' in line:  # the decision lines' spacing differs between versions
            fields = json.loads(line[line.index("{") :])
            if str(fields.get("event", "")).startswith("replan_"):
                out.append(fields)
    return out


AFTER_COMMIT = 5.0
"""Seconds after a re-plan's commit that still count as around it (the collector's passes
and the round that records its promises come after the commit)."""


def around_replans(timeline: list, events: list[dict]) -> dict:
    """Latency of every request due from a re-plan's start to ``AFTER_COMMIT`` s after its
    commit (server's clock), all kinds together, against the requests due at other times: the
    question of issue 27 is whether any request waits behind a re-plan, so max as well as p99.
    A re-plan still running at the end counts to the end."""
    windows, began = [], None
    for e in events:
        if e["event"] == "replan_started":
            began = e["now"]
        elif e["event"] == "replan_committed" and began is not None:
            windows.append((began, e["now"] + AFTER_COMMIT))
            began = None
    if began is not None:
        windows.append((began, None))
    within = lambda due: any(a <= due and (b is None or due <= b) for a, b in windows)  # noqa: E731
    inside = [lat for due, _, lat, _ in timeline if within(due)]
    outside = [lat for due, _, lat, _ in timeline if not within(due)]
    return {"windows": windows, "inside": summary(inside), "outside": summary(outside)}


AFTER_FORK = 3.0
"""Seconds after a re-plan's start (its fork) in which a request counts as after the fork:
the fork itself, then the page copies the parent pays for what it touches next."""
BEFORE_COMMIT = 3.0
"""Seconds before a commit that count as near it (its catch-up steps hold the lock)."""
SLOWEST = 5
"""The slowest requests of each class listed with the instant they were due, to be matched
against what the server did then (its log), and how late the client sent each."""


def client_split(requests: list) -> dict:
    """The client's part of the waits of ``requests`` (timeline rows): the longest lateness
    and the longest wait counted from the send instead of the due instant. Why: at 10 s
    leases the "after a fork" maxima (182-299 ms, session 17) came in runs whose client sent
    requests 100-160 ms late; traced on both sides, the requests over 100 ms came in bursts
    in which the client sent them up to 135 ms late and the server took 44-122 ms of its own
    from reading one to writing its answer: the whole machine stalled (issue 27, "the
    after-a-fork maxima, session 17"). A wait from the send is still not the server's time
    alone (the loopback and both event loops are in it), but the client's lateness is out."""
    if not requests:
        return {}
    return {
        "sent_late_max_ms": 1000 * max(late for _, _, _, late in requests),
        "from_send_max_ms": 1000 * max(lat - max(late, 0.0) for _, _, lat, late in requests),
    }


def slowest_rows(requests: list) -> list:
    """The ``SLOWEST`` slowest of ``requests`` as [due on the server's clock, kind, ms, ms the
    client sent it late]: to find what each waited for."""
    ordered = sorted(requests, key=lambda r: r[2], reverse=True)[:SLOWEST]
    return [
        [round(due, 3), kind, round(1000 * lat, 1), round(1000 * late, 1)]
        for due, kind, lat, late in ordered
    ]


def by_replan_phase(timeline: list, events: list[dict]) -> dict:
    """Latency of every request by when it waited (server's clock, from the instant it was due
    to its answer) against the log's re-plan events: at any instant of the ``AFTER_FORK`` s
    after a re-plan's start ("after_fork") or after a lease ended while one was in flight
    ("after_deferral": the committed plan is told of the new lease then, with a child alive),
    else from ``BEFORE_COMMIT`` s before to ``AFTER_COMMIT`` s after a commit ("near_commit"),
    else "other" (the machine's own noise, to hold the rest against). Each request in one
    class, the first that fits. By its wait, not by when it was due alone: a request due just
    before a fork waits for it too."""
    instants = {
        kind: [e["now"] for e in events if e["event"] == f"replan_{kind}"]
        for kind in ("started", "deferred", "committed")
    }

    def phase(due: float, latency: float) -> str:
        waited = lambda a, b: due <= b and due + latency >= a  # noqa: E731
        if any(waited(s, s + AFTER_FORK) for s in instants["started"]):
            return "after_fork"
        if any(waited(s, s + AFTER_FORK) for s in instants["deferred"]):
            return "after_deferral"
        if any(waited(c - BEFORE_COMMIT, c + AFTER_COMMIT) for c in instants["committed"]):
            return "near_commit"
        return "other"

    names = ("after_fork", "after_deferral", "near_commit", "other")
    phases: dict[str, list] = {name: [] for name in names}
    for row in timeline:
        phases[phase(row[0], row[2])].append(row)
    return {
        name: {
            **summary([latency for _, _, latency, _ in rows]),
            **client_split(rows),
            "slowest": slowest_rows(rows),
        }
        for name, rows in phases.items()
    }


CHAIN_BEFORE, CHAIN_AFTER, CHAIN_GAP = 0.3, 0.5, 1.0
"""A re-plan that outlasts its lease is due again at its commit: its commit's last step, the
release of the replaced plan, the round on the new plan and the next fork come one after the
other (issue 27, session 16, "the wait after a fork"). Requests due from ``CHAIN_BEFORE`` s
before such a commit to ``CHAIN_AFTER`` s after the fork that follows it within ``CHAIN_GAP``
s are the ones that could wait behind more than one of them."""


def commit_to_fork(timeline: list, events: list[dict]) -> dict:
    """Latency of every request due in a commit-to-fork chain (``CHAIN_GAP``), all kinds
    together, with the chains' count and the slowest requests (due, kind, ms)."""
    windows = []
    for i, e in enumerate(events):
        if e["event"] != "replan_committed":
            continue
        fork = next((x["now"] for x in events[i + 1 :] if x["event"] == "replan_started"), None)
        if fork is not None and fork - e["now"] <= CHAIN_GAP:
            windows.append((e["now"] - CHAIN_BEFORE, fork + CHAIN_AFTER))
    inside = [row for row in timeline if any(a <= row[0] <= b for a, b in windows)]
    return {
        "chains": len(windows),
        **summary([latency for _, _, latency, _ in inside]),
        **client_split(inside),
        "slowest": slowest_rows(inside),
    }


def summary(latencies: list[float]) -> dict:
    if not latencies:
        return {"count": 0}
    ordered = sorted(latencies)
    pick = lambda q: 1000 * ordered[min(int(q * len(ordered)), len(ordered) - 1)]  # noqa: E731
    return {"count": len(ordered), "p50_ms": pick(0.5), "p99_ms": pick(0.99), "max_ms": pick(1)}


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def run_churn(port: int, workdir: Path, fill_ids: list[str], args) -> dict:
    """The churn phase, by ``load_client.py`` in its own process."""
    ids = workdir / "cancel_ids.txt"
    ids.write_text("\n".join(random.Random(3).sample(fill_ids, len(fill_ids))))
    out = workdir / "churn.json"
    load_before = uptime()
    subprocess.run(
        [
            sys.executable,
            str(Path(__file__).resolve().parent / "load_client.py"),
            "--url",
            f"http://127.0.0.1:{port}",
            "--seconds",
            str(args.seconds),
            "--submits",
            str(args.rate),
            "--cancels",
            str(args.cancels),
            "--reads",
            str(args.reads),
            "--cancel-ids",
            str(ids),
            "--procs",
            str(args.client_procs),
            "--out",
            str(out),
        ],
        check=True,
    )
    return {**json.loads(out.read_text()), "uptime_before": load_before, "uptime_after": uptime()}


def write(args, checkout: Path, parts: dict) -> None:
    out = {
        "command": " ".join(["python", *sys.argv]),
        "checkout": str(checkout),
        "cpus": os.cpu_count(),
        "load_average_at_end": os.getloadavg(),
        **parts,
    }
    (RESULTS / args.out).parent.mkdir(parents=True, exist_ok=True)  # --out s25/run.json too
    (RESULTS / args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
