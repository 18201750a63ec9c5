"""Strict validator for scx_layered layer configs: what the real parser rejects, and what it
silently ignores or only fails on at start-up.

Every finding is a :class:`Problem` from one rule in :data:`RULES`. A rule's class decides its
severity:

* ``parse``   -- serde rejects the file (shape, missing field, type, enum spelling, duplicate
  field, float for an integer, negative unsigned, tuple length). Always an error.
* ``verify``  -- ``verify_layer_specs`` rejects it (layer count, terminal layer, match limits,
  string lengths, ranges, hint rules). Always an error.
* ``startup`` -- the config parses but ``scx_layered`` fails or panics when it starts on the host
  (buffer overruns, exclusive options, topology ids, ...). Error; a warning with ``lenient``.
* ``silent``  -- parsed and then ignored or quietly changed (unknown keys, a key under the wrong
  kind, deprecated keys, ``IsKthread: false``, features newer than the target version, clamped
  values). Error; a warning with ``lenient``.
* ``advice``  -- legal but probably not meant (dead layers after a catch-all, GPU matchers on a
  host without NVIDIA GPUs). Always a warning.

Where the notes leave a boundary open, the validator takes the stricter reading, so a config the
real parser rejects is never passed.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from chronus_py.layers import schema as S
from chronus_py.layers.host import HostTopology

RULES: dict[str, str] = {
    # parse
    "json": "parse",
    "top-level": "parse",
    "layer-shape": "parse",
    "missing-field": "parse",
    "type": "parse",
    "duplicate-key": "parse",
    "matcher": "parse",
    "kind": "parse",
    "enum": "parse",
    "template": "parse",
    "version-enum": "parse",
    # verify
    "layer-count": "verify",
    "terminal": "verify",
    "empty-matches": "verify",
    "or-limit": "verify",
    "and-limit": "verify",
    "string-limit": "verify",
    "range": "verify",
    "hint": "verify",
    # startup
    "buffer-overrun": "startup",
    "cpus-exclusive": "startup",
    "frac-range": "startup",
    "confined-max-zero": "startup",
    "util-negative": "startup",
    "open-util-peak": "startup",
    "perf-range": "startup",
    "topology": "startup",
    "numa-spread": "startup",
    "regex": "startup",
    "gpu-flag": "startup",
    # silent
    "unknown-key": "silent",
    "wrong-kind": "silent",
    "deprecated": "silent",
    "iskthread-false": "silent",
    "version-field": "silent",
    "clamped": "silent",
    "cgroup-slash": "silent",
    "preempt-disallow": "silent",
    # advice
    "catch-all": "advice",
    "gpu-support": "advice",
    "membw": "advice",
    "name": "advice",
    "template-count": "advice",
    "util-hi": "advice",
    "topology-ignored": "advice",
}


@dataclass(frozen=True, slots=True)
class Problem:
    severity: str  # "error" | "warning"
    where: str  # "layer[2].kind.Open.protected", "config", ...
    why: str
    rule: str

    def __str__(self) -> str:
        return f"{self.where}: {self.why}"


class _Obj(dict):
    """A JSON object that remembers every (key, value) pair, so duplicates stay visible."""

    __slots__ = ("pairs",)


class _JsonError(ValueError):
    pass


def _pairs(obj: dict) -> list[tuple[str, Any]]:
    return obj.pairs if isinstance(obj, _Obj) else list(obj.items())


def _object_pairs(pairs: list[tuple[str, Any]]) -> _Obj:
    obj = _Obj(pairs)
    obj.pairs = pairs
    return obj


def _reject_constant(name: str) -> Any:
    raise _JsonError(f"{name} is not valid JSON")


def _parse_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _JsonError(f"number out of range: {text}")
    return value


_SURROGATE = re.compile("[\ud800-\udfff]")


MAX_JSON_DEPTH = 127  # serde_json's recursion limit: the 128th nested array/object is an error
_F64_MAX = 1.7976931348623157e308


def parse_config_text(text: str) -> Any:
    """Parse JSON as serde_json does: no NaN/Infinity, no numbers beyond f64, no lone surrogates,
    no BOM, nesting within serde_json's limit; object key order and duplicates kept. Raises
    ValueError with a position."""
    try:
        value = json.loads(
            text,
            object_pairs_hook=_object_pairs,
            parse_constant=_reject_constant,
            parse_float=_parse_float,
        )
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"JSON syntax error at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    except RecursionError:
        raise ValueError(
            f"nesting deeper than {MAX_JSON_DEPTH} levels (serde_json's recursion limit)"
        ) from None
    except ValueError as exc:  # _JsonError, or an integer with thousands of digits
        raise ValueError(str(exc)) from None
    why = _scan(value, 1)
    if why:
        raise ValueError(why)
    return value


def _scan(value: Any, depth: int) -> str | None:
    """What serde_json rejects that Python's json module accepts, found by one walk."""
    if isinstance(value, str):
        return "a string holds a lone UTF-16 surrogate escape" if _SURROGATE.search(value) else None
    if isinstance(value, int) and not isinstance(value, bool):
        return f"number out of range: {value}" if abs(value) > _F64_MAX else None
    if isinstance(value, (list, dict)):
        if depth > MAX_JSON_DEPTH:
            return f"nesting deeper than {MAX_JSON_DEPTH} levels (serde_json's recursion limit)"
        items = value if isinstance(value, list) else [x for pair in _pairs(value) for x in pair]
        for item in items:
            why = _scan(item, depth + 1)
            if why:
                return why
    return None


