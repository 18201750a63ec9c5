"""The one safe loading path (placement/loading.py): nothing hangs, blows up memory, crashes the
interpreter or escapes as anything but a one-line LoadError naming file, line and key."""

from __future__ import annotations

import io
import time

import numpy as np
import pytest

from placement.loading import (
    MAX_DEPTH,
    LoadError,
    load_npy,
    load_structured,
    parse_json,
    parse_yaml,
    read_bytes,
    show,
)


def alias_bomb(levels: int = 9) -> str:
    lines = ["a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def refused(call, *args) -> LoadError:
    started = time.perf_counter()
    with pytest.raises(LoadError) as info:
        call(*args)
    assert time.perf_counter() - started < 5
    assert "\n" not in str(info.value) and len(str(info.value)) < 400
    return info.value


def test_alias_bomb_is_refused_at_once():
    err = refused(parse_yaml, alias_bomb(), "bomb.yaml")
    assert "aliases expanded" in err.why and err.line is not None


def test_small_aliases_still_work():
    assert parse_yaml("a: &x [1, 2]\nb: *x\n") == {"a": [1, 2], "b": [1, 2]}


@pytest.mark.parametrize("text", ["[" * 200_000, "{a: " * 30_000, "- " * 5000 + "x"])
def test_deep_nesting_is_refused_not_a_crash(text):
    err = refused(parse_yaml, text, "deep.yaml")
    assert f"deeper than {MAX_DEPTH}" in err.why


def test_nesting_within_the_limit_parses():
    assert parse_yaml("[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)) is not None


@pytest.mark.parametrize(
    "text,why,key",
    [
        ("x: " + "9" * 400, "out of range", "x"),
        ("x: " + "1" * 5000, "not an integer", "x"),
        ("a: {b: [1, !!int 1e3]}", "not an integer", "a.b[1]"),
        ("y: .inf", "not a finite number", "y"),
        ("y: [.nan]", "not a finite number", "y[0]"),
        ("y: 1.0e+400", "not a finite number", "y"),
    ],
)
def test_numbers_are_range_checked_where_they_appear(text, why, key):
    err = refused(parse_yaml, text, "n.yaml")
    assert why in err.why and err.key == key and err.line == 1


@pytest.mark.parametrize(
    "text, value",
    [
        ("now: 1e15", 1e15),
        ("x: 7.2e3", 7200.0),
        ("x: -1E-3", -0.001),
        ("x: .5e2", 50.0),
        ("x: 1.0e+5", 1e5),  # YAML 1.1's form still reads
        ("x: 12", 12),
        ("x: 1e", "1e"),
        ("x: e5", "e5"),
        ("x: '1e5'", "1e5"),
    ],
)
def test_exponent_floats_read_as_yaml_1_2_reads_them(text, value):
    """YAML 1.1 (PyYAML) read ``1e15`` as a string, so ``now: 1e15`` was 'not a number'."""
    assert parse_yaml(text, "n.yaml") == {text.split(":")[0]: value}


def test_an_exponent_float_is_range_checked_as_others_are():
    err = refused(parse_yaml, "now: 1e999", "n.yaml")
    assert err.why == "'1e999' is not a finite number" and err.key == "now"


def test_json_limits():
    assert "nested deeper" in refused(parse_json, "[" * 100_000, "d.json").why
    assert "NaN is not a JSON number" in refused(parse_json, '{"a": NaN}', "n.json").why
    assert refused(parse_json, '{"a": [1e400]}', "n.json").key == "a[0]"
    assert refused(parse_json, '{"a": 1', "n.json").line == 1


def test_bytes_that_are_not_utf8_name_their_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_bytes(b"a: 1\nb: caf\xe9\n")
    err = refused(load_structured, path)
    assert err.line == 2 and "not UTF-8" in err.why and err.source == str(path)


def test_size_limit_is_checked_before_reading(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_bytes(b"x" * 1000)
    with pytest.raises(LoadError, match="limit is 100"):
        read_bytes(path, max_bytes=100)


def test_show_is_bounded_whatever_the_value():
    huge = [[list(range(1000))] * 1000] * 1000  # a billion elements by reference
    assert len(show(huge)) <= 60 and len(show("x" * 10**6)) <= 60 and len(show(10**4000)) <= 60


def npy_bytes(array) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


@pytest.mark.parametrize(
    "array,why",
    [
        (np.array([1 + 2j]), "real-valued"),
        (np.array(["a", "b"]), "real-valued"),
        (np.array(["2020-01-01"], dtype="datetime64[D]"), "real-valued"),
    ],
)
def test_npy_dtypes_other_than_real_numbers_are_refused(tmp_path, array, why):
    path = tmp_path / "a.npy"
    path.write_bytes(npy_bytes(array))
    assert why in refused(load_npy, path).why


def npy_with_header(shape, payload: bytes) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": "<f8", "fortran_order": False, "shape": shape}
    )
    return buf.getvalue() + payload


def test_npy_header_claiming_more_than_the_file_holds(tmp_path):
    path = tmp_path / "a.npy"
    path.write_bytes(npy_with_header((10**11,), b"\0" * 32))
    assert "claims 100,000,000,000 values" in refused(load_npy, path).why
    path.write_bytes(npy_with_header((1000,), b"\0" * 32))
    assert "file is too short" in refused(load_npy, path).why
    damaged = npy_with_header((4,), b"\0" * 32).replace(b"'descr'", b"'descr")
    path.write_bytes(damaged)
    assert "not a readable .npy array" in refused(load_npy, path).why


def test_npy_reads_real_arrays(tmp_path):
    path = tmp_path / "a.npy"
    path.write_bytes(npy_bytes(np.array([1, 2, 3], dtype=np.int32)))
    assert load_npy(path).tolist() == [1.0, 2.0, 3.0]


def test_odd_tagged_scalars_are_clean_errors():
    """`!!int *zz` reached PyYAML's int constructor with an empty string (IndexError)."""
    err = refused(parse_yaml, "vc_a: vcA\n!!int *zz: vcB\n", "t.yaml")
    assert "not an integer" in err.why or "not valid YAML" in err.why


@pytest.mark.parametrize(
    "text, line, key",
    [
        ("now: 0\npending: []\nnow: 5\n", 3, ""),  # the last won: planned at 5
        ("state:\n  pending: [a]\n  running: []\n  pending: [b]\n", 4, "state"),
        ("- {id: a, gpus: 1, id: b}\n", 1, "[0]"),
    ],
)
def test_a_yaml_key_given_twice_in_one_mapping_is_refused(text, line, key):
    """PyYAML keeps the last of a repeated key without a word: a second ``pending:`` dropped
    the first's jobs."""
    err = refused(parse_yaml, text, "s.yaml")
    assert err.line == line and err.key == key and err.why.endswith("twice in this mapping")


def test_keys_may_repeat_across_mappings_and_merge_keys_may_repeat():
    text = "a: &a {x: 1}\nb: &b {y: 2}\nc: {x: 3}\nd:\n  <<: *a\n  <<: *b\n  x: 4\n"
    assert parse_yaml(text, "s.yaml")["d"] == {"x": 4, "y": 2}
    assert parse_json('{"a": {"x": 1}, "b": {"x": 2}}', "s.json") == {"a": {"x": 1}, "b": {"x": 2}}


def test_a_json_key_given_twice_in_one_object_is_refused():
    err = refused(parse_json, '{"jobs": [{"id": "a", "gpus": 1, "gpus": 8}]}', "s.json")
    assert err.why == "key 'gpus' appears twice in one object"
