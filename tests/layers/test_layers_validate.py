"""Every validator rule has a failing and a passing case; upstream examples pass leniently; the
serde round-trips agree with which keys the validator calls ignored."""

from __future__ import annotations

import json

import pytest
from layers_helpers import REST, UPSTREAM, config, layer, make_host

from chronus_py.layers.validate import RULES, has_errors, validate_layers

TWO_NODES = make_host(nodes=2)
ONE_NODE = make_host(nodes=1, llcs_per_node=1)


def comm_groups(n):
    return [[{"CommPrefix": f"c{i}"}] for i in range(n)]


def text(obj):
    return json.dumps(obj)


def L(**kw):
    return config(layer(**kw))


# rule -> list of (bad, good, options). bad must raise the rule; good must not.
CASES = {
    "json": [
        ('[{"name": NaN}]', config(layer()), {}),
        ('[{"name": "a", "x": Infinity}]', config(layer()), {}),
        ('[{"name": "a", "x": 1e400}]', config(layer()), {}),
        (
            '[{"name": "\\ud800", "matches": [[]], "kind": {"Open": {}}}]',
            '[{"name": "\\u00e9", "matches": [[]], "kind": {"Open": {}}}]',
            {},
        ),
        ("\ufeff" + text(config(layer())), text(config(layer())), {}),
        ('[{"name": "a",}]', config(layer()), {}),
        ("[" * 128 + "]" * 128, "[" * 127 + "]" * 127, {}),
        (
            '[{"name": "rest", "matches": [[]], "kind": {"Open": {"x": 1' + "0" * 400 + "}}}]",
            '[{"name": "rest", "matches": [[]], "kind": {"Open": {"x": 1' + "0" * 300 + "}}}]",
            {},
        ),
        ("[" * 5000 + "]" * 5000, "[]", {}),
    ],
    "top-level": [('{"layers": []}', config(layer()), {})],
    "layer-shape": [
        ('[["rest", null, null, [[]], {"Open": {}}]]', [REST], {}),
        ("[1]", [REST], {}),
    ],
    "missing-field": [
        ([{"name": "rest", "matches": [[]]}], [REST], {}),
        ([{"matches": [[]], "kind": {"Open": {}}}], [REST], {}),
        (
            config(
                {"name": "a", "matches": [[{"CommPrefix": "x"}]], "kind": {"Grouped": {"perf": 1}}}
            ),
            L(kind="Grouped", perf=1),
            {},
        ),
    ],
    "type": [
        (L(perf=1024.0), L(perf=1024), {}),
        (L(slice_us=-1), L(slice_us=1), {}),
        (L(weight=2**32), L(weight=2**32 - 1), {}),
        (L(nodes=None), L(nodes=[]), {}),
        (L(util_range=[0.1, 0.2, 0.3]), L(util_range=[0.1, 0.2]), {}),
        (L(util_range=None), L(util_range=[0, 1]), {}),
        (L(cpus_range=[1.0, 2]), L(cpus_range=None), {}),
        (L(matches=[[{"NiceAbove": 2**31}]]), L(matches=[[{"NiceAbove": -(2**31)}]]), {}),
        (L(matches=[[{"NSEquals": [5]}]]), L(matches=[[{"NSEquals": 5}]]), {}),
        (L(matches=[[{"NSPIDEquals": [1, 2, 3]}]]), L(matches=[[{"NSPIDEquals": [1, 2]}]]), {}),
        (L(matches=[[{"AvgRuntime": [0, -1]}]]), L(matches=[[{"AvgRuntime": [0, 100]}]]), {}),
        (L(matches=[[{"IsGroupLeader": 1}]]), L(matches=[[{"IsGroupLeader": True}]]), {}),
        (L(kind="Grouped", protected="yes"), L(kind="Grouped", protected=True), {}),
        (L(preempt=None), L(preempt=False), {}),
        (L(disallow_open_after_us=1.5), L(disallow_open_after_us=None), {}),
        (L(yield_ignore="0.5"), L(yield_ignore=1), {}),
        (L(growth_algo={"Sticky": None}), L(growth_algo="Sticky"), {}),
        ([{"name": None, "matches": [[]], "kind": {"Open": {}}}], [REST], {}),
        (
            [{"name": "r", "comment": 5, "matches": [[]], "kind": {"Open": {}}}],
            [{**REST, "comment": None}],
            {},
        ),
        ([{"name": "r", "matches": [{}], "kind": {"Open": {}}}], [REST], {}),
        ([{"name": "r", "matches": None, "kind": {"Open": {}}}], [REST], {}),
        ([{"name": "r", "matches": [[]], "kind": {"Open": []}}], [REST], {}),
    ],
    "duplicate-key": [
        ('[{"name": "a", "name": "b", "matches": [[]], "kind": {"Open": {}}}]', [REST], {}),
        (
            '[{"name": "a", "matches": [[]], "kind": {"Open": {"perf": 1, "perf": 2}}}]',
            '[{"name": "a", "matches": [[]], "kind": {"Open": {"perf": 1}}}]',
            {},
        ),
        (
            '[{"name": "a", "matches": [[]], "kind": {"Grouped": {"util_range": [0, 1], '
            '"util_range": [0, 1]}}}]',
            '[{"name": "a", "matches": [[]], "kind": {"Grouped": {"util_range": [0, 1]}}}]',
            {},
        ),
    ],
    "matcher": [
        (L(matches=[[{"CommPrefix": "x", "PcommPrefix": "y"}]]), L(), {}),
        (L(matches=[[{"commprefix": "x"}]]), L(), {}),
        (L(matches=[[{}]]), L(), {}),
        (L(matches=[["CommPrefix"]]), L(), {}),
        (
            '[{"name": "a", "matches": [[{"CommPrefix": "x", "CommPrefix": "y"}]], "kind": '
            '{"Open": {}}}, {"name": "r", "matches": [[]], "kind": {"Open": {}}}]',
            L(),
            {},
        ),
    ],
    "kind": [
        ([{"name": "r", "matches": [[]], "kind": "Open"}], [REST], {}),
        (
            [
                {
                    "name": "r",
                    "matches": [[]],
                    "kind": {"Open": {}, "Grouped": {"util_range": [0, 1]}},
                }
            ],
            [REST],
            {},
        ),
        ([{"name": "r", "matches": [[]], "kind": {"open": {}}}], [REST], {}),
        ([{"name": "r", "matches": [[]], "kind": {}}], [REST], {}),
    ],
    "enum": [
        (L(growth_algo="topo"), L(growth_algo="Topo"), {}),
        (L(placement="Fast"), L(placement="Floating"), {}),
    ],
    "template": [
        (
            [{**layer(), "template": {"CgroupPrefix": "a/"}}, REST],
            [{**layer(), "template": {"CgroupSuffix": "a/"}}, REST],
            {},
        ),
    ],
    "version-enum": [
        (
            L(matches=[[{"NumaNode": 0}]]),
            L(matches=[[{"NumaNode": 0}]]),
            ({"scx_version": "1.0.20"}, {"scx_version": "1.0.21"}),
        ),
        (
            L(growth_algo="CpuSetSpread"),
            L(growth_algo="CpuSetSpread"),
            ({"scx_version": "1.0.12"}, {"scx_version": "1.0.13"}),
        ),
    ],
    "layer-count": [
        ([], [REST], {}),
        (
            config(*[layer(name=f"l{i}") for i in range(16)]),
            config(*[layer(name=f"l{i}") for i in range(15)]),
            {},
        ),
    ],
    "terminal": [
        (config(layer(), rest=False), config(layer()), {}),
        ([{**REST, "matches": [[], []]}], [REST], {}),
        ([{**REST, "matches": []}], [REST], {}),
    ],
    "empty-matches": [(L(matches=[]), L(), {})],
    "or-limit": [(L(matches=comm_groups(33)), L(matches=comm_groups(32)), {})],
    "and-limit": [
        (
            L(matches=[[{"NiceAbove": -i} for i in range(27)]]),
            L(matches=[[{"NiceAbove": -i} for i in range(26)]]),
            {},
        ),
    ],
    "string-limit": [
        (L(matches=[[{"CommPrefix": "x" * 17}]]), L(matches=[[{"CommPrefix": "x" * 15}]]), {}),
        (
            L(matches=[[{"PcommPrefixExclude": "é" * 9}]]),
            L(matches=[[{"PcommPrefixExclude": "é" * 7}]]),
            {},
        ),
        (
            L(matches=[[{"CgroupPrefix": "a" * 4097}]]),
            L(matches=[[{"CgroupPrefix": "a" * 4095}]]),
            {},
        ),
        (L(matches=[[{"CmdJoin": "x" * 17}]]), L(matches=[[{"CmdJoin": "x" * 13}]]), {}),
    ],
    "range": [
        (L(util_range=[0.9, 0.5]), L(), {}),
        (L(util_range=[0.5, 0.5]), L(), {}),
        (L(cpus_range=[3, 2]), L(cpus_range=[2, 2]), {}),
        (
            L(util_range=[0.5, 1.2]),
            L(util_range=[0.5, 1.2]),
            ({"scx_version": "1.0.13"}, {"scx_version": "1.0.14"}),
        ),
    ],
    "hint": [
        (
            L(matches=[[{"HintEquals": 3}, {"CommPrefix": "x"}]]),
            L(matches=[[{"HintEquals": 3}, {"SystemCpuUtilBelow": 0.5}]]),
            {},
        ),
        (L(matches=[[{"HintEquals": 1024}]]), L(matches=[[{"HintEquals": 1023}]]), {}),
        (
            L(matches=[[{"SystemCpuUtilBelow": 0.5}]]),
            L(matches=[[{"HintEquals": 0}, {"DsqInsertBelow": 0.5}]]),
            {},
        ),
        (
            L(matches=[[{"HintEquals": 1}, {"HintEquals": 2}]]),
            L(matches=[[{"HintEquals": 1}], [{"HintEquals": 2}]]),
            {},
        ),
        (
            L(matches=[[{"HintEquals": 1}, {"DsqInsertBelow": 1.5}]]),
            L(matches=[[{"HintEquals": 1}, {"DsqInsertBelow": 1}]]),
            {},
        ),
        (
            L(matches=[[{"HintEquals": 1}, {"DsqInsertBelow": 0.1}, {"DsqInsertBelow": 0.2}]]),
            L(matches=[[{"HintEquals": 1}, {"DsqInsertBelow": 0.1}, {"SystemCpuUtilBelow": 0.2}]]),
            {},
        ),
        (
            config(
                layer(name="a", matches=[[{"HintEquals": 5}]]),
                layer(name="b", matches=[[{"HintEquals": 5}]]),
            ),
            config(
                layer(name="a", matches=[[{"HintEquals": 5}]]),
                layer(name="b", matches=[[{"HintEquals": 6}]]),
            ),
            {},
        ),
    ],
    "buffer-overrun": [
        (L(matches=[[{"CommPrefix": "x" * 16}]]), L(matches=[[{"CommPrefix": "x" * 15}]]), {}),
        (
            L(matches=[[{"CgroupSuffix": "a" * 4096}]]),
            L(matches=[[{"CgroupSuffix": "a" * 4095}]]),
            {},
        ),
        (L(name="n" * 128), L(name="n" * 40), {}),
        (
            L(name="n" * 64),
            L(name="n" * 64),
            ({"scx_version": "1.0.13"}, {"scx_version": "1.0.14"}),
        ),
        (L(matches=[[{"CommPrefix": "a\u0000b"}]]), L(matches=[[{"CommPrefix": "ab"}]]), {}),
        (L(name="a\u0000"), L(name="a"), {}),
        (L(matches=[[{"CmdJoin": "x" * 14}]]), L(matches=[[{"CmdJoin": "x" * 13}]]), {}),
    ],
    "cpus-exclusive": [
        (L(cpus_range=[1, 2], cpus_range_frac=[0.1, 0.2]), L(cpus_range_frac=[0.1, 0.2]), {})
    ],
    "frac-range": [(L(cpus_range_frac=[0.5, 1.5]), L(cpus_range_frac=[0.5, 1]), {})],
    "confined-max-zero": [(L(cpus_range=[0, 0]), L(kind="Grouped", cpus_range=[0, 0]), {})],
    "util-negative": [(L(util_range=[-0.1, 0.5]), L(util_range=[0, 0.5]), {})],
    "open-util-peak": [
        (
            L(kind="Open", util_peak_half_life_ms=100),
            L(kind="Grouped", util_peak_half_life_ms=100),
            {},
        )
    ],
    "perf-range": [(L(perf=2048), L(perf=1024), {})],
    "topology": [
        (L(nodes=[2]), L(nodes=[1]), {"host": TWO_NODES}),
        (L(llcs=[5]), L(llcs=[0, 1]), {"host": TWO_NODES}),
        (L(nodes=[0, 0]), L(nodes=[0]), {}),
        (L(matches=[[{"NumaNode": 2}]]), L(matches=[[{"NumaNode": 1}]]), {"host": TWO_NODES}),
    ],
    "numa-spread": [
        (
            L(matches=[[{"NumaNode": 0}]], growth_algo="NodeSpread"),
            L(matches=[[{"NumaNode": 0}]], growth_algo="Topo"),
            {},
        ),
    ],
    "regex": [
        (L(matches=[[{"CgroupRegex": "(?=x)a"}]]), L(matches=[[{"CgroupRegex": "^a.*b$"}]]), {}),
        (L(matches=[[{"CgroupRegex": "("}]]), L(matches=[[{"CgroupRegex": "(a)"}]]), {}),
        (
            L(matches=[[{"CgroupRegex": f"r{i}"}] for i in range(17)]),
            L(matches=[[{"CgroupRegex": f"r{i}"}] for i in range(16)]),
            {},
        ),
    ],
    "gpu-flag": [
        (
            L(matches=[[{"UsedGpuTid": True}]]),
            L(matches=[[{"UsedGpuTid": True}]]),
            ({"flags": []}, {"flags": ["--enable-gpu-support"]}),
        ),
    ],
    "unknown-key": [
        (L(perff=1), L(perf=1), {}),
        (L(common={"perf": 1}), L(perf=1), {}),
        (L(same_over_idle=True), L(prev_over_idle_core=True), {}),
        (L(cpus_pct=[0.1, 0.2]), L(cpus_range_frac=[0.1, 0.2]), {}),
        ([{**REST, "prio": 1}], [REST], {}),
        ([{**REST, "cpuset": "0-3"}], [REST], {}),
    ],
    "wrong-kind": [
        (L(kind="Open", protected=True), L(kind="Grouped", protected=True), {}),
        (L(kind="Open", util_range=[0.1, 0.2]), L(kind="Grouped", util_range=[0.1, 0.2]), {}),
        (L(idle_confined=True), L(kind="Grouped", idle_confined=True), {}),
        (
            L(util_includes_open_cputime=True),
            L(kind="Grouped", util_includes_open_cputime=True),
            {},
        ),
        (L(kind="Open", membw_gb=1), L(kind="Open"), {}),
    ],
    "deprecated": [(L(idle_smt=True), L(), {}), (L(allow_node_aligned=False), L(), {})],
    "iskthread-false": [
        (L(matches=[[{"IsKthread": False}]]), L(matches=[[{"IsKthread": True}]]), {})
    ],
    "version-field": [
        (
            L(member_expire_ms=5),
            L(member_expire_ms=5),
            ({"scx_version": "1.0.18"}, {"scx_version": "1.0.19"}),
        ),
        (
            [{**layer(), "template": {"CgroupSuffix": "a/"}}, REST],
            [{**layer(), "template": {"CgroupSuffix": "a/"}}, REST],
            ({"scx_version": "1.0.13"}, {"scx_version": "1.0.14"}),
        ),
    ],
    "clamped": [
        (L(weight=20000), L(weight=10000), {}),
        (L(yield_ignore=1.5), L(yield_ignore=1), {}),
        (L(yield_ignore=-0.5), L(yield_ignore=0), {}),
    ],
    "cgroup-slash": [
        (
            L(matches=[[{"CgroupPrefix": "/system.slice/"}]]),
            L(matches=[[{"CgroupPrefix": "system.slice/"}]]),
            {},
        ),
    ],
    "preempt-disallow": [
        (L(preempt=True, disallow_open_after_us=5), L(preempt=False, disallow_open_after_us=5), {}),
    ],
    "catch-all": [
        (L(matches=[[]]), L(), {}),
        (L(matches=[[{"CommPrefix": "x"}], []]), L(), {}),
    ],
    "gpu-support": [
        (
            L(matches=[[{"UsedGpuPid": True}]]),
            L(matches=[[{"UsedGpuPid": True}]]),
            (
                {"host": make_host(vendor="amd"), "flags": ["--enable-gpu-support"]},
                {"host": TWO_NODES, "flags": ["--enable-gpu-support"]},
            ),
        ),
    ],
    "membw": [(L(membw_gb=10), L(), {})],
    "name": [
        (config(layer(name="a"), layer(name="a")), config(layer(name="a"), layer(name="b")), {}),
        (L(name="ñame"), L(name="name"), {}),
        (L(name="n" * 64), L(name="n" * 63), {}),
    ],
    "template-count": [([{**layer(), "template": {"CgroupRegex": "^a"}}, REST], L(), {})],
    "util-hi": [(L(util_range=[0.5, 1.5]), L(util_range=[0.5, 1.0]), {})],
    "topology-ignored": [(L(nodes=[0]), L(nodes=[0]), ({"host": ONE_NODE}, {"host": TWO_NODES}))],
}