def validate_layers(
    config: str | bytes | Sequence[Any],
    *,
    host: HostTopology | None = None,
    scx_version: str | S.Version | None = None,
    lenient: bool = False,
    flags: Sequence[str] | None = None,
) -> list[Problem]:
    """Check a layer config (JSON text, or the parsed list the emitter builds) and return every
    problem found, errors and warnings, in file order. An empty list means valid and clean.

    ``host`` adds the host-dependent start-up checks (node/LLC/NumaNode ids); ``scx_version``
    (crate version, e.g. "1.0.21") flags features the target binary does not have. ``flags``
    are the scx_layered command-line flags the config will run with, when known (GPU matchers
    need ``--enable-gpu-support``).
    """
    version = S.parse_version(scx_version) if isinstance(scx_version, str) else scx_version
    checker = _Checker(host=host, version=version, lenient=lenient, flags=flags)
    if isinstance(config, bytes):
        try:
            config = config.decode("utf-8")
        except UnicodeDecodeError as exc:
            checker.report("json", "config", f"not UTF-8 ({exc.reason} at byte {exc.start})")
            return checker.problems
    if isinstance(config, str):
        try:
            config = parse_config_text(config)
        except ValueError as exc:
            checker.report("json", "config", str(exc))
            return checker.problems
    checker.check_config(config)
    return sorted(checker.problems, key=_layer_index)


_LAYER_AT = re.compile(r"layer\[(\d+)\]")


def _layer_index(problem: Problem) -> int:
    m = _LAYER_AT.match(problem.where)
    return -1 if m is None else int(m.group(1))


def has_errors(problems: Iterable[Problem]) -> bool:
    return any(p.severity == "error" for p in problems)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean `{'true' if value else 'false'}`"
    if isinstance(value, int):
        return f"integer `{value}`"
    if isinstance(value, float):
        return f"floating point `{value!r}`"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _nbytes(text: str) -> int:
    return len(text.encode("utf-8"))


