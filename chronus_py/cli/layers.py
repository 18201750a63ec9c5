"""``chronus layers validate|emit``: check scx_layered layer configs, and emit one by hand.

    chronus layers validate cfg.json --host hosts/gpu-a01.yaml --scx-version 1.0.21 [--lenient]
    chronus layers emit --host examples/hosts/2socket-8gpu.yaml --jobs jobs.yaml -o gpu-a01.json

validate exits 0 when valid, 1 when invalid (one ``layer[i].field: why`` line per problem,
warnings prefixed ``warning:``), 2 when the input cannot be read.

The jobs YAML for ``emit`` is ``jobs:`` followed by a list of mappings with ``id``, ``gpus``
(host GPU indices) and optionally ``cgroup``, ``preset``, ``thread_names`` (tier -> names) and
``opt_in`` (default true).
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from chronus_py.errors import InputError

SHOWN = 100
"""Problems ``layers validate`` prints, at most: a config of a million bad layers printed a
million lines (the summary line still counts them all)."""


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("layers", help="validate or emit scx_layered host layer configs")
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    check = sub.add_parser(
        "validate", help="check a layer config as strictly as scx_layered, or more"
    )
    check.add_argument("file", metavar="FILE.json")
    check.add_argument(
        "--host", metavar="HOST.yaml", help="also check NUMA/LLC ids against this host"
    )
    check.add_argument(
        "--scx-version", metavar="X.Y.Z", help="flag features newer than this scx_layered"
    )
    check.add_argument(
        "--lenient",
        action="store_true",
        help="report what scx_layered ignores or fails on only at start-up as warnings",
    )
    check.add_argument(
        "--flags",
        metavar="FLAGS",
        help="the scx_layered flags it will run with, written --flags='--enable-gpu-support ...'",
    )
    check.set_defaults(func=run_validate)

    emit = sub.add_parser(
        "emit", help="emit the layer config for one host and the jobs placed on it"
    )
    emit.add_argument("--host", required=True, metavar="HOST.yaml")
    emit.add_argument("--jobs", required=True, metavar="JOBS.yaml")
    emit.add_argument(
        "-o", "--output", metavar="FILE", help="write the JSON here (default: print it)"
    )
    emit.add_argument(
        "--scx-version", metavar="X.Y.Z", help="target scx_layered version (default: newest known)"
    )
    emit.add_argument(
        "--no-gpu-matchers", action="store_true", help="do not use UsedGpuTid (NVIDIA kprobes)"
    )
    emit.set_defaults(func=run_emit)


def _version(text: str | None) -> str | None:
    from chronus_py.layers.schema import parse_version

    if text is not None:
        try:
            parse_version(text)
        except ValueError as exc:
            raise InputError("--scx-version", str(exc)) from None
    return text


def run_validate(args) -> int:
    from chronus_py.inputs import as_input_error
    from chronus_py.layers.host import HostTopology
    from chronus_py.layers.validate import has_errors, validate_layers
    from placement.errors import PlacementError
    from placement.loading import read_bytes

    version = _version(args.scx_version)
    try:  # bounded like every other file (256 MiB, checked before reading)
        data = read_bytes(args.file, what="layer config")
    except PlacementError as exc:
        raise as_input_error(exc, args.file) from None
    try:  # not decode(): a BOM stays in the text, for the validator to refuse as serde_json does
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(args.file, f"not UTF-8 text (byte {exc.start})", line=line) from None
    host = HostTopology.from_yaml(args.host) if args.host else None
    flags = None if args.flags is None else shlex.split(args.flags)
    problems = validate_layers(
        text, host=host, scx_version=version, lenient=args.lenient, flags=flags
    )
    for problem in problems[:SHOWN]:
        prefix = "" if problem.severity == "error" else "warning: "
        print(f"{prefix}{problem}")
    if len(problems) > SHOWN:
        print(f"... and {len(problems) - SHOWN} more problem(s), not shown")
    errors = sum(p.severity == "error" for p in problems)
    warnings = len(problems) - errors
    verdict = "invalid" if has_errors(problems) else "valid"
    print(f"{args.file}: {verdict} ({errors} error(s), {warnings} warning(s))", file=sys.stderr)
    return 1 if errors else 0


def run_emit(args) -> int:
    from chronus_py.layers.emit import emit_host_layers
    from chronus_py.layers.host import HostTopology

    version = _version(args.scx_version)
    host = HostTopology.from_yaml(args.host)
    from chronus_py.layers.jobs_file import read_jobs

    jobs = read_jobs(args.jobs)
    out = emit_host_layers(host, jobs, scx_version=version, gpu_matchers=not args.no_gpu_matchers)
    if out is None:
        print(f"host {host.name}: no opted-in job, no layer config", file=sys.stderr)
        return 0
    text = out.to_json()
    if args.output:
        try:
            Path(args.output).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise InputError(args.output, f"cannot write: {exc.strerror}") from None
    else:
        sys.stdout.write(text)
    print(f"/etc/default/scx: {out.env_line()}", file=sys.stderr)
    return 0
