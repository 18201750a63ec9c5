"""Mutation fuzzing of every file chronus reads, through the real CLI entry points.

For each reader (state files, HiveD configs, scenarios, tenant maps, sweep grids, host models,
layer-jobs files, layer configs, profiles, samples .npy/.json/.csv, traces) a few valid seed files
are mutated -- bytes flipped, inserted, deleted and duplicated, values swapped for hostile ones
(1e308, NaN, 400-digit integers, non-UTF-8 bytes, alias bombs, deep nesting, header typos) -- and
each input is run through ``chronus_py.cli.main`` in a forked worker with a memory limit and a
time limit. Every run is one of:

    clean      exit 1 or 2 with a one-line message (or argparse's usage error)
    accepted   exit 0 (and, for --json output, strict JSON)
    traceback  an exception escaped main (MemoryError included), or --json printed NaN/Infinity
    hang       no answer within --timeout seconds (the worker is killed)
    crash      the worker died (e.g. a segfault in a C extension)

    nice python benchmarks/fuzz.py [--runs 10000] [--only NAME,...] [--timeout 20]
                                   [--memory-mb 1500] [--out FILE]

Writes benchmarks/results/fuzz.json (counts per reader, and the first few inputs of each bad kind
under benchmarks/results/fuzz-failures/ so they can be replayed).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import multiprocessing as mp
import os
import random
import resource
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"

# -- seeds ----------------------------------------------------------------------------------------
RACK = (REPO / "tests/placement/configs/rack-2x2.yaml").read_bytes()
HOST = (REPO / "examples/hosts/1socket-4gpu.yaml").read_bytes()
PROFILE = (REPO / "examples/profiles/resnet50.json").read_bytes()

STATE = (
    b"now: 7200\nlease: 1200\npolicy: chronus\nheadroom: 0.5\nsolver: {backend: greedy}\n"
    b"cluster: {nodes: 3, gpus_per_node: 8}\nrunning:\n"
    b"  - {id: a, gpus: 8, submit: 0, placement: {node0: [0, 1, 2, 3, 4, 5, 6, 7]}, "
    b"estimate_seconds: 14400,\n"
    b"     progress_seconds: 6150, deadlines: [{at: 15600, value: 1}], "
    b"guaranteed_deadline: 15600}\n"
    b"  - {id: b, gpus: 4, submit: 600, placement: {node1: [0, 1, 2, 3]}, "
    b"estimate_seconds: 30000}\npending:\n"
    b"  - {id: c, gpus: 8, submit: 3000, estimate_seconds: 1800, deadlines: [{at: 9600}]}\n"
    b"  - {id: d, gpus: 4, submit: 3100, estimate_seconds: 20000, "
    b"deadlines: [{at: 36000, value: 2}, {at: 50000, value: 1}]}\n"
)
STATE_JSON = json.dumps(
    {
        "now": 100,
        "policy": "edf",
        "cluster": {"nodes": [{"name": "x", "gpus": 4}]},
        "pending": [
            {"id": "p", "gpus": 2, "submit": 0, "estimate_seconds": 500, "deadlines": [{"at": 900}]}
        ],
    }
).encode()
SCENARIO = b"""name: fuzz seed
cluster: config.yaml
steps:
  - {op: allocate, job: b1, vc: vcB, priority: 0, pods: [{gpus: 1, count: 1}], \
expect: {outcome: placed}}
  - {op: allocate, job: o1, vc: vcA, priority: -1, pods: [{gpus: 8, count: 2}]}
  - {op: allocate, job: a1, vc: vcA, priority: 1, pods: [{gpus: 4}], expect: {nodes_not: [n3]}}
  - {op: set_bad, node: n3}
  - {op: release, job: b1}
  - {op: check, expect: {free: {V100-RACK: 1}}}