class _Checker:
    def __init__(
        self,
        *,
        host: HostTopology | None,
        version: S.Version | None,
        lenient: bool,
        flags: Sequence[str] | None,
    ):
        self.host = host
        self.flags = None if flags is None else tuple(flags)
        self.version = version
        self.lenient = lenient
        self.problems: list[Problem] = []

    # -- reporting -------------------------------------------------------------------------
    def report(self, rule: str, where: str, why: str) -> None:
        klass = RULES[rule]
        if klass in ("parse", "verify"):
            severity = "error"
        elif klass == "advice":
            severity = "warning"
        else:
            severity = "warning" if self.lenient else "error"
        self.problems.append(Problem(severity, where, why, rule))

    def too_new(self, since: S.Version) -> bool:
        return self.version is not None and since > self.version

    # -- types -----------------------------------------------------------------------------
    def check_type(self, value: Any, typ: object, where: str) -> bool:
        """serde's acceptance of ``value`` for Rust type ``typ``; reports and returns False if
        not."""
        if isinstance(typ, tuple):
            head = typ[0]
            if head == "opt":
                return value is None or self.check_type(value, typ[1], where)
            if head == "tuple":
                size = len(typ) - 1
                if not isinstance(value, list):
                    self.report(
                        "type",
                        where,
                        f"invalid type: {_kind_of(value)}, expected an array of {size}",
                    )
                    return False
                if len(value) != size:
                    self.report(
                        "type",
                        where,
                        f"invalid length {len(value)}, expected an array of exactly {size}",
                    )
                    return False
                return all(
                    self.check_type(v, t, f"{where}[{i}]")
                    for i, (v, t) in enumerate(zip(value, typ[1:]))
                )
            if head == "vec":
                if not isinstance(value, list):
                    self.report(
                        "type", where, f"invalid type: {_kind_of(value)}, expected an array"
                    )
                    return False
                return all(
                    [self.check_type(v, typ[1], f"{where}[{i}]") for i, v in enumerate(value)]
                )
            if head == "enum":
                return self.check_enum(value, typ[1], where)
            raise AssertionError(typ)
        if typ == "bool":
            ok = isinstance(value, bool)
        elif typ == "str":
            ok = isinstance(value, str)
        elif typ == "f64":
            ok = _is_number(value)
        else:
            lo, hi = S.INT_RANGES[typ]
            if _is_int(value):
                if lo <= value <= hi:
                    return True
                self.report(
                    "type",
                    where,
                    f"invalid value: integer `{value}`, expected {typ} in [{lo}, {hi}]",
                )
                return False
            ok = False
            if isinstance(value, float) and value.is_integer():
                self.report(
                    "type",
                    where,
                    f"invalid type: floating point `{value!r}`, expected {typ}; write "
                    f"`{int(value)}`",
                )
                return False
        if not ok:
            self.report("type", where, f"invalid type: {_kind_of(value)}, expected {typ}")
        return ok

    def check_enum(self, value: Any, enum: str, where: str) -> bool:
        variants = S.ENUMS[enum]
        if not isinstance(value, str):
            self.report(
                "type",
                where,
                f"invalid type: {_kind_of(value)}, expected a string, one of {', '.join(variants)}",
            )
            return False
        if value not in variants:
            near = [v for v in variants if v.lower() == value.lower()]
            hint = (
                f" (did you mean {near[0]!r}? case matters)"
                if near
                else f"; expected one of {', '.join(variants)}"
            )
            self.report("enum", where, f"unknown variant {value!r}{hint}")
            return False
        if self.too_new(variants[value]):
            self.report(
                "version-enum",
                where,
                f"{value!r} needs scx_layered >= {S.show(variants[value])}: "
                f"the {S.show(self.version)} parser rejects it",
            )
            return False
        return True

    # -- document --------------------------------------------------------------------------
    def check_config(self, config: Any) -> None:
        if not isinstance(config, list):
            self.report(
                "top-level",
                "config",
                f"invalid type: {_kind_of(config)}, expected a JSON array of layers",
            )
            return
        layers = [self.check_spec(spec, f"layer[{i}]") for i, spec in enumerate(config)]
        n = len(config)
        if n == 0:
            self.report(
                "layer-count", "config", "no layers: at least one (the catch-all) is needed"
            )
        elif n > S.MAX_LAYERS:
            self.report("layer-count", "config", f"{n} layers, the limit is {S.MAX_LAYERS}")
        for i, layer in enumerate(layers):
            if layer is not None:
                self.check_layer_rules(layer, i, n)
        self.check_cross_layer([layer for layer in layers if layer is not None])

    def check_spec(self, spec: Any, where: str) -> dict | None:
        """Parse-stage checks of one layer; returns the accepted fields or None if unusable."""
        if isinstance(spec, list):
            self.report(
                "layer-shape",
                where,
                "a layer must be a JSON object (positional array form not accepted)",
            )
            return None
        if not isinstance(spec, dict):
            self.report(
                "layer-shape", where, f"invalid type: {_kind_of(spec)}, expected a layer object"
            )
            return None
        seen: set[str] = set()
        for key, _ in _pairs(spec):
            if key in S.SPEC_FIELDS:
                if key in seen:
                    self.report("duplicate-key", f"{where}.{key}", f"duplicate field `{key}`")
                seen.add(key)
            else:
                self.unknown_key(key, f"{where}.{key}", S.SPEC_FIELDS)
        for key in S.SPEC_REQUIRED:
            if key not in spec:
                self.report("missing-field", where, f"missing field `{key}`")
        out: dict[str, Any] = {"where": where}
        if "name" in spec and self.check_type(spec["name"], "str", f"{where}.name"):
            out["name"] = spec["name"]
        if "comment" in spec:
            self.check_type(spec["comment"], ("opt", "str"), f"{where}.comment")
        if spec.get("template") is not None:
            if self.too_new((1, 0, 14)):
                self.report(
                    "version-field",
                    f"{where}.template",
                    f"needs scx_layered >= 1.0.14; the {S.show(self.version)} parser ignores it",
                )
            tmpl = self.check_matcher(spec["template"], f"{where}.template")
            if tmpl is not None and tmpl[0] not in S.TEMPLATE_MATCHERS:
                self.report(
                    "template",
                    f"{where}.template",
                    f"{tmpl[0]} as a template panics scx_layered at start-up; use CgroupSuffix or "
                    f"CgroupRegex",
                )
            out["template"] = tmpl
        if "matches" in spec:
            out["matches"] = self.check_matches(spec["matches"], f"{where}.matches")
        if "kind" in spec:
            kind = self.check_kind(spec["kind"], f"{where}.kind")
            if kind is not None:
                out["kind"], out["fields"] = kind
        return out

    def unknown_key(self, key: str, where: str, allowed: Iterable[str]) -> None:
        if key == "common":
            why = (
                "no `common` object exists: common fields go directly in the kind object; "
                "scx_layered ignores this"
            )
        elif key in S.RENAMED_FIELDS:
            why = f"old name, renamed to `{S.RENAMED_FIELDS[key]}`; scx_layered ignores it"
        elif key == "cpuset":
            why = "internal field, never read from JSON; scx_layered ignores it"
        else:
            near = [a for a in allowed if a.lower() == key.lower()]
            hint = f" (did you mean `{near[0]}`?)" if near else ""
            why = f"unknown key{hint}; scx_layered ignores it silently"
        self.report("unknown-key", where, why)

    def check_matches(self, value: Any, where: str) -> list[list[tuple[str, Any]]] | None:
        if not isinstance(value, list):
            self.report(
                "type",
                where,
                f"invalid type: {_kind_of(value)}, expected an array of arrays of matchers",
            )
            return None
        ok = True
        groups = []
        for i, group in enumerate(value):
            if not isinstance(group, list):
                self.report(
                    "type",
                    f"{where}[{i}]",
                    f"invalid type: {_kind_of(group)}, expected an array of matchers "
                    "(an AND group)",
                )
                ok = False
                continue
            parsed = [self.check_matcher(m, f"{where}[{i}][{j}]") for j, m in enumerate(group)]
            ok = ok and all(p is not None for p in parsed)
            groups.append(parsed)
        return groups if ok else None

    def variant(
        self,
        value: Any,
        where: str,
        rule: str,
        names,
        *,
        holder: str,
        label: str,
        expected: str,
        choices: str = "",
    ) -> tuple[str, Any] | None:
        """(name, payload) of a one-key object naming one of ``names`` (serde's externally tagged
        enum: matchers, layer kinds), or None once the reason is reported."""
        if not isinstance(value, dict):
            self.report(rule, where, f"invalid type: {_kind_of(value)}, expected {expected}")
            return None
        pairs = _pairs(value)
        if len(pairs) != 1:
            listed = f" ({choices})" if choices else ""
            self.report(
                rule, where, f"{holder} must have exactly one key{listed}, found {len(pairs)}"
            )
            return None
        name, payload = pairs[0]
        if name not in names:
            near = [n for n in names if n.lower() == name.lower()]
            hint = (
                f" (did you mean {near[0]!r}? case matters)"
                if near
                else (f"; expected {choices}" if choices else "")
            )
            self.report(rule, f"{where}.{name}", f"unknown {label} {name!r}{hint}")
            return None
        return name, payload

    def check_matcher(self, value: Any, where: str) -> tuple[str, Any] | None:
        variant = self.variant(
            value,
            where,
            "matcher",
            S.MATCHERS,
            holder="a matcher object",
            label="matcher variant",
            expected='a one-key matcher object such as {"CommPrefix": "x"}',
        )
        if variant is None:
            return None
        name, payload = variant
        typ, since = S.MATCHERS[name]
        if self.too_new(since):
            self.report(
                "version-enum",
                f"{where}.{name}",
                f"needs scx_layered >= {S.show(since)}: the {S.show(self.version)} parser rejects "
                f"it",
            )
            return None
        if not self.check_type(payload, typ, f"{where}.{name}"):
            return None
        return name, payload

    def check_kind(self, value: Any, where: str) -> tuple[str, dict[str, Any]] | None:
        if isinstance(value, str) and value in S.KINDS:
            self.report("kind", where, f'"{value}" must be an object: {{"{value}": {{...}}}}')
            return None
        variant = self.variant(
            value,
            where,
            "kind",
            S.KINDS,
            holder="`kind`",
            label="variant",
            expected='{"Confined"|"Grouped"|"Open": {...}}',
            choices="Confined, Grouped or Open",
        )
        if variant is None:
            return None
        kind, body = variant
        at = f"{where}.{kind}"
        if not isinstance(body, dict):
            self.report(
                "type", at, f"invalid type: {_kind_of(body)}, expected an object of layer settings"
            )
            return None
        own = S.KIND_FIELDS[kind]
        known = {**own, **S.COMMON_FIELDS}
        fields: dict[str, Any] = {}
        seen: set[str] = set()
        for key, val in _pairs(body):
            kwhere = f"{at}.{key}"
            if key not in known:
                owners = [k for k in S.KINDS if key in S.KIND_FIELDS[k]]
                if owners:
                    self.report(
                        "wrong-kind",
                        kwhere,
                        f"`{key}` belongs to {' and '.join(owners)}, not {kind}; scx_layered "
                        f"ignores it here",
                    )
                else:
                    self.unknown_key(key, kwhere, known)
                continue
            if key in seen:
                self.report("duplicate-key", kwhere, f"duplicate field `{key}`")
                continue
            seen.add(key)
            typ, since = known[key]
            if self.check_type(val, typ, kwhere):
                fields[key] = val
                if self.too_new(since):
                    self.report(
                        "version-field",
                        kwhere,
                        f"needs scx_layered >= {S.show(since)}; the {S.show(self.version)} parser "
                        f"ignores it",
                    )
            else:
                fields[key] = _INVALID
        if "util_range" in own and "util_range" not in body:
            self.report("missing-field", at, "missing field `util_range`")
        return kind, fields

    # -- verify and start-up rules of one layer ------------------------------------------------
    def check_layer_rules(self, layer: dict, index: int, count: int) -> None:
        where = layer["where"]
        matches = layer.get("matches")
        terminal = index == count - 1
        if matches is not None:
            if terminal:
                if len(matches) != 1 or matches[0]:
                    self.report(
                        "terminal",
                        f"{where}.matches",
                        'the last layer must have "matches": [[]] (the catch-all)',
                    )
            elif not matches:
                self.report(
                    "empty-matches",
                    f"{where}.matches",
                    "a non-terminal layer needs at least one OR group",
                )
            elif any(not g for g in matches):
                self.report(
                    "catch-all",
                    f"{where}.matches",
                    "an empty AND group matches every task: the layers after this one never "
                    "get any",
                )
            if len(matches) > S.MAX_LAYER_MATCH_ORS:
                self.report(
                    "or-limit",
                    f"{where}.matches",
                    f"{len(matches)} OR groups, the limit is {S.MAX_LAYER_MATCH_ORS}",
                )
            for i, group in enumerate(matches):
                if len(group) > S.NR_LAYER_MATCH_KINDS:
                    self.report(
                        "and-limit",
                        f"{where}.matches[{i}]",
                        f"{len(group)} matchers in one AND group, the limit is "
                        f"{S.NR_LAYER_MATCH_KINDS}",
                    )
                for j, (name, payload) in enumerate(group):
                    self.check_matcher_value(name, payload, f"{where}.matches[{i}][{j}].{name}")
                self.check_hint_group(group, f"{where}.matches[{i}]")
        if layer.get("template") is not None:
            name, payload = layer["template"]
            self.check_matcher_value(name, payload, f"{where}.template.{name}")
        self.check_name(layer)
        if "kind" in layer:
            self.check_kind_values(
                layer["kind"], layer["fields"], f"{where}.kind.{layer['kind']}", matches
            )

    def check_matcher_value(self, name: str, payload: Any, where: str) -> None:
        if name in S.CGROUP_MATCHERS:
            size = _nbytes(payload)
            if size > S.MAX_PATH:
                self.report(
                    "string-limit", where, f"{size} bytes, the cgroup string limit is {S.MAX_PATH}"
                )
            elif size == S.MAX_PATH:
                self.report(
                    "buffer-overrun",
                    where,
                    f"{size} bytes leaves no room for the NUL: panics at start-up (max "
                    f"{S.MAX_PATH - 1})",
                )
            if payload.startswith("/") and payload != "/":
                self.report(
                    "cgroup-slash",
                    where,
                    "cgroup paths are matched without a leading '/': this never matches",
                )
        elif name in S.COMM_MATCHERS:
            size = _nbytes(payload)
            if size > S.MAX_COMM:
                self.report("string-limit", where, f"{size} bytes, the comm limit is {S.MAX_COMM}")
            elif size == S.MAX_COMM:
                self.report(
                    "buffer-overrun",
                    where,
                    "16 bytes leaves no room for the NUL: panics at start-up (task comm is at "
                    "most 15)",
                )
        elif name == "CmdJoin":
            size = _nbytes(payload)
            if size > S.MAX_COMM:
                self.report("string-limit", where, f"{size} bytes, the limit is {S.MAX_CMDJOIN}")
            elif size > S.MAX_CMDJOIN:
                self.report(
                    "buffer-overrun",
                    where,
                    f"{size} bytes: a join command carries at most {S.MAX_CMDJOIN}",
                )
        elif name == "IsKthread" and payload is False:
            self.report(
                "iskthread-false",
                where,
                "scx_layered ignores the value: `false` still matches kernel threads",
            )
        elif name == "HintEquals" and payload >= S.MAX_HINT:
            self.report("hint", where, f"hint {payload} is out of range 0..{S.MAX_HINT - 1}")
        elif name in S.HINT_COMPANIONS and not 0.0 <= payload <= 1.0:
            self.report("hint", where, f"{payload} is outside [0, 1]")
        elif name == "NumaNode" and self.host is not None and payload >= len(self.host.nodes):
            self.report(
                "topology", where, f"host {self.host.name} has {len(self.host.nodes)} NUMA node(s)"
            )
        elif name == "CgroupRegex":
            self.check_regex(payload, where)
        if isinstance(payload, str) and "\0" in payload and name != "CgroupRegex":
            self.report(
                "buffer-overrun",
                where,
                "a NUL byte inside the string panics scx_layered at start-up",
            )

    def check_regex(self, pattern: str, where: str) -> None:
        if re.search(r"\(\?<?[=!]|\\[1-9]", pattern):
            self.report(
                "regex",
                where,
                "look-around and back-references are not supported by Rust's regex crate",
            )
            return
        try:
            re.compile(pattern)
        except re.error as exc:
            self.report("regex", where, f"does not compile: {exc}")

    def check_hint_group(self, group: list[tuple[str, Any]], where: str) -> None:
        names = [n for n, _ in group]
        hints = names.count("HintEquals")
        companions = [n for n in names if n in S.HINT_COMPANIONS]
        if hints > 1:
            self.report("hint", where, "at most one HintEquals per AND group")
        if hints and len(names) != hints + len(companions):
            self.report(
                "hint",
                where,
                "HintEquals may only be combined with SystemCpuUtilBelow / DsqInsertBelow",
            )
        if companions and hints != 1:
            self.report(
                "hint", where, f"{companions[0]} needs exactly one HintEquals in the same AND group"
            )
        for c in S.HINT_COMPANIONS:
            if companions.count(c) > 1:
                self.report("hint", where, f"at most one {c} per AND group")

    def check_name(self, layer: dict) -> None:
        name = layer.get("name")
        if name is None:
            return
        where = f"{layer['where']}.name"
        size = _nbytes(name)
        if "\0" in name:
            self.report(
                "buffer-overrun", where, "a NUL byte in the name panics scx_layered at start-up"
            )
        limit = (
            S.MAX_LAYER_NAME
            if self.version is None or self.version >= S.LAYER_NAME_128_SINCE
            else 64
        )
        if size >= limit:
            self.report(
                "buffer-overrun",
                where,
                f"{size} bytes: names of {limit} bytes or more overrun the BPF buffer (panic)",
            )
        elif size >= 64 or not name.isascii() or not name:
            self.report(
                "name",
                where,
                "keep layer names ASCII, non-empty and under 64 bytes (template layers append a "
                "cgroup suffix)",
            )

    def check_kind_values(self, kind: str, f: dict[str, Any], where: str, matches) -> None:
        def ok(key: str) -> bool:
            return key in f and f[key] is not _INVALID and f[key] is not None

        if ok("util_range"):
            lo, hi = f["util_range"]
            if lo >= hi:
                self.report("range", f"{where}.util_range", f"low {lo} must be below high {hi}")
            if lo < 0:
                self.report(
                    "util-negative", f"{where}.util_range", "negative utilisation fails at start-up"
                )
            if hi > 1.0:
                if self.version is not None and self.version <= S.UTIL_HI_LIMIT_UNTIL:
                    self.report(
                        "range",
                        f"{where}.util_range",
                        f"high {hi} > 1.0 is rejected by scx_layered {S.show(self.version)}",
                    )
                elif self.version is None:
                    self.report(
                        "util-hi",
                        f"{where}.util_range",
                        f"high {hi} > 1.0 is rejected by scx_layered <= 1.0.13",
                    )
        if ok("cpus_range"):
            lo, hi = f["cpus_range"]
            if lo > hi:
                self.report("range", f"{where}.cpus_range", f"min {lo} is above max {hi}")
            if kind == "Confined" and hi == 0:
                self.report(
                    "confined-max-zero",
                    f"{where}.cpus_range",
                    "a Confined layer with max 0 CPUs fails at start-up",
                )
            if ok("cpus_range_frac"):
                self.report(
                    "cpus-exclusive",
                    f"{where}.cpus_range_frac",
                    "cpus_range and cpus_range_frac together fail at start-up",
                )
        if ok("cpus_range_frac"):
            lo, hi = f["cpus_range_frac"]
            if not (0.0 <= lo <= 1.0 and 0.0 <= hi <= 1.0):
                self.report(
                    "frac-range",
                    f"{where}.cpus_range_frac",
                    "fractions must be within [0, 1] (start-up error)",
                )
        if kind == "Open" and ok("util_peak_half_life_ms") and f["util_peak_half_life_ms"] > 0:
            self.report(
                "open-util-peak",
                f"{where}.util_peak_half_life_ms",
                "needs util_range, which Open layers lack: start-up error",
            )
        if ok("perf") and f["perf"] > S.MAX_PERF:
            self.report(
                "perf-range",
                f"{where}.perf",
                f"{f['perf']} is above {S.MAX_PERF} (the kernel rejects it)",
            )
        if ok("weight") and f["weight"] > S.MAX_WEIGHT:
            self.report("clamped", f"{where}.weight", f"clamped to {S.MAX_WEIGHT}")
        if ok("yield_ignore") and not 0.0 <= f["yield_ignore"] <= 1.0:
            self.report("clamped", f"{where}.yield_ignore", "acts as 0 below 0 and as 1 above 1")
        for key, why in S.DEPRECATED_FIELDS.items():
            if key in f:
                self.report("deprecated", f"{where}.{key}", why)
        if f.get("preempt") is True:
            for key in ("disallow_open_after_us", "disallow_preempt_after_us"):
                if ok(key):
                    self.report(
                        "preempt-disallow",
                        f"{where}.{key}",
                        "ignored: preempt layers force it to never",
                    )
        if ok("membw_gb"):
            self.report(
                "membw",
                f"{where}.membw_gb",
                "needs a CPU whose memory-bandwidth PMU event scx_layered knows (else it panics)",
            )
        for key in ("nodes", "llcs"):
            if ok(key):
                self.check_topology_ids(key, f[key], f"{where}.{key}")
        if ok("growth_algo") and f["growth_algo"] in S.NODE_SPREAD_ALGOS and matches:
            if any(n == "NumaNode" for g in matches for n, _ in g):
                self.report(
                    "numa-spread",
                    f"{where}.growth_algo",
                    "NumaNode matchers cannot be combined with NodeSpread* growth",
                )

    def check_topology_ids(self, key: str, ids: list[int], where: str) -> None:
        if len(set(ids)) != len(ids):
            self.report("topology", where, "ids repeat (start-up error)")
        host = self.host
        if host is None or not ids:
            return
        if len(host.nodes) == 1 and len(host.llcs) == 1:
            self.report(
                "topology-ignored", where, f"ignored: host {host.name} has one node and one LLC"
            )
            return
        have = host.nodes if key == "nodes" else host.llcs
        missing = sorted(set(ids) - set(have))
        if missing:
            self.report(
                "topology",
                where,
                f"host {host.name} has no {key[:-1]} {missing} (has {sorted(have)})",
            )

    # -- rules across layers -------------------------------------------------------------------
    def check_cross_layer(self, layers: list[dict]) -> None:
        hint_owner: dict[int, str] = {}
        regexes = 0
        gpu_at = None
        names: dict[str, str] = {}
        for layer in layers:
            for group in layer.get("matches") or []:
                for name, payload in group:
                    if name == "HintEquals":
                        owner = hint_owner.setdefault(payload, layer["where"])
                        if owner != layer["where"]:
                            self.report(
                                "hint",
                                f"{layer['where']}.matches",
                                f"hint {payload} is already used by {owner}",
                            )
                    regexes += name == "CgroupRegex"
                    if name in S.GPU_MATCHERS and gpu_at is None:
                        gpu_at = layer["where"]
            if layer.get("template") is not None:
                self.report(
                    "template-count",
                    f"{layer['where']}.template",
                    "expands into one layer per matching cgroup at start-up; keep the total "
                    "within 16",
                )
                regexes += layer["template"][0] == "CgroupRegex"
            name = layer.get("name")
            if name is not None:
                if name in names:
                    self.report("name", f"{layer['where']}.name", f"same name as {names[name]}")
                names.setdefault(name, layer["where"])
        if regexes > S.MAX_CGROUP_REGEXES:
            self.report(
                "regex",
                "config",
                f"{regexes} CgroupRegex matchers, the limit is {S.MAX_CGROUP_REGEXES}",
            )
        if gpu_at is not None:
            # Flags not given: unknown, not wrong (``layers emit`` prints the SCX_FLAGS line with
            # --enable-gpu-support), so an emitted config validates without a warning by default.
            if self.flags is not None and "--enable-gpu-support" not in self.flags:
                self.report(
                    "gpu-flag",
                    gpu_at,
                    "GPU matchers without --enable-gpu-support eject the scheduler at the first "
                    "match",
                )
            if self.host is not None and not any(g.vendor == "nvidia" for g in self.host.gpus):
                self.report(
                    "gpu-support",
                    gpu_at,
                    f"GPU matchers follow the NVIDIA driver only; host {self.host.name} has no "
                    f"NVIDIA GPU",
                )


_INVALID = object()