def _options(opts):
    return opts if isinstance(opts, tuple) else (opts, opts)


def _run(cfg, opts):
    return validate_layers(cfg if isinstance(cfg, str) else text(cfg), **opts)


def test_every_rule_has_cases():
    assert set(CASES) == set(RULES)


@pytest.mark.parametrize(
    "rule,bad,good,opts",
    [(rule, bad, good, opts) for rule, cases in CASES.items() for bad, good, opts in cases],
    ids=[f"{rule}-{i}" for rule, cases in CASES.items() for i in range(len(cases))],
)
def test_rule_fails_and_passes(rule, bad, good, opts):
    bad_opts, good_opts = _options(opts)
    bad_rules = {p.rule for p in _run(bad, bad_opts)}
    good_rules = {p.rule for p in _run(good, good_opts)}
    assert rule in bad_rules
    assert rule not in good_rules


@pytest.mark.parametrize("rule", sorted(RULES))
def test_severity_follows_rule_class_and_lenient(rule):
    bad, _, opts = CASES[rule][0]
    bad_opts, _ = _options(opts)
    klass = RULES[rule]
    for lenient in (False, True):
        found = [p for p in _run(bad, {**bad_opts, "lenient": lenient}) if p.rule == rule]
        expected = {"parse": "error", "verify": "error", "advice": "warning"}.get(
            klass, "warning" if lenient else "error"
        )
        assert {p.severity for p in found} == {expected}


