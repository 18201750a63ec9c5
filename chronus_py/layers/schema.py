"""scx_layered's layer-config schema as data: field names, serde types, which kind owns which key,
matcher payloads, enum spellings, limits, and the crate version that introduced each item.

Source: the research notes on scx_layered crate 1.1.2 (``config.rs``; ``main.rs`` for limits and
normalisation). Types are the Rust ones, because serde's rules follow them: an integer type takes
only JSON integers in range (``1.0`` and ``-1`` are errors), ``f64`` takes any JSON number,
``Option`` takes ``null``, a tuple is an array of exactly that length.

Versions are crate versions (what ``scx_layered --version`` prints). Tags before v1.0.7 used the
same number for tag and crate; from v1.0.7 the crate is one ahead (tag v1.0.7 = crate 1.0.8 ...
tag v1.0.19 = crate 1.0.21); tags from v1.1.0 match again.
"""

from __future__ import annotations

import re

Version = tuple[int, int, int]

# Type spellings: "u64" "u32" "usize" "i32" "f64" "bool" "str"; ("opt", T); ("tuple", T, T);
# ("vec", T); ("enum", NAME).
INT_RANGES = {
    "u64": (0, 2**64 - 1),
    "usize": (0, 2**64 - 1),
    "u32": (0, 2**32 - 1),
    "i32": (-(2**31), 2**31 - 1),
}

SPEC_FIELDS = ("name", "comment", "template", "matches", "kind")
SPEC_REQUIRED = ("name", "matches", "kind")

# Fields every kind accepts (LayerCommon, flattened into the kind object): (type, since).
COMMON_FIELDS: dict[str, tuple[object, Version]] = {
    "min_exec_us": ("u64", (1, 0, 0)),
    "yield_ignore": ("f64", (1, 0, 0)),
    "slice_us": ("u64", (1, 0, 5)),
    "fifo": ("bool", (1, 0, 8)),
    "preempt": ("bool", (1, 0, 0)),
    "preempt_first": ("bool", (1, 0, 0)),
    "exclusive": ("bool", (1, 0, 0)),
    "allow_node_aligned": (("opt", "bool"), (1, 0, 10)),
    "skip_remote_node": ("bool", (1, 0, 13)),
    "prev_over_idle_core": ("bool", (1, 0, 12)),
    "weight": ("u32", (1, 0, 6)),
    "disallow_open_after_us": (("opt", "u64"), (1, 0, 10)),
    "disallow_preempt_after_us": (("opt", "u64"), (1, 0, 10)),
    "xllc_mig_min_us": ("f64", (1, 0, 8)),
    "idle_smt": (("opt", "bool"), (1, 0, 6)),
    "growth_algo": (("enum", "growth_algo"), (1, 0, 5)),
    "util_peak_half_life_ms": ("u64", (1, 1, 2)),
    "perf": ("u64", (1, 0, 0)),
    "idle_resume_us": (("opt", "u32"), (1, 0, 12)),
    "nodes": (("vec", "usize"), (1, 0, 5)),
    "llcs": (("vec", "usize"), (1, 0, 5)),
    "placement": (("enum", "placement"), (1, 0, 13)),
    "member_expire_ms": ("u64", (1, 0, 19)),
    "xnuma_threshold": (("tuple", "f64", "f64"), (1, 1, 0)),
    "xnuma_threshold_delta": (("tuple", "f64", "f64"), (1, 1, 0)),
}

# Kind-specific fields: kind -> {field: (type, since)}. util_range is required where present.
_CONFINED = {
    "util_range": (("tuple", "f64", "f64"), (1, 0, 0)),
    "cpus_range": (("opt", ("tuple", "usize", "usize")), (1, 0, 0)),
    "cpus_range_frac": (("opt", ("tuple", "f64", "f64")), (1, 0, 12)),
    "membw_gb": (("opt", "f64"), (1, 0, 19)),
    "protected": ("bool", (1, 0, 12)),
}
KIND_FIELDS: dict[str, dict[str, tuple[object, Version]]] = {
    "Confined": dict(_CONFINED),
    "Grouped": {
        **_CONFINED,
        "util_includes_open_cputime": ("bool", (1, 0, 14)),
        "idle_confined": ("bool", (1, 1, 1)),
    },
    "Open": {},
}
KINDS = tuple(KIND_FIELDS)

DEPRECATED_FIELDS = {
    "idle_smt": "deprecated since crate 1.0.6: parsed, warned about and ignored",
    "allow_node_aligned": "deprecated since crate 1.1.0: parsed, warned about and ignored",
}
# Old spellings that the current parser no longer knows (so they are dropped silently).
RENAMED_FIELDS = {
    "same_over_idle": "prev_over_idle_core",
    "cpus_pct": "cpus_range_frac",
    "cpus_range_pct": "cpus_range_frac",
}

