"""``chronus profile fit|predict|learn``: fit a runtime profile from timing samples, query it,
and learn from a cluster's larger runs how to predict past the profiled nodes.

chronus profile fit stats/imagenet_arch_resnet50_gpu_{1,2,4,8,16}.npy -o profile.json
chronus profile predict profile.json --gpus 32 --nodes 4
{"iteration_seconds": 0.0796, "low": 0.0669, "high": 0.0923}
chronus profile learn --run resnet50.json resnet50_gpu_32.npy --run vgg16.json vgg16_gpu_64.npy
{"inter_node": 0.31, "beyond_spread": 0.29, "cases": 2, "band": 0.95}
"""

from __future__ import annotations

import argparse
import json
import math
import sys


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def int_list(text: str) -> list[int]:
    return [positive_int(part) for part in text.split(",")]


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "profile", help="fit per-iteration runtime profiles and predict from them"
    )
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    fit = sub.add_parser("fit", help="fit a profile from the sample files of one model")
    fit.add_argument(
        "files", nargs="+", metavar="FILE", help=".npy, .json or .csv per-iteration seconds"
    )
    fit.add_argument("-o", "--output", help="write profile.json here (default: print it)")
    fit.add_argument(
        "--gpus",
        type=int_list,
        metavar="N[,N...]",
        help="GPU count of every file, or one per file in order "
        "(default: from the name, ..._gpu_<N>)",
    )
    fit.add_argument(
        "--gpus-per-node",
        type=positive_int,
        default=8,
        help="node count of a file = ceil(GPUs / this) (default 8)",
    )
    fit.add_argument("--warmup", type=int, default=1, help="leading iterations to drop (default 1)")
    fit.add_argument(
        "--model", help="the model to take from a model_info.json table or a multi-model CSV"
    )
    fit.add_argument(
        "--inter-node",
        type=inter_node,
        default="linear",
        help="growth of the inter-node cost past 2 nodes: linear (default), ring, or the weight "
        "of linear in a mix of both, e.g. 0.3 (learned from a cluster's larger runs: "
        "`chronus profile learn`)",
    )
    fit.add_argument(
        "--beyond-spread",
        type=non_negative,
        metavar="S",
        help="band past the profiled nodes: predicted x [e^-S, e^S], learned from the cluster's "
        "larger runs by `chronus profile learn` (default: the gap between linear and ring)",
    )
    fit.set_defaults(func=run)

    predict = sub.add_parser("predict", help="print {iteration_seconds, low, high} for a placement")
    predict.add_argument("profile", metavar="PROFILE", help="profile.json written by `profile fit`")
    predict.add_argument("--gpus", type=positive_int, help="GPUs in the job")
    predict.add_argument(
        "--nodes", type=positive_int, help="nodes to spread them over (default: packed)"
    )
    predict.add_argument("--placement", type=int_list, metavar="N,N,...", help="GPUs on each node")
    predict.add_argument(
        "--iterations",
        type=positive_int,
        help="print the runtime {seconds, low, high} of this many iterations instead",
    )
    predict.set_defaults(func=run)

    learn = sub.add_parser(
        "learn",
        help="learn the inter-node shape and the band past the profiled nodes from larger runs",
    )
    learn.add_argument(
        "--run",
        nargs=2,
        action="append",
        required=True,
        metavar=("PROFILE", "FILE"),
        help="a profile.json and a sample file of the same model on more nodes than it was "
        "fitted on (repeat for every run the cluster has seen)",
    )
    learn.add_argument(
        "--band", type=float, default=0.95, help="probability the band should hold (default 0.95)"
    )
    learn.add_argument(
        "--warmup", type=int, default=1, help="leading iterations to drop (default 1)"
    )
    learn.set_defaults(func=run)


def inter_node(text: str) -> str | float:
    """``--inter-node``: "linear", "ring" or a number in [0, 1]."""
    if text in ("linear", "ring"):
        return text
    try:
        weight = float(text)
    except ValueError:
        weight = math.nan
    if not 0.0 <= weight <= 1.0:
        raise argparse.ArgumentTypeError(
            f"expected linear, ring or a number in [0, 1], got {text!r}"
        )
    return weight


def non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def run(args: argparse.Namespace) -> int:
    return {"fit": _fit, "predict": _predict, "learn": _learn}[args.action](args)


