"""How well the profiler predicts per-iteration time on placements it has not profiled.

Three measurements, per model (a model is a ``(directory, model)`` pair: ``stats/`` and
``stats-2/`` are different setups — resnet50 runs 0.24 s/iteration in one and 0.81 s in the
other):

1. *Extrapolation* (the issue's target): fit on the 1- and 2-node files only (N ≤ 16 GPUs at 8
   per node) and predict every file with N > 16, packed on ceil(N/8) nodes. The shipped traces
   stop at 16 GPUs, so this runs only when larger files are present (``--traces`` a fuller copy).
2. *Leave-one-out* on the 1- and 2-node files: fit on all but one file, predict it (files whose
   removal would leave no 2-node sample are skipped). Baseline: the 1-GPU median.
3. *model_info.json*: fit each model's relative-throughput table on its 1- and 2-node entries and
   predict the 4-node entries, for both inter-node shapes ("linear" and "ring").

Errors are absolute percentage errors of the predicted per-iteration time against the measured
median after dropping the first (warm-up) iteration.

    PYTHONPATH=. python benchmarks/profiler_accuracy.py [--traces DIR] [--inter-node linear|ring]
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from chronus_py.profiler import INTER_NODE_SHAPES, Profile
from chronus_py.samples import Sample, Samples, from_relative_throughput, packed, read_file

ROOT = Path(__file__).resolve().parent.parent
GPUS_PER_NODE = 8


def ape(predicted: float, measured: float) -> float:
    return abs(predicted / measured - 1.0) * 100.0


def summary(errors: list[float]) -> dict:
    return {
        "n": len(errors),
        "median_ape": float(np.median(errors)) if errors else None,
        "worst_ape": float(np.max(errors)) if errors else None,
    }


def trace_groups(traces: Path) -> dict[str, list[Sample]]:
    groups: dict[str, list[Sample]] = defaultdict(list)
    for path in sorted(traces.glob("*/*_arch_*_gpu_*.npy")):
        sample = read_file(path, gpus_per_node=GPUS_PER_NODE, warmup=1)[0]
        groups[f"{path.parent.name}/{sample.model}"].append(sample)
    return {k: sorted(v, key=lambda s: s.gpus) for k, v in sorted(groups.items())}


def evaluate_group(samples: list[Sample], inter_node: str) -> dict:
    train = [s for s in samples if s.nodes <= 2]
    test = [s for s in samples if s.nodes > 2]
    result: dict = {"train_gpus": [s.gpus for s in train]}
    if not any(s.nodes == 2 for s in train):
        result["error"] = "no 2-node sample"
        return result
    profile = Profile(inter_node=inter_node).fit(Samples(tuple(train)))
    coef = profile.coef_
    result["fit"] = {
        "batch_cap_gpus": coef.batch_cap_gpus,
        "compute": coef.compute,
        "overhead": coef.overhead,
        "intra": coef.intra,
        "inter": coef.inter,
        "iteration_cv": profile.iteration_cv_,
        "model_cv": profile.model_cv_,
    }
    extrapolation = {}
    for s in test:
        est = profile.predict(placement=s.placement)
        measured = float(np.median(s.seconds))
        extrapolation[str(s.gpus)] = {
            "measured": measured,
            "predicted": est.iteration_seconds,
            "ape": ape(est.iteration_seconds, measured),
            "in_band": est.low <= measured <= est.high,
        }
    result["extrapolation"] = {
        "per_gpus": extrapolation,
        **summary([e["ape"] for e in extrapolation.values()]),
    }
    loo, baseline = {}, []
    one_gpu = [float(np.median(s.seconds)) for s in train if s.gpus == 1]
    for i, held in enumerate(train):
        rest = train[:i] + train[i + 1 :]
        if not any(s.nodes == 2 for s in rest):
            continue
        profile = Profile(inter_node=inter_node).fit(Samples(tuple(rest)))
        est = profile.predict(placement=held.placement)
        measured = float(np.median(held.seconds))
        loo[str(held.gpus)] = ape(est.iteration_seconds, measured)
        if one_gpu and held.gpus != 1:
            baseline.append(ape(one_gpu[0], measured))
    result["leave_one_out"] = {
        "per_gpus": loo,
        **summary(list(loo.values())),
        "baseline_1gpu": summary(baseline),
    }
    return result


def evaluate_model_info(path: Path) -> dict:
    """Per shape: fit each model on its 1-2 node entries and predict its 4-node entries (in units
    of each G's single-node time); also how often the band holds the measured value."""
    table = json.loads(path.read_text())
    out: dict = {}
    for shape in INTER_NODE_SHAPES:
        per_model, everything, covered = {}, [], 0
        for model in table:
            samples = from_relative_throughput(table, model, source=str(path))
            train = Samples(tuple(s for s in samples if s.nodes <= 2))
            profile = Profile(inter_node=shape).fit(train)
            errors = {}
            for s in samples:
                if s.nodes <= 2:
                    continue
                est, measured = profile.predict(placement=s.placement), float(s.seconds[0])
                errors[f"{s.gpus}x{s.nodes}"] = {
                    "ape": ape(est.iteration_seconds, measured),
                    "in_band": est.low <= measured <= est.high,
                }
                covered += est.low <= measured <= est.high
            per_model[model] = {"per_entry": errors, **summary([e["ape"] for e in errors.values()])}
            everything += [e["ape"] for e in errors.values()]
        out[shape] = {
            "models": per_model,
            "all": summary(everything),
            "band_coverage": covered / len(everything),
        }
    return out


def evaluate_throughputs(directory: Path) -> dict:
    """ElasticFlow's A100 tables (``<model>.csv``: ``global_batch_size,1,2,4,...,64``, then
    iterations per second per batch size; strong scaling, empty cell = not measured): per
    (model, batch), fit on the packed runs of at most 2 nodes and predict the larger ones."""
    per_table, everything, covered = {}, [], 0
    for path in sorted(directory.glob("*.csv")):
        rows = list(csv.reader(path.open()))
        gpus = [int(g) for g in rows[0][1:]]
        for row in rows[1:]:
            name = f"{path.stem}/batch {row[0]}"
            samples = [
                Sample(
                    name,
                    packed(g, GPUS_PER_NODE),
                    np.array([1.0 / float(v)]),
                    f"{path}: {name}, {g} GPUs",
                )
                for g, v in zip(gpus, row[1:])
                if v.strip()
            ]
            train = [s for s in samples if s.nodes <= 2]
            profile = Profile().fit(Samples(tuple(train)))
            errors = {}
            for s in (s for s in samples if s.nodes > 2):
                est, measured = profile.predict(placement=s.placement), float(s.seconds[0])
                errors[str(s.gpus)] = {
                    "ape": ape(est.iteration_seconds, measured),
                    "in_band": est.low <= measured <= est.high,
                }
                covered += est.low <= measured <= est.high
            per_table[name] = {"per_gpus": errors, **summary([e["ape"] for e in errors.values()])}
            everything += [e["ape"] for e in errors.values()]
    return {
        "tables": per_table,
        "all": summary(everything),
        "band_coverage": covered / len(everything) if everything else None,
    }


def fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=Path, default=ROOT / "traces" / "training_trace")
    parser.add_argument(
        "--model-info", type=Path, default=ROOT / "traces" / "training_trace" / "model_info.json"
    )
    parser.add_argument("--inter-node", choices=INTER_NODE_SHAPES, default="linear")
    parser.add_argument(
        "--throughputs",
        type=Path,
        help="also predict 4- and 8-node runs of ElasticFlow's A100 throughput "
        "tables in DIR (not shipped: e.g. a copy of ElasticFlow's "
        "scheduler/throughputs_A100)",
    )
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "profiler_accuracy.json"
    )
    args = parser.parse_args(argv)

    traces = {
        name: evaluate_group(samples, args.inter_node)
        for name, samples in trace_groups(args.traces).items()
    }
    print(f"training traces ({args.traces}), inter_node={args.inter_node}; APE in %")
    print(
        f"{'model':24s} {'fit on GPUs':18s} {'cap':>4s} {'extrap n':>8s} {'median':>7s} "
        f"{'worst':>7s} {'LOO n':>6s} {'median':>7s} {'worst':>7s} {'1-GPU baseline med':>19s}"
    )
    for name, r in traces.items():
        if "error" in r:
            print(f"{name:24s} {','.join(map(str, r['train_gpus'])):18s} {r['error']}")
            continue
        ex, loo = r["extrapolation"], r["leave_one_out"]
        cap = r["fit"]["batch_cap_gpus"]
        print(
            f"{name:24s} {','.join(map(str, r['train_gpus'])):18s} {cap or '-':>4} {ex['n']:8d} "
            f"{fmt(ex['median_ape']):>7s} {fmt(ex['worst_ape']):>7s} {loo['n']:6d} "
            f"{fmt(loo['median_ape']):>7s} {fmt(loo['worst_ape']):>7s} "
            f"{fmt(loo['baseline_1gpu']['median_ape']):>19s}"
        )
    model_info = evaluate_model_info(args.model_info)
    print("\nmodel_info.json: fit on 1-2 node entries, predict 4-node entries; APE in %")
    for shape, r in model_info.items():
        per = ", ".join(
            f"{m} {fmt(v['median_ape'])}/{fmt(v['worst_ape'])}" for m, v in r["models"].items()
        )
        print(
            f"  {shape:6s} all: median {fmt(r['all']['median_ape'])} worst "
            f"{fmt(r['all']['worst_ape'])} band coverage {r['band_coverage']:.2f}   "
            f"(median/worst per model: {per})"
        )
    throughputs = evaluate_throughputs(args.throughputs) if args.throughputs else None
    if throughputs:
        print(f"\n{args.throughputs}: fit on <= 16 GPUs (2 nodes), predict 32 and 64; APE in %")
        print(
            f"  all: median {fmt(throughputs['all']['median_ape'])} worst "
            f"{fmt(throughputs['all']['worst_ape'])} band coverage "
            f"{throughputs['band_coverage']:.2f} (n {throughputs['all']['n']})"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "traces_dir": str(args.traces),
                "inter_node": args.inter_node,
                "gpus_per_node": GPUS_PER_NODE,
                "traces": traces,
                "model_info": model_info,
                "throughputs": throughputs,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