# Matchers: variant -> (payload type, since). Tuple variants take an array of exactly that length.
MATCHERS: dict[str, tuple[object, Version]] = {
    "CgroupPrefix": ("str", (1, 0, 0)),
    "CgroupSuffix": ("str", (1, 0, 13)),
    "CgroupContains": ("str", (1, 0, 14)),
    "CgroupRegex": ("str", (1, 0, 18)),
    "CommPrefix": ("str", (1, 0, 0)),
    "CommPrefixExclude": ("str", (1, 0, 12)),
    "PcommPrefix": ("str", (1, 0, 0)),
    "PcommPrefixExclude": ("str", (1, 0, 12)),
    "NiceAbove": ("i32", (1, 0, 0)),
    "NiceBelow": ("i32", (1, 0, 0)),
    "NiceEquals": ("i32", (1, 0, 0)),
    "UIDEquals": ("u32", (1, 0, 5)),
    "GIDEquals": ("u32", (1, 0, 5)),
    "PIDEquals": ("u32", (1, 0, 5)),
    "PPIDEquals": ("u32", (1, 0, 5)),
    "TGIDEquals": ("u32", (1, 0, 5)),
    "NSPIDEquals": (("tuple", "u64", "u32"), (1, 0, 9)),
    "NSEquals": ("u32", (1, 0, 10)),
    "CmdJoin": ("str", (1, 0, 10)),
    "IsGroupLeader": ("bool", (1, 0, 10)),
    "IsKthread": ("bool", (1, 0, 11)),
    "UsedGpuTid": ("bool", (1, 0, 11)),
    "UsedGpuPid": ("bool", (1, 0, 11)),
    "AvgRuntime": (("tuple", "u64", "u64"), (1, 0, 13)),
    "HintEquals": ("u64", (1, 0, 18)),
    "SystemCpuUtilBelow": ("f64", (1, 0, 20)),
    "DsqInsertBelow": ("f64", (1, 0, 20)),
    "NumaNode": ("u32", (1, 0, 21)),
}
CGROUP_MATCHERS = ("CgroupPrefix", "CgroupSuffix", "CgroupContains")
COMM_MATCHERS = ("CommPrefix", "CommPrefixExclude", "PcommPrefix", "PcommPrefixExclude")
GPU_MATCHERS = ("UsedGpuTid", "UsedGpuPid")
HINT_COMPANIONS = ("SystemCpuUtilBelow", "DsqInsertBelow")
TEMPLATE_MATCHERS = ("CgroupSuffix", "CgroupRegex")

# Enum spellings (exact case) -> since.
ENUMS: dict[str, dict[str, Version]] = {
    "growth_algo": {
        **{
            v: (1, 0, 5)
            for v in (
                "Sticky",
                "Linear",
                "Reverse",
                "Random",
                "Topo",
                "RoundRobin",
                "BigLittle",
                "LittleBig",
                "RandomTopo",
            )
        },
        **{
            v: (1, 0, 12)
            for v in ("NodeSpread", "NodeSpreadReverse", "NodeSpreadRandom", "StickyDynamic")
        },
        **{v: (1, 0, 13) for v in ("CpuSetSpread", "CpuSetSpreadReverse", "CpuSetSpreadRandom")},
    },
    "placement": {v: (1, 0, 13) for v in ("Standard", "Sticky", "Floating")},
}
NODE_SPREAD_ALGOS = ("NodeSpread", "NodeSpreadReverse", "NodeSpreadRandom")

# Limits (bpf intf.h constants and main.rs checks).
MAX_LAYERS = 16
MAX_LAYER_MATCH_ORS = 32
NR_LAYER_MATCH_KINDS = 26
MAX_COMM = 16  # verify allows len <= 16; the BPF copy needs len <= 15 (room for the NUL)
MAX_PATH = 4096  # same story: verify allows <= 4096, the copy needs <= 4095
MAX_LAYER_NAME = 128  # names are truncated to 128 bytes, and a 128-byte copy overruns: <= 127
LAYER_NAME_128_SINCE: Version = (1, 0, 14)  # the buffer was 64 bytes before
MAX_CMDJOIN = 13  # the join command carries a 13-byte name
MAX_CGROUP_REGEXES = 16
MAX_HINT = 1024  # HintEquals takes 0..1024 (exclusive)
MAX_WEIGHT = 10000
MAX_PERF = 1024  # SCX_CPUPERF_ONE; the kernel rejects larger targets
UTIL_HI_LIMIT_UNTIL: Version = (1, 0, 13)  # crates up to this one reject util_range hi > 1.0

LATEST: Version = (1, 1, 2)


def parse_version(text: str) -> Version:
    """``"1.0.21"`` (or ``"v1.0.21"``, or ``scx_layered --version`` output) -> (1, 0, 21)."""
    m = re.search(r"(\d+)\.(\d+)\.(\d+)", text)
    if not m:
        raise ValueError(f"not a version X.Y.Z: {text!r}")
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def show(version: Version) -> str:
    return ".".join(map(str, version))