def test_problem_lines_name_the_layer_and_field():
    problems = validate_layers(text(L(kind="Open", protected=True, perf=1.0)))
    lines = sorted(str(p) for p in problems)
    assert lines == [
        "layer[0].kind.Open.perf: invalid type: floating point `1.0`, expected u64; write `1`",
        "layer[0].kind.Open.protected: `protected` belongs to Confined and Grouped, not Open; "
        "scx_layered ignores it here",
    ]


def test_json_syntax_error_names_line_and_column():
    (problem,) = validate_layers('[\n  {"name": "a",,}\n]')
    assert problem.where == "config" and "line 2 column" in problem.why


def test_parsed_python_config_is_accepted():
    assert validate_layers(config(layer())) == []
    assert (
        validate_layers([{"name": "r", "matches": [[]], "kind": {"Open": {"perf": 1.0}}}])[0].rule
        == "type"
    )


def test_bytes_must_be_utf8():
    (problem,) = validate_layers(b'[{"name": "\xff"}]')
    assert problem.rule == "json"


def _upstream_files():
    return (
        sorted((UPSTREAM / "examples").glob("*.json"))
        + sorted((UPSTREAM / "integration").glob("*.json"))
        + [UPSTREAM / "main_rs_EXAMPLE_CONFIG.json"]
    )


