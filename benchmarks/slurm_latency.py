"""Decision-to-running latency of ``chronus serve --backend slurm`` on a private Slurm cluster,
and the delay chronus adds to a job's start compared with plain Slurm.

One 1-GPU, 1-second job at a time on an idle 2-node cluster (4 fake GPUs per node), ``--samples``
times per mode. Times: ``submit`` just before ``sbatch`` returns control to this script, the
chronus ``start`` decision (the round's time in the daemon's decision log), and ``running``: the
first line the job's script prints (``date +%s.%N``), so it includes Slurm's own launch.

- decision -> running: what the backend costs (release via slurmrestd + Slurm's scheduling pass
  + launch).
- submit -> running, chronus (``sbatch --hold`` with the marker) vs plain Slurm (``sbatch``):
  the difference is the overhead chronus adds (noticing the held job: ``--slurm-poll`` 0.5 s,
  admission, the round, the release).

    sudo PYTHONPATH=. python benchmarks/slurm_latency.py [--samples 40]
    sudo CHRONUS_TEST_SLURM=PREFIX PYTHONPATH=. python benchmarks/slurm_latency.py

The Slurm is the system's, or the one under ``$CHRONUS_TEST_SLURM``; results go to
``results/slurm_latency_<release>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

from chronus_py.backends.slurm.harness import ServeProcess
from chronus_py.backends.slurm.lab import SlurmLab, why_not_here, workload
from chronus_py.backends.slurm.rest import SlurmRest

RESULTS = Path(__file__).resolve().parent / "results"


def started(lab: SlurmLab, slurm_id: int, timeout: float = 60.0) -> float:
    """Wall time the job's script began (its first run), once the job has ended."""
    rest = SlurmRest(f"unix:{lab.socket}")
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        j = rest.job(slurm_id)
        if j is not None and j.state == "COMPLETED":
            text = (lab.root / "jobs" / f"{slurm_id}.out").read_text()
            return float(re.search(r"^start (\S+)", text, re.M).group(1))
        time.sleep(0.1)
    raise RuntimeError(f"job {slurm_id} did not complete in {timeout:g}s")


def decision_times(log: Path) -> dict[int, float]:
    """Slurm job id -> when chronus first decided to start it (a marked job is
    ``slurm-<jobid>-<submit>`` in chronus)."""
    out = {}
    for line in log.read_text().splitlines():
        m = re.search(r"(\{.*\})\s*$", line)
        if m:
            event = json.loads(m.group(1))
            if event.get("event") == "start":
                out.setdefault(int(event["job"].split("-")[1]), float(event["now"]))
    return out


def stats(xs: list[float]) -> dict:
    xs = sorted(xs)
    p99 = xs[min(len(xs) - 1, round(0.99 * (len(xs) - 1)))]
    return {
        "median_s": round(statistics.median(xs), 3),
        "p99_s": round(p99, 3),
        "min_s": round(xs[0], 3),
        "max_s": round(xs[-1], 3),
        "n": len(xs),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--samples", type=int, default=40)
    args = p.parse_args()
    why = why_not_here()
    if why:
        print(why, file=sys.stderr)
        return 2
    out: dict = {"samples": args.samples, "poll_s": 0.5, "load_before": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="slurm-latency-") as tmp:
        with SlurmLab(Path(tmp) / "lab", nodes=2, gpus_per_node=4) as lab:
            out["slurm"] = lab.release
            out["api"] = SlurmRest(f"unix:{lab.socket}").version
            plain = []
            for _ in range(args.samples):
                t0 = time.time()
                sid = lab.sbatch("--gres=gpu:1", script=workload(1))
                plain.append(started(lab, sid) - t0)
            with ServeProcess(lab, Path(tmp) / "chronus.db") as serve:
                submits, runs = {}, {}
                for _ in range(args.samples):
                    t0 = time.time()
                    sid = lab.sbatch(
                        "--hold",
                        "--gres=gpu:1",
                        "--comment",
                        "chronus: estimate=1",
                        script=workload(1),
                    )
                    submits[sid], runs[sid] = t0, started(lab, sid)
                decided = decision_times(serve.log)
    out["plain_slurm_submit_to_running"] = stats(plain)
    out["chronus_submit_to_running"] = stats([runs[s] - submits[s] for s in runs])
    out["chronus_decision_to_running"] = stats([runs[s] - decided[s] for s in runs])
    out["chronus_overhead_median_s"] = round(
        out["chronus_submit_to_running"]["median_s"]
        - out["plain_slurm_submit_to_running"]["median_s"],
        3,
    )
    out["load_after"] = os.getloadavg()
    print(json.dumps(out, indent=2))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"slurm_latency_{out['slurm']}.json").write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
