"""Elastic mode on ElasticFlow's own ITP traces: every trace x policy, beside the published numbers.

For each bundled ITP trace at the cluster size ElasticFlow's published runs use (512 GPUs; 256 for
cluster10) this replays elastic Chronus, the ElasticFlow-style policy and elastic EDF on one
engine, and prints the first-deadline ratio, the elastic ceiling (jobs that meet their deadline
alone on an empty cluster at their fastest size, no overhead), the published ElasticFlow figure,
the guaranteed-job miss ratio, what resizing cost, and wall and CPU seconds. ``--overhead-scales``
also runs elastic Chronus with the resize overhead scaled (what resizing costs it). ``--speed``
times one replay of a 15,000+-job trace made by playing the five traces back to back (then
cluster01 again) on 512 GPUs.

    PYTHONPATH=. python benchmarks/elastic_itp.py [--traces cluster01 ...] [--policies ...]
        [--overhead-scales 0 2] [--speed] [--out benchmarks/results/elastic_itp.json]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import sys
import tempfile
from pathlib import Path

from chronus_py.engine.elastic_setup import replay_trace
from chronus_py.policies import ELASTIC as POLICIES
from chronus_py.readers import traces_dir

RESULTS = Path(__file__).resolve().parent / "results" / "elastic_itp.json"
TRACES = {"cluster01": 64, "cluster02": 64, "cluster03": 64, "cluster05": 64, "cluster10": 32}
PUBLISHED = {
    "cluster01": 0.788,
    "cluster02": 0.822,
    "cluster03": 0.455,
    "cluster05": 0.832,
    "cluster10": 0.981,
}
KEYS = (
    "slo_deadline_ratio",
    "elastic_ceiling",
    "guaranteed_jobs",
    "guaranteed_miss_ratio",
    "declined_jobs",
    "resizes",
    "resizes_per_job",
    "restarts",
    "resize_overhead_gpu_seconds",
    "resize_overhead_share",
    "gpu_utilization",
    "avg_jct",
    "placement_failures",
    "events",
    "wall_seconds",
    "cpu_seconds",
    "jobs",
    "gpus",
)


def one(trace: str, policy: str, nodes: int, scale: float = 1.0) -> dict:
    metrics, _ = replay_trace(
        trace, throughputs=None, policy=policy, nodes=nodes, gpus_per_node=8, resize_scale=scale
    )
    row = {"trace": metrics["trace"], "policy": policy, "resize_scale": scale}
    row.update({k: metrics[k] for k in KEYS})
    print(
        f"{row['trace']:<16} {policy:<16} x{scale:<4g} ratio {row['slo_deadline_ratio']:.3f} "
        f"ceiling {row['elastic_ceiling']:.3f} guaranteed miss "
        f"{row['guaranteed_miss_ratio'] if row['guaranteed_miss_ratio'] is not None else '-'} "
        f"resizes/job {row['resizes_per_job']:.2f} overhead {row['resize_overhead_share']:.4f} "
        f"wall {row['wall_seconds']:.1f}s cpu {row['cpu_seconds']:.1f}s",
        flush=True,
    )
    return row


def long_trace(path: Path) -> int:
    """The five traces back to back, then cluster01 again: one trace of more than 15,000 jobs."""
    rows, offset = [], 0.0
    for name in list(TRACES) + ["cluster01"]:
        with open(traces_dir() / "elasticflow" / f"{name}.csv", newline="") as fh:
            part = list(csv.DictReader(fh))
        start = min(float(r["submission_time"]) for r in part)
        end = 0.0
        for r in part:
            shift = offset - start
            rows.append(
                {
                    **r,
                    "job_id": f"{name}-{len(rows)}-{r['job_id']}",
                    "submission_time": float(r["submission_time"]) + shift,
                    "deadline": float(r["deadline"]) + shift,
                }
            )
            end = max(end, float(r["deadline"]) + shift)
        offset = end
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return len(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", nargs="+", default=list(TRACES), choices=list(TRACES))
    ap.add_argument("--policies", nargs="+", default=list(POLICIES), choices=list(POLICIES))
    ap.add_argument(
        "--overhead-scales",
        nargs="*",
        type=float,
        default=[],
        help="extra elastic-chronus runs with the resize overhead scaled",
    )
    ap.add_argument("--speed", action="store_true", help="also time the 15,000+-job trace")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    rows = []
    for trace in args.traces:
        for policy in args.policies:
            rows.append(one(f"itp-{trace}", policy, TRACES[trace]))
        for scale in args.overhead_scales:
            rows.append(one(f"itp-{trace}", "elastic-chronus", TRACES[trace], scale))
    speed = None
    if args.speed:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "itp-all-back-to-back.csv"
            jobs = long_trace(path)
            speed = one(str(path), "elastic-chronus", 64)
            speed["trace_jobs"] = jobs
    out = {
        "published_elasticflow": PUBLISHED,
        "cluster_nodes": TRACES,
        "rows": rows,
        "speed": speed,
        "machine": {
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_average": os.getloadavg(),
        },
        "command": " ".join(["python"] + sys.argv),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
