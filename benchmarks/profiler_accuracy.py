"""How well the profiler predicts per-iteration time on placements it has not profiled.

Three measurements, per model (a model is a ``(directory, model)`` pair: ``stats/`` and
``stats-2/`` are different setups — resnet50 runs 0.24 s/iteration in one and 0.81 s in the
other):

1. *Extrapolation* (the issue's target): fit on the 1- and 2-node files only (N ≤ 16 GPUs at 8
   per node) and predict every file with N > 16, packed on ceil(N/8) nodes. The shipped traces
   stop at 16 GPUs, so this runs only when larger files are present (``--traces`` a fuller copy).
2. *Leave-one-out* on the 1- and 2-node files: fit on all but one file, predict it (files whose
   removal would leave no 2-node sample are skipped). Baseline: the 1-GPU median.
3. *model_info.json*: fit on 1- and 2-node entries and predict the 4-node entries, per job
   (each model and GPU count on its own, as Chronus profiles a job) and pooled per model (the
   issue-5 evaluation), for the "linear" and "ring" shapes and a shape learned from the other
   models' 4-node entries.
4. *ElasticFlow's A100 tables* (``--throughputs DIR``): the same on 32 and 64 GPUs.
5. *Pollux's placement measurements* (``--placements DIR``): the same on 3 and 4 nodes of 4
   GPUs, packed and spread placements.

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

from chronus_py.errors import InputError
from chronus_py.profiler import INTER_NODE_SHAPES, BeyondRange, Profile, learn_beyond
from chronus_py.samples import (
    Sample,
    Samples,
    from_relative_throughput,
    packed,
    read_file,
    read_relative_throughput,
)

ROOT = Path(__file__).resolve().parent.parent
GPUS_PER_NODE = 8
POLLUX_GPUS_PER_NODE = 4


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


Case = tuple[str, Samples, list[Sample]]
"""(name, the runs a profile is fitted on (at most 2 nodes), the larger runs it predicts)."""


def extrapolate(groups: dict[str, list[Case]], gpus_per_node: int = GPUS_PER_NODE) -> dict:
    """Per inter-node shape, the APE and band coverage of every larger run predicted from its
    case's profile. Shapes: "linear" and "ring" with the default band (the gap between the two
    shapes), and two calibrated from the cluster's other larger runs by ``learn_beyond`` (the
    learned shape, and the learned band around it), as a cluster calibrates from its history:

    - "learned": history is the *other groups'* runs (leave one model out: a model never
      calibrates its own prediction);
    - "learned-case": history is the runs of every *other case*, the same model's other sizes
      included (leave one case out: a cluster that has run this model at another size
      before);
    - "hindsight": history is *every* run, the predicted one included. Not a prediction: the
      best any single shape of the family can do on the data, a floor for the others."""
    fitted = {
        (group, name): Profile(gpus_per_node=gpus_per_node).fit(train)
        for group, cases in groups.items()
        for name, train, _ in cases
    }
    runs = [
        (group, name, s, float(np.median(s.seconds)))
        for group, cases in groups.items()
        for name, _, tests in cases
        for s in tests
    ]

    def calibrated(keep) -> BeyondRange:
        return learn_beyond(
            (fitted[(group, name)], s.placement, seconds)
            for group, name, s, seconds in runs
            if keep(group, name)
        )

    out: dict = {}
    cache: dict = {}
    for shape in (*INTER_NODE_SHAPES, "learned", "learned-case", "hindsight"):
        per_case, everything, covered, learned = {}, [], 0, {}
        for group, cases in groups.items():
            for name, train, tests in cases:
                if shape in INTER_NODE_SHAPES:
                    profile = Profile(gpus_per_node=gpus_per_node, inter_node=shape).fit(train)
                else:
                    key, keep = {
                        "learned": (group, lambda g, _n: g != group),
                        "learned-case": ((group, name), lambda g, n: (g, n) != (group, name)),
                        "hindsight": (None, lambda *_: True),
                    }[shape]
                    if (shape, key) not in cache:
                        cache[(shape, key)] = calibrated(keep)
                    beyond = learned[name] = cache[(shape, key)]
                    profile = Profile(
                        gpus_per_node=gpus_per_node,
                        inter_node=beyond.inter_node,
                        beyond_spread=beyond.spread,
                    ).fit(train)
                errors = {}
                for s in tests:
                    est, measured = (
                        profile.predict(placement=s.placement),
                        float(np.median(s.seconds)),
                    )
                    inside = bool(est.low <= measured <= est.high)
                    errors[s.source] = {
                        "ape": ape(est.iteration_seconds, measured),
                        "in_band": inside,
                        "band": [est.low / measured, est.high / measured],
                    }
                    covered += inside
                per_case[name] = {"per_run": errors, **summary([e["ape"] for e in errors.values()])}
                everything += [e["ape"] for e in errors.values()]
        out[shape] = {
            "cases": per_case,
            "all": summary(everything),
            "band_coverage": covered / len(everything) if everything else None,
            "band_width_median": float(
                np.median(
                    [
                        e["band"][1] - e["band"][0]
                        for c in per_case.values()
                        for e in c["per_run"].values()
                    ]
                )
            ),
            **(
                {
                    "learned": {
                        k: {"inter_node": b.inter_node, "spread": b.spread, "cases": b.cases}
                        for k, b in learned.items()
                    }
                }
                if learned
                else {}
            ),
        }
    return out


def split(samples: list[Sample]) -> tuple[Samples, list[Sample]]:
    return Samples(tuple(s for s in samples if s.nodes <= 2)), [s for s in samples if s.nodes > 2]


def evaluate_model_info(path: Path) -> dict:
    """``model_info.json``: each entry is a G-GPU job's throughput on k nodes relative to the
    same job on one node, so every G has its own unit. Two evaluations:

    - ``per_job`` (what Chronus does: a job is profiled at its own GPU count on 1 and 2 nodes):
      each (model, G) with a 4-node entry is fitted on its 1- and 2-node entries alone;
    - ``pooled`` (the issue-5 evaluation, kept for comparison): each model fitted on all its
      G's 1- and 2-node entries as if they shared one unit, which they do not."""
    table = read_relative_throughput(path)
    per_job: dict[str, list[Case]] = {}
    pooled: dict[str, list[Case]] = {}
    for model in table:
        samples = list(from_relative_throughput(table, model, source=str(path)))
        pooled[model] = [(model, *split(samples))]
        for g in sorted({s.gpus for s in samples}):
            train, tests = split([s for s in samples if s.gpus == g])
            if tests:
                per_job.setdefault(model, []).append((f"{model}/{g} GPUs", train, tests))
    return {"per_job": extrapolate(per_job), "pooled": extrapolate(pooled)}


