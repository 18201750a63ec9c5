"""``chronus host discover``: read this Linux host's NUMA nodes, LLCs, SMT siblings and GPUs from
sysfs and print (or write) the host YAML the layer emitter and validator take.

    chronus host discover -o hosts/$(hostname).yaml
"""

from __future__ import annotations

import sys

from chronus_py.errors import InputError


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("host", help="describe a host's CPU/NUMA/GPU topology as YAML")
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    discover = sub.add_parser("discover", help="read the topology of this Linux host from sysfs")
    discover.add_argument(
        "-o", "--output", metavar="FILE", help="write the YAML here (default: print it)"
    )
    discover.add_argument("--name", help="host name in the YAML (default: the kernel hostname)")
    discover.add_argument(
        "--root",
        default="/",
        metavar="DIR",
        help="read sys/ under DIR instead of / (a copied or fake sysfs tree)",
    )
    parser.set_defaults(func=run)


def run(args) -> int:
    from chronus_py.layers.discover import discover_host

    found = discover_host(args.root, name=args.name)
    for note in found.notes:
        print(f"chronus host discover: note: {note}", file=sys.stderr)
    text = found.host.to_yaml()
    if args.output:
        try:
            with open(args.output, "w", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as exc:
            raise InputError(args.output, f"cannot write: {exc.strerror}") from None
        host = found.host
        print(
            f"{args.output}: host {host.name}: {len(host.nodes)} NUMA node(s), {len(host.cpus)} "
            f"CPUs, "
            f"{len(host.llcs)} LLC(s), {len(host.gpus)} GPU(s)",
            file=sys.stderr,
        )
    else:
        sys.stdout.write(text)
    return 0