@pytest.mark.parametrize("path", _upstream_files(), ids=lambda p: p.name)
def test_upstream_examples_validate_leniently(path):
    problems = validate_layers(path.read_text(), lenient=True)
    assert not has_errors(problems), [str(p) for p in problems]


def test_upstream_examples_that_strict_mode_rejects():
    rejected = {p.name for p in _upstream_files() if has_errors(validate_layers(p.read_text()))}
    assert rejected == {"cpuset.json", "same_over_idle.json"}  # util_range under Open


def _roundtrip_pairs():
    for path in _upstream_files():
        prefix = (
            "main_rs_EXAMPLE_CONFIG.json"
            if path.parent == UPSTREAM
            else f"{path.parent.name}__{path.name}"
        )
        yield path, UPSTREAM / "serde_roundtrip" / prefix


@pytest.mark.parametrize(
    "path,roundtrip", list(_roundtrip_pairs()), ids=lambda p: getattr(p, "name", "")
)
def test_ignored_keys_match_what_serde_dropped(path, roundtrip):
    original, kept = json.loads(path.read_text()), json.loads(roundtrip.read_text())
    dropped = set()
    for i, (spec, out) in enumerate(zip(original, kept)):
        dropped |= {f"layer[{i}].{k}" for k in set(spec) - set(out)}
        ((kind, body),) = spec["kind"].items()
        dropped |= {f"layer[{i}].kind.{kind}.{k}" for k in set(body) - set(out["kind"][kind])}
    problems = validate_layers(path.read_text(), lenient=True)
    flagged = {p.where for p in problems if p.rule in ("unknown-key", "wrong-kind", "deprecated")}
    assert flagged == dropped


@pytest.mark.parametrize(
    "roundtrip", sorted((UPSTREAM / "serde_roundtrip").glob("*.json")), ids=lambda p: p.name
)
def test_serde_output_with_every_default_spelled_out_parses(roundtrip):
    problems = validate_layers(roundtrip.read_text())
    assert not [p for p in problems if RULES[p.rule] in ("parse", "verify")], [
        str(p) for p in problems
    ]
