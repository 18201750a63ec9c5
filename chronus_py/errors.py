"""The one exception tree of chronus-py.

    ChronusError                 anything the CLI turns into a one-line message
    ├── InputError (exit 2)      unreadable or malformed input: trace, config, state, samples
    │   ├── ArgumentError        a bad argument to the library's API (also a ValueError)
    │   └── JobIdError           a job id the scheduler does not hold (also a KeyError)
    └── CheckFailed (exit 1)     input was read and checked, and found wanting

Readers raise ``InputError`` at the edge, naming the file, line and field, so nothing deeper
re-validates and no user ever sees a traceback for bad input.
"""

from __future__ import annotations


class ChronusError(Exception):
    """Base class; ``exit_code`` is what the CLI returns for it."""

    exit_code = 2


class InputError(ChronusError):
    """Malformed input. Formats as ``FILE:LINE: column X: why`` (or ``FILE: key: why``)."""

    exit_code = 2

    def __init__(self, source: str, why: str, *, line: int | None = None, field: str | None = None):
        self.source = str(source)
        self.line = line
        self.field = field
        self.why = why
        where = self.source if line is None else f"{self.source}:{line}"
        what = "" if field is None else f"{field}: "
        super().__init__(f"{where}: {what}{why}")


class ArgumentError(InputError, ValueError):
    """A bad argument to the library API (``chronus_py.jobs.checks``): ``source`` the call or
    the job, ``field`` the argument or the job's field. Also a ``ValueError``, as the same
    calls raised before the checks, so a caller's ``except`` keeps working."""


class JobIdError(InputError, KeyError):
    """A job id the scheduler holds no active job for (never submitted, or already ended);
    also a ``KeyError``, as before."""

    __str__ = BaseException.__str__  # KeyError's would quote the whole message


class CheckFailed(ChronusError):
    """A check ran and failed (invalid layer config, unmet scenario expectation)."""

    exit_code = 1
