"""Stored rows read back by ``json_codec.decode_row``: what the standard library would read,
including the integers beyond 64 bits orjson would turn into floats."""

from __future__ import annotations

import json
import math

import pytest

from chronus_py.service.json_codec import decode_row, encode_text


@pytest.mark.parametrize(
    "value",
    [
        {"id": "b0", "gpus": 8, "deadlines": [{"at": 2895.06595018901}], "tenant": "team-é"},
        {"iterations": 18446744073709551617, "note": "beyond 64 bits"},
        {"iterations": -(2**63) - 1},
        {"id": "1234567890123456789012", "gpus": 1},
        [1e16, 0.1, 123456789012345678],
    ],
)
def test_a_row_reads_back_as_the_standard_library_reads_it(value):
    text = encode_text(value)
    got = decode_row(text)
    assert got == json.loads(text) == value
    assert [type(x) for x in _leaves(got)] == [type(x) for x in _leaves(value)]


def test_a_nan_an_older_server_stored_still_reads():
    assert math.isnan(decode_row('{"a": NaN}')["a"])


def _leaves(value):
    if isinstance(value, dict):
        return [x for v in value.values() for x in _leaves(v)]
    if isinstance(value, list):
        return [x for v in value for x in _leaves(v)]
    return [value]
