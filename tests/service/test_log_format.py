"""The server's log lines (``server._LineFormat``, the time's text made once per second) are the
lines the standard format makes, across a change of second."""

from __future__ import annotations

import logging

from chronus_py.service.server import _LineFormat


def test_lines_are_the_standard_formats_across_seconds():
    standard = logging.Formatter("%(asctime)s %(levelname)s %(message)s")
    cached = _LineFormat()
    for created in (1_700_000_000.125, 1_700_000_000.999, 1_700_000_001.0, 1_700_000_061.5):
        record = logging.LogRecord("chronus.serve", logging.INFO, "", 0, "line", None, None)
        record.created, record.msecs = created, (created - int(created)) * 1000
        assert cached.format(record) == standard.format(record)


def test_a_record_of_several_lines_is_each_line_as_its_own_record():
    standard = logging.Formatter("%(asctime)s %(levelname)s %(message)s")
    lines = ['{"event": "admit", "job": "a"}', '{"event": "cancel", "job": "a"}']
    record = logging.LogRecord("chronus.serve", logging.INFO, "", 0, "\n".join(lines), None, None)
    alone = [
        logging.LogRecord("chronus.serve", logging.INFO, "", 0, line, None, None) for line in lines
    ]
    for each in alone:
        each.created, each.msecs = record.created, record.msecs
    assert _LineFormat().format(record).split("\n") == [standard.format(r) for r in alone]
