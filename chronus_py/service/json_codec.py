"""JSON written on the request path: by orjson where it can, the standard library where not.

Why: under churn (issue 27) the standard library's encoder took ~3% of the server's GIL time
(py-spy, session 14): the answers and the job rows written. orjson does the same work in one C
call. Where it refuses a value the standard library takes (an integer beyond 64 bits, a key
that is not a string), the standard library writes it as before. What changes: the spacing of
stored rows, the spelling of some floats (``1e16`` for ``1e+16``), both the same values; and a
NaN, which the standard library refused in an answer (a 503) or wrote as the non-JSON ``NaN``
in a row, is written ``null``. A request is never read with orjson: it reads integers beyond
64 bits as floats, which would change what a request means. A stored row is, where its text has
no run of 19 digits (so no such integer): ``decode_row``.
"""

from __future__ import annotations

import json
from typing import Any

import orjson


def encode(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON (as Starlette's ``JSONResponse`` renders it)."""
    try:
        return orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError: a value only the standard library takes
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def encode_text(value: Any) -> str:
    """``value`` as compact JSON text (a database column)."""
    return encode(value).decode()


_DIGITS = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
"""A byte table making every digit ``0`` and blanking the rest: ``_LONG`` in the translated
text is a run of 19 digits, which may be an integer orjson would read as a float (beyond 64
bits). Two C calls (~1 us a row) where ``re``'s ``\\d{19}`` took 5-14 us."""
_LONG = b"0" * 19


def decode_row(text: str) -> Any:
    """A stored JSON column read back: by orjson where the text holds no integer it would read
    as a float, else (or where orjson refuses it: a ``NaN`` an older server wrote) by the
    standard library. A job's row is read for every cancellation and status read, three columns
    each; the standard library's parse was ~15 of the row's ~20 us (issue 27, session 17)."""
    if _LONG not in text.encode().translate(_DIGITS):
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)


def log_line(value: Any) -> str:
    """``value`` as one compact JSON line for the decision log, any value orjson cannot write
    (a path, an enum) by its ``str``: ``json.dumps(value, default=str)`` but in one C call. The
    standard library's encoder was 2.7% of the server's GIL time under churn (py-spy, issue 27
    session 16). Unlike it, non-ASCII text is written as UTF-8, not ``\\u`` escapes, and
    without spaces after ``:`` and ``,``; a NaN is ``null``."""
    try:
        return orjson.dumps(value, default=str).decode()
    except TypeError:  # orjson.JSONEncodeError: an integer beyond 64 bits, a key not a string
        return json.dumps(value, default=str, ensure_ascii=False, separators=(",", ":"))