def evaluate_throughputs(directory: Path) -> dict:
    """ElasticFlow's A100 tables (``<model>.csv``: ``global_batch_size,1,2,4,...,64``, then
    iterations per second per batch size; strong scaling, empty cell = not measured): per
    (model, batch), fit on the packed runs of at most 2 nodes and predict the larger ones. A
    model's tables form one group for the learned shape."""
    groups: dict[str, list[Case]] = {}
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
            groups.setdefault(path.stem, []).append((name, *split(samples)))
    return extrapolate(groups)


def evaluate_placements(directory: Path) -> dict:
    """Pollux's measurements (OSDI'21 artifact, ``simulator/traces/<model>/placements.csv``:
    ``placement,local_bsz,step_time,sync_time``, a placement being one digit per node, the GPUs
    used on it, on nodes of 4 T4 GPUs): per (model, per-GPU batch), fit on the 1- and 2-node
    placements and predict the 3- and 4-node ones, spread placements included. A model's
    batches form one group for the learned shape; a batch without a 2-node or a larger
    placement is skipped."""
    groups: dict[str, list[Case]] = {}
    for path in sorted(directory.glob("*/placements.csv")):
        model = path.parent.name
        by_batch: dict[str, list[Sample]] = defaultdict(list)
        for row in csv.DictReader(path.open()):
            placement = tuple(sorted((int(c) for c in row["placement"]), reverse=True))
            by_batch[row["local_bsz"]].append(
                Sample(
                    model,
                    placement,
                    np.array([float(row["step_time"])]),
                    f"{path}: {row['placement']}, batch {row['local_bsz']}",
                )
            )
        for batch, samples in by_batch.items():
            train, tests = split(samples)
            if tests and any(s.nodes == 2 for s in train):
                groups.setdefault(model, []).append((f"{model}/batch {batch}", train, tests))
    return extrapolate(groups, gpus_per_node=POLLUX_GPUS_PER_NODE)


def show_extrapolation(title: str, result: dict) -> None:
    print(title)
    for shape, r in result.items():
        learned = r.get("learned", {}).values()
        ranges = (
            "   learned weight {:.2f}-{:.2f}, spread {:.2f}-{:.2f}".format(
                min(b["inter_node"] for b in learned),
                max(b["inter_node"] for b in learned),
                min(b["spread"] for b in learned),
                max(b["spread"] for b in learned),
            )
            if learned
            else ""
        )
        print(
            f"  {shape:12s} n {r['all']['n']:4d}  median {fmt(r['all']['median_ape']):>5s}  worst "
            f"{fmt(r['all']['worst_ape']):>5s}  band coverage {r['band_coverage']:.2f}  "
            f"median band width {r['band_width_median']:.2f}{ranges}"
        )


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
    parser.add_argument(
        "--placements",
        type=Path,
        help="also predict the 3- and 4-node placements Pollux measured (not shipped: the "
        "simulator/traces directory of the osdi21-artifact branch of petuum/adaptdl)",
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
    try:
        model_info = evaluate_model_info(args.model_info)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print()
    show_extrapolation(
        "model_info.json, per job: each (model, G) fitted on its 1- and 2-node entries, "
        "predicting its 4-node entry; APE in %",
        model_info["per_job"],
    )
    show_extrapolation(
        "model_info.json, pooled: each model fitted on all its 1-2 node entries in one unit "
        "(issue-5 evaluation); APE in %",
        model_info["pooled"],
    )
    throughputs = evaluate_throughputs(args.throughputs) if args.throughputs else None
    if throughputs:
        print()
        show_extrapolation(
            f"{args.throughputs}: fit on <= 16 GPUs (2 nodes), predict 32 and 64; APE in %",
            throughputs,
        )
    placements = evaluate_placements(args.placements) if args.placements else None
    if placements:
        print()
        show_extrapolation(
            f"{args.placements}: fit on 1- and 2-node placements, predict 3- and 4-node ones "
            "(4 GPUs per node); APE in %",
            placements,
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
                "placements": placements,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