def _fit(args: argparse.Namespace) -> int:
    from chronus_py.errors import InputError
    from chronus_py.profiler import Profile
    from chronus_py.samples import read_samples

    if args.warmup < 0:
        raise InputError("--warmup", f"must be >= 0, got {args.warmup}")
    gpus = args.gpus[0] if args.gpus and len(args.gpus) == 1 else args.gpus
    samples = read_samples(
        args.files,
        gpus=gpus,
        gpus_per_node=args.gpus_per_node,
        warmup=args.warmup,
        model=args.model,
    )
    import numpy as np

    where = ", ".join(map(str, args.files))
    try:
        profile = Profile(
            gpus_per_node=args.gpus_per_node,
            inter_node=args.inter_node,
            beyond_spread=args.beyond_spread,
        ).fit(samples)
    except np.linalg.LinAlgError as exc:
        raise InputError(where, f"the samples cannot be fitted ({exc})") from None
    try:  # a profile `predict` would refuse is never written (NaN/Infinity are not JSON)
        text = json.dumps(profile.to_dict(), indent=2, allow_nan=False) + "\n"
    except ValueError:
        raise InputError(where, "the fit has non-finite coefficients; check the samples") from None
    if args.output is None:
        sys.stdout.write(text)
        return 0
    try:
        with open(args.output, "w") as fh:
            fh.write(text)
    except OSError as exc:
        raise InputError(args.output, f"cannot write ({exc.strerror})") from None
    c = profile.coef_
    regime = (
        "weak scaling"
        if c.batch_cap_gpus is None
        else f"global batch capped at {c.batch_cap_gpus} GPUs"
    )
    print(
        f"{args.output}: {profile.model_}, {profile.n_samples_} placements, {regime}; "
        f"compute {c.compute:.4g} s, overhead {c.overhead:.4g} s, intra {c.intra:.4g} s, "
        f"inter {c.inter:.4g} s per node; iteration cv {profile.iteration_cv_:.3f}, "
        f"model cv {profile.model_cv_:.3f}"
    )
    return 0


def _predict(args: argparse.Namespace) -> int:
    from chronus_py.errors import InputError
    from chronus_py.inputs import load_json
    from chronus_py.profiler import Profile

    data = load_json(args.profile, what="profile")
    profile = Profile.from_dict(data, source=args.profile)
    if args.gpus is None and args.placement is None:
        raise InputError("arguments", "give --gpus (with optional --nodes) or --placement")
    try:
        if args.iterations is None:
            est = profile.predict(args.gpus, args.nodes, placement=args.placement)
            out = {"iteration_seconds": est.iteration_seconds, "low": est.low, "high": est.high}
        else:
            rt = profile.runtime(args.iterations, args.gpus, args.nodes, placement=args.placement)
            out = {"seconds": rt.seconds, "low": rt.low, "high": rt.high}
    except ValueError as exc:
        raise InputError("arguments", str(exc)) from None
    try:  # coefficients near 1e308 overflow to infinity, which is not JSON
        print(json.dumps(out, allow_nan=False))
    except ValueError:
        raise InputError(
            args.profile, "the profile predicts a non-finite time; check its coefficients"
        ) from None
    return 0


def _learn(args: argparse.Namespace) -> int:
    import numpy as np

    from chronus_py.errors import InputError
    from chronus_py.inputs import load_json
    from chronus_py.profiler import Profile, learn_beyond
    from chronus_py.samples import read_samples

    if not 0 < args.band < 1:
        raise InputError("--band", f"must be in (0, 1), got {args.band}")
    if args.warmup < 0:
        raise InputError("--warmup", f"must be >= 0, got {args.warmup}")
    cases = []
    for profile_path, sample_path in args.run:
        profile = Profile.from_dict(load_json(profile_path, what="profile"), source=profile_path)
        samples = read_samples(
            [sample_path],
            gpus_per_node=profile.gpus_per_node,
            warmup=args.warmup,
            model=profile.model_ or None,
        )
        fitted = max((len(r.placement) for r in profile.observations_), default=1)
        for sample in samples:
            if sample.nodes <= fitted:
                raise InputError(
                    sample.source,
                    f"runs on {sample.nodes} node(s), within the {fitted} the profile "
                    f"{profile_path} was fitted on: nothing to learn past it",
                )
            cases.append((profile, sample.placement, float(np.median(sample.seconds))))
    try:
        beyond = learn_beyond(cases, band=args.band)
    except ValueError as exc:
        raise InputError("--run", str(exc)) from None
    print(
        json.dumps(
            {
                "inter_node": beyond.inter_node,
                "beyond_spread": beyond.spread,
                "cases": beyond.cases,
                "band": args.band,
            }
        )
    )
    return 0