"""
TENANTS = b"vc_a: vcA\nvc_b: vcB\ndefault: vcA\n"
GRID = (
    b"traces: [t.csv]\npolicies: [fifo, chronus]\nlease_min: [10, 20]\nnodes: [2]\n"
    b"load: [1, 2]\nsigma: [0, 0.2]\nseeds: [0, 1]\noptions: {chronus: {headroom: [0.9]}}\n"
)
JOBS = (
    b"jobs:\n  - {id: a, gpus: [0, 1], cgroup: training.slice/a.scope, preset: pytorch}\n"
    b"  - {id: b, gpus: [2], thread_names: {support: [ckpt]}, opt_in: true}\n"
)
LAYERS = json.dumps(
    [
        {
            "name": "lat",
            "matches": [[{"CgroupPrefix": "training.slice/a"}, {"CommPrefix": "pt_"}]],
            "kind": {"Confined": {"util_range": [0.5, 0.9], "nodes": [0], "cpus_range": [2, 4]}},
        },
        {"name": "rest", "matches": [[]], "kind": {"Open": {}}},
    ],
    indent=1,
).encode()
CHRONUS_TRACE = (
    b"job_id,user,num_gpu,submit_time,iterations,model_name,duration,interval,"
    b"expect_time_list,expect_value_list,best_effort,job_type\n"
    b"1,vc_a,2,0,100,vgg16,30,1,60-90,10-5,0,soft\n"
    b"2,vc_b,8,5,200,resnet50,45,1,120,10,0,strict\n"
    b"3,vc_a,1,7,50,alexnet,20,1,1,1,1,best\n"
    b"4,vc_b,4,9,80,bert,15,1,40,10,0,strict\n"
)
PLAIN_TRACE = (
    b"job_id,submit_time,duration,num_gpu,tenant,deadline,model_name\n"
    b"a,0,600,2,t1,2000,vgg\nb,100,1200,8,t2,,resnet\nc,150,300,1,t1,900,\n"
)
PHILLY_TRACE = (
    b"timestamp,duration,num_gpus,gpu_time,cluster\n"
    b"1506000000,600,1,600,vc1\n1506000100,3600,8,28800,vc2\n1506000050,100,2,200,vc1\n"
)
HELIOS_TRACE = (
    b"job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,"
    b"duration,queue\n1,u1,vcA,8,16,1,COMPLETED,2020-04-01 00:00:05,"
    b"2020-04-01 00:01:00,"
    b"2020-04-01 01:00:00,3540,55\n2,u2,vcB,0,4,1,FAILED,2020-04-01 00:10:00,"
    b"2020-04-01 00:10:01,2020-04-01 00:20:00,599,1\n"
)
SAMPLES_CSV = (
    b"model,gpus,nodes,iteration,seconds\nresnet50,4,1,1,0.5\nresnet50,4,1,2,0.51\n"
    b"resnet50,4,1,3,0.49\nresnet50,4,1,4,0.5\n"
)
SAMPLES_JSON = json.dumps(
    {
        "model": "resnet50",
        "samples": [
            {"gpus": 2, "seconds": [0.3, 0.31, 0.3, 0.29]},
            {"placement": [4, 4], "seconds": [0.2, 0.21, 0.2]},
        ],
    }
).encode()


def _npy() -> bytes:
    import numpy as np

    buf = io.BytesIO()
    np.save(buf, np.array([0.52, 0.5, 0.51, 0.49, 0.5, 0.52], dtype=np.float64))
    return buf.getvalue()


def _good_npy(name: str, value: float) -> tuple[str, bytes]:
    import numpy as np

    buf = io.BytesIO()
    np.save(buf, np.full(8, value) + np.linspace(0, 0.01, 8))
    return name, buf.getvalue()


@dataclass(frozen=True)
class Target:
    """``files`` are written to a fresh directory; ``mutate`` names the one whose bytes vary."""

    name: str
    files: dict[str, bytes]
    mutate: str
    argv: list[str]
    json_out: bool = False


def targets() -> list[Target]:
    good1 = _good_npy("imagenet_arch_resnet50_gpu_1.npy", 0.5)
    good8 = _good_npy("imagenet_arch_resnet50_gpu_16.npy", 0.6)
    npy_argv = ["profile", "fit", good1[0], good8[0], "imagenet_arch_resnet50_gpu_4.npy"]
    return [
        Target(
            "state-yaml", {"state.yaml": STATE}, "state.yaml", ["plan", "state.yaml"], json_out=True
        ),
        Target(
            "state-json",
            {"state.json": STATE_JSON},
            "state.json",
            ["plan", "state.json"],
            json_out=True,
        ),
        Target(
            "hived-config",
            {"config.yaml": RACK, "s.yaml": SCENARIO},
            "config.yaml",
            ["cells", "run", "s.yaml"],
        ),
        Target(
            "scenario",
            {"config.yaml": RACK, "s.yaml": SCENARIO},
            "s.yaml",
            ["cells", "run", "s.yaml"],
        ),
        Target(
            "tenant-map",
            {"config.yaml": RACK, "t.yaml": TENANTS, "t.csv": CHRONUS_TRACE},
            "t.yaml",
            [
                "replay",
                "--trace",
                "t.csv",
                "--cluster",
                "config.yaml",
                "--tenant-map",
                "t.yaml",
                "--policy",
                "fifo",
                "--json",
            ],
            json_out=True,
        ),
        # --out is a file: a grid that passes validation stops there, cleanly, before any run
        Target(
            "sweep-grid",
            {"g.yaml": GRID, "t.csv": CHRONUS_TRACE, "out": b""},
            "g.yaml",
            ["compare", "--config", "g.yaml", "--out", "out", "--executor", "serial"],
        ),
        Target(
            "host-model",
            {"h.yaml": HOST, "j.yaml": JOBS},
            "h.yaml",
            ["layers", "emit", "--host", "h.yaml", "--jobs", "j.yaml"],
        ),
        Target(
            "layer-jobs",
            {"h.yaml": HOST, "j.yaml": JOBS},
            "j.yaml",
            ["layers", "emit", "--host", "h.yaml", "--jobs", "j.yaml"],
        ),
        Target(
            "layer-config",
            {"l.json": LAYERS, "h.yaml": HOST},
            "l.json",
            ["layers", "validate", "l.json", "--host", "h.yaml"],
        ),
        Target(
            "profile",
            {"p.json": PROFILE},
            "p.json",
            ["profile", "predict", "p.json", "--gpus", "16", "--nodes", "2"],
            json_out=True,
        ),
        Target(
            "samples-npy",
            {good1[0]: good1[1], good8[0]: good8[1], "imagenet_arch_resnet50_gpu_4.npy": _npy()},
            "imagenet_arch_resnet50_gpu_4.npy",
            npy_argv + ["-o", "out.json"],
        ),
        Target(
            "samples-json",
            {good1[0]: good1[1], "s.json": SAMPLES_JSON},
            "s.json",
            ["profile", "fit", good1[0], "s.json", "-o", "out.json"],
        ),
        Target(
            "samples-csv",
            {good1[0]: good1[1], good8[0]: good8[1], "s.csv": SAMPLES_CSV},
            "s.csv",
            ["profile", "fit", good1[0], good8[0], "s.csv", "-o", "out.json"],
        ),
        Target(
            "trace-chronus",
            {"t.csv": CHRONUS_TRACE},
            "t.csv",
            ["replay", "--trace", "t.csv", "--nodes", "2", "--json"],
            json_out=True,
        ),
        Target(
            "trace-plain",
            {"t.csv": PLAIN_TRACE},
            "t.csv",
            ["replay", "--trace", "t.csv", "--nodes", "2", "--policy", "edf", "--json"],
            json_out=True,
        ),
        Target(
            "trace-philly",
            {"t.csv": PHILLY_TRACE},
            "t.csv",
            ["replay", "--trace", "t.csv", "--nodes", "2", "--json"],
            json_out=True,
        ),
        Target(
            "trace-helios",
            {"t.csv": HELIOS_TRACE},
            "t.csv",
            ["replay", "--trace", "t.csv", "--nodes", "2", "--policy", "srtf", "--json"],
            json_out=True,
        ),
    ]


# -- mutations ------------------------------------------------------------------------------------
HOSTILE = [
    b"1e308",
    b"1.0e+308",
    b"-1",
    b"0",
    b"nan",
    b".nan",
    b"NaN",
    b"inf",
    b".inf",
    b"-.inf",
    b"Infinity",
    b"9" * 400,
    b"1" * 5000,
    b"!!int 1e3",
    b"!!float x",
    b"~",
    b"null",
    b"''",
    b'""',
    b"[]",
    b"{}",
    b"[{a: 1}]",
    b"{a: {}}",
    b"\xff\xfe",
    b"\x00",
    b"\xc3",
    b"true",
    b"1700000000000",
    b"2020-01-01",
    b"2020-13-45 99:99:99",
    b"1:20:30",
    b"0x7fffffffffffffff",
    b"-0",
    b"1e-320",
    b"4.9e-324",
    b"&a [1]",
    b"*a",
    b"*zz",
    b"!!python/object:os.system",
    b"? [1, 2]\n: 3",
    b"<<: {a: 1}",
    b"%YAML 1.2",
    b"---",
    b"...",
    b"\t",
    b",",
    b"-",
    b"10-",
    b"1--2",
    b"\r\n",
    b'"\\ud800"',
    b"100000000",
    b"1e9",
    b"[" * 40,
    b"{" * 40,
    b"\xef\xbb\xbf",
]


def alias_bomb() -> bytes:
    lines = [b"a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    for i in range(1, 9):
        prev = f"*a{i - 1}".encode()
        lines.append(f"a{i}: &a{i} [".encode() + b", ".join([prev] * 9) + b"]")
    return b"\n".join(lines) + b"\n"


def mutate(seed: bytes, rng: random.Random) -> bytes:
    data = bytearray(seed)
    for _ in range(rng.choice((1, 1, 1, 2, 3, 5))):
        op = rng.randrange(12)
        pos = rng.randrange(len(data) + 1) if data else 0
        if op == 0 and data:  # flip a bit
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
        elif op == 1:  # random bytes
            data[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8)))
        elif op == 2 and data:  # delete a span
            end = min(len(data), pos + rng.randrange(1, 40))
            del data[pos:end]
        elif op == 3 and data:  # duplicate a span
            start = rng.randrange(len(data))
            span = data[start : start + rng.randrange(1, 80)]
            data[pos:pos] = span * rng.randrange(1, 4)
        elif op in (4, 5, 6):  # a hostile token over a value
            data = bytearray(_replace_token(bytes(data), rng.choice(HOSTILE), rng))
        elif op == 7:  # change a header or key's case / one letter
            data = bytearray(_retype_word(bytes(data), rng))
        elif op == 8:  # deep nesting
            depth = rng.choice((100, 1000, 30000))
            data[pos:pos] = b"[" * depth
        elif op == 9:
            data = bytearray(alias_bomb() + bytes(data))
        elif op == 10 and data:  # swap two lines
            lines = bytes(data).split(b"\n")
            if len(lines) > 2:
                i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
                lines[i], lines[j] = lines[j], lines[i]
                data = bytearray(b"\n".join(lines))
        elif op == 11:  # truncate
            del data[pos:]
    return bytes(data)


def _replace_token(data: bytes, token: bytes, rng: random.Random) -> bytes:
    """Replace one number-or-word run (a value, a key, a cell) by ``token``."""
    import re

    runs = [m.span() for m in re.finditer(rb"[A-Za-z0-9_.+\-]+", data)]
    if not runs:
        return data + token
    a, b = rng.choice(runs)
    return data[:a] + token + data[b:]


def _retype_word(data: bytes, rng: random.Random) -> bytes:
    import re

    runs = [m.span() for m in re.finditer(rb"[a-z_]{3,}", data)]
    if not runs:
        return data
    a, b = rng.choice(runs)
    word = bytearray(data[a:b])
    i = rng.randrange(len(word))
    word[i] = word[i] ^ 0x20 if rng.random() < 0.6 else rng.choice(b"abcdefghijklmnopqrstuvwxyz")
    return data[:a] + bytes(word) + data[b:]


# -- the worker -----------------------------------------------------------------------------------
def _strict_json(text: str) -> bool:
    def refuse(name):
        raise ValueError(name)

    try:
        for line in filter(None, text.splitlines()):
            json.loads(line, parse_constant=refuse)
        return True
    except ValueError:
        try:  # a pretty-printed object (chronus plan)
            json.loads(text, parse_constant=refuse)
            return True
        except ValueError:
            return False


def run_one(target: Target, data: bytes, workdir: Path) -> tuple[str, str]:
    from chronus_py.cli import main

    for name, content in target.files.items():
        (workdir / name).write_bytes(data if name == target.mutate else content)
    out, err = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    os.chdir(workdir)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(target.argv))
    except SystemExit as exc:  # argparse
        code = exc.code if isinstance(exc.code, int) else 2
        if code not in (0, 2):
            return "traceback", f"SystemExit({exc.code!r})"
        return "clean", "usage"
    except BaseException as exc:  # noqa: BLE001 -- classifying is the point
        frames = traceback.extract_tb(exc.__traceback__)
        where = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"
        return "traceback", f"{type(exc).__name__} at {where}: {str(exc)[:200]}"
    finally:
        os.chdir(cwd)
    if code == 0:
        if target.json_out and not _strict_json(out.getvalue()):
            return "traceback", "stdout is not strict JSON (NaN or Infinity)"
        return "accepted", ""
    lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
    if code in (1, 2) and lines and "Traceback" not in err.getvalue():
        return "clean", lines[-1][:200]
    return "traceback", f"exit {code}: {err.getvalue()[:200]!r}"


def worker(conn, memory_mb: int) -> None:
    import faulthandler

    faulthandler.disable()
    soft = _vm_bytes() + memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (soft, soft))
    with tempfile.TemporaryDirectory(prefix="chronus-fuzz-") as tmp:
        workdir = Path(tmp)
        while True:
            job = conn.recv()
            if job is None:
                return
            target, data = job
            for child in workdir.iterdir():
                child.unlink() if child.is_file() else None
            conn.send(run_one(target, data, workdir))


def _vm_bytes() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


class Pool:
    """One forked worker; restarted after a hang or a crash."""

    def __init__(self, memory_mb: int):
        self.memory_mb = memory_mb
        self.ctx = mp.get_context("fork")
        self.proc = None
        self.conn = None

    def start(self) -> None:
        parent, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=worker, args=(child, self.memory_mb), daemon=True)
        self.proc.start()
        child.close()
        self.conn = parent

    def run(self, target: Target, data: bytes, timeout: float) -> tuple[str, str]:
        if self.proc is None or not self.proc.is_alive():
            self.start()
        self.conn.send((target, data))
        if not self.conn.poll(timeout):
            self.proc.kill()
            self.proc.join()
            self.proc = None
            return "hang", f"no answer in {timeout:g} s"
        try:
            return self.conn.recv()
        except (EOFError, ConnectionError):
            self.proc.join()
            code = self.proc.exitcode
            self.proc = None
            return "crash", f"worker exit code {code}"

    def close(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            self.conn.send(None)
            self.proc.join(5)


KINDS = ("clean", "accepted", "traceback", "hang", "crash")


def fuzz(
    target: Target,
    runs: int,
    seed: int,
    timeout: float,
    pool: Pool,
    failures: Path | None,
    log: Callable[[str], None],
) -> dict:
    rng = random.Random(f"{seed}:{target.name}")
    counts = dict.fromkeys(KINDS, 0)
    examples: dict[str, list[str]] = {}
    base = target.files[target.mutate]
    started = time.perf_counter()
    for i in range(runs):
        data = mutate(base, rng)
        kind, detail = pool.run(target, data, timeout)
        counts[kind] += 1
        if kind in ("traceback", "hang", "crash"):
            seen = examples.setdefault(detail, [])
            if failures is not None and len(seen) < 2:
                failures.mkdir(parents=True, exist_ok=True)
                path = failures / f"{target.name}-{kind}-{i}{Path(target.mutate).suffix}"
                path.write_bytes(data)
                seen.append(path.name)
        if (i + 1) % 1000 == 0:
            log(f"  {target.name}: {i + 1}/{runs} {counts}")
    return {
        "runs": runs,
        **counts,
        "seconds": round(time.perf_counter() - started, 1),
        "bad": {k: v for k, v in examples.items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000, help="mutated inputs per reader")
    parser.add_argument("--only", help="comma-separated reader names")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds per input")
    parser.add_argument("--memory-mb", type=int, default=1500, help="address space per worker")
    parser.add_argument("--out", type=Path, default=RESULTS / "fuzz.json")
    args = parser.parse_args(argv)

    import chronus_py.cli  # noqa: F401 -- imported once, before forking the worker
    from chronus_py.cli import COMMANDS

    for name in COMMANDS:
        __import__(f"chronus_py.cli.{name}")
    chosen = targets()
    if args.only:
        names = set(args.only.split(","))
        chosen = [t for t in chosen if t.name in names]
    pool = Pool(args.memory_mb)
    report = {
        "command": "python benchmarks/fuzz.py " + " ".join(argv or sys.argv[1:]),
        "runs_per_reader": args.runs,
        "seed": args.seed,
        "timeout_s": args.timeout,
        "memory_mb": args.memory_mb,
        "readers": {},
    }
    failures = args.out.parent / "fuzz-failures"
    try:
        for target in chosen:
            print(f"{target.name} ...", file=sys.stderr, flush=True)
            report["readers"][target.name] = fuzz(
                target,
                args.runs,
                args.seed,
                args.timeout,
                pool,
                failures,
                lambda m: print(m, file=sys.stderr, flush=True),
            )
            r = report["readers"][target.name]
            print(
                f"{target.name:14} "
                + "  ".join(f"{k} {r[k]}" for k in KINDS)
                + f"  ({r['seconds']} s)",
                flush=True,
            )
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(report, indent=1) + "\n")
    finally:
        pool.close()
    totals = {k: sum(r[k] for r in report["readers"].values()) for k in KINDS}
    report["totals"] = totals
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print("total          " + "  ".join(f"{k} {totals[k]}" for k in KINDS))
    return 1 if totals["traceback"] or totals["hang"] or totals["crash"] else 0


if __name__ == "__main__":
    sys.exit(main())
