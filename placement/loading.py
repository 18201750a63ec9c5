"""The one safe way every input file is read: bytes, text, YAML, JSON, CSV and ``.npy``.

Operators feed the scheduler whatever they have, so no file may hang a command, exhaust memory,
crash the interpreter or come back as a traceback. Every reader in chronus-py and ``placement``
goes through here, and every failure is a one-line :class:`LoadError` naming the file, line and
key. ``chronus_py.inputs`` turns it into ``InputError`` (exit 2) in one place.

What is bounded, and why:

- **size** (:data:`MAX_BYTES`): checked before reading, so a huge file is refused, not slurped;
- **bytes**: decoded as UTF-8 (a BOM is allowed); a bad byte names its line and offset;
- **depth** (:data:`MAX_DEPTH`): nesting is measured on the parser's event stream, which is
  iterative, *before* the recursive composer runs -- 30,000 ``[`` used to overflow the C stack;
- **nodes** (:data:`MAX_NODES`): counted with aliases *expanded*, so a 640-byte "billion laughs"
  file is refused at once instead of being expanded by a later walk or ``repr``;
- **numbers**: integers beyond 64 bits, NaN and infinities are refused where they appear;
- **messages**: values are shown with :func:`show`, which never prints more than a few dozen
  characters however large the value is.
"""

from __future__ import annotations

import json
import math
import os
import re
import reprlib
from pathlib import Path
from typing import Any, Iterable

import yaml

from placement.errors import PlacementError

MAX_BYTES = 256 * 1024 * 1024
MAX_DEPTH = 64
MAX_NODES = 5_000_000
MAX_INT = 2**63 - 1
_INT_TAG = "tag:yaml.org,2002:int"
_FLOAT_TAG = "tag:yaml.org,2002:float"
# YAML 1.2's floats with an exponent (``1e15``, ``7.2e3``, ``-1E-3``). YAML 1.1, which PyYAML
# follows, wants a point and a signed exponent (``1.0e+15``) and reads the rest as strings, so
# ``now: 1e15`` was refused as "not a number"; YAML 1.2 readers (and Go's, so kubectl's) take
# them as numbers.
_EXPONENT_FLOAT = re.compile(r"^[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+$")


class _Resolver(yaml.resolver.Resolver):
    """PyYAML's (YAML 1.1) resolver, with YAML 1.2's exponent floats."""


_Resolver.add_implicit_resolver(_FLOAT_TAG, _EXPONENT_FLOAT, list("-+.0123456789"))


class _SafeLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """PyYAML's safe loader (libyaml's when the wheel has it), resolving as :class:`_Resolver`."""

    yaml_implicit_resolvers = _Resolver.yaml_implicit_resolvers


class LoadError(PlacementError):
    """A file that cannot be read safely; ``key`` is the dotted path of the value at fault."""


_SHOW = reprlib.Repr()
_SHOW.maxstring = 40
_SHOW.maxother = 40
_SHOW.maxlist = _SHOW.maxtuple = _SHOW.maxdict = _SHOW.maxset = 4
_SHOW.maxlevel = 2
_SHOW.maxlong = 24


def show(value: Any) -> str:
    """A bounded ``repr`` for error messages: at most a few dozen characters, whatever ``value``."""
    text = _SHOW.repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def read_bytes(path: str | Path, *, what: str = "file", max_bytes: int = MAX_BYTES) -> bytes:
    """The file's bytes, refusing it before reading if it is larger than ``max_bytes``."""
    path = Path(path)
    try:
        with path.open("rb") as fh:
            size = _size(fh)
            if size > max_bytes:
                raise LoadError(
                    "", f"{what} is {size:,} bytes; the limit is {max_bytes:,}", source=str(path)
                )
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        why = f"cannot read: {exc.strerror or exc}"
        raise LoadError("", why, source=str(path)) from None
    if len(data) > max_bytes:
        raise LoadError(
            "", f"{what} is larger than the limit of {max_bytes:,} bytes", source=str(path)
        )
    return data


def _size(fh) -> int:
    try:
        return os.fstat(fh.fileno()).st_size
    except OSError:
        return 0


def decode(data: bytes, source: str) -> str:
    """UTF-8 text (a leading BOM dropped); a bad byte is reported with its line and offset."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise LoadError(
            "",
            f"not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {exc.start}",
            source=source,
            line=line,
        ) from None


def read_text(path: str | Path, *, what: str = "file", max_bytes: int = MAX_BYTES) -> str:
    return decode(read_bytes(path, what=what, max_bytes=max_bytes), str(path))


# -- YAML ---------------------------------------------------------------------------------------
def load_yaml(path: str | Path, *, what: str = "file") -> Any:
    """Read and parse a YAML file within the limits above."""
    return parse_yaml(read_text(path, what=what), str(path))


def parse_yaml(text: str, source: str = "<text>") -> Any:
    """Parse YAML text: first an iterative pass over the event stream checks depth, expanded size
    and numbers, then the (recursive) constructor runs on a document known to be small enough."""
    try:
        _check_yaml_events(yaml.parse(text, Loader=_SafeLoader), source)
        return yaml.load(text, Loader=_SafeLoader)
    except LoadError:
        raise
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        if "maximum nesting depth" in problem:
            # libyaml (PyYAML >= 6.0.4's wheels) refuses flow nesting past 1,000 levels while
            # scanning ahead, before the event pass sees level MAX_DEPTH: the same refusal.
            problem = f"nested deeper than {MAX_DEPTH} levels"
        raise LoadError(
            "",
            f"not valid YAML: {_one_line(problem)}",
            source=source,
            line=None if mark is None else mark.line + 1,
        ) from None
    except (
        ValueError,
        OverflowError,
        TypeError,
        IndexError,
        KeyError,
        AttributeError,
        RecursionError,
        MemoryError,
    ) as exc:  # PyYAML's constructors on odd tagged scalars
        raise LoadError("", f"not valid YAML: {_one_line(str(exc))}", source=source) from None


class _Frame:
    """One open collection in the event pass: its size so far and where the next key goes."""

    __slots__ = ("anchor", "size", "height", "mapping", "index", "key", "path", "keys")

    def __init__(self, anchor: str | None, mapping: bool, path: str):
        self.anchor = anchor
        self.size = 1
        self.height = 1
        self.mapping = mapping
        self.index = 0
        self.key: str | None = None
        self.path = path
        self.keys: set[str] = set()  # a mapping's scalar keys so far

    def child_path(self) -> str:
        if self.mapping:
            name = "?" if self.key is None else self.key
            path = f"{self.path}.{name}" if self.path else name
        else:
            path = f"{self.path}[{self.index}]"
        return path if len(path) <= 100 else "..." + path[-80:]

    def advance(self, scalar: Any = None) -> None:
        if not self.mapping:
            self.index += 1
        elif self.index % 2 == 0:
            self.key = None if scalar is None else str(scalar)[:40]
            self.index += 1
        else:
            self.index += 1


def _check_yaml_events(events: Iterable[Any], source: str) -> None:
    resolver = _Resolver()
    anchors: dict[str, tuple[int, int]] = {}  # anchor -> (expanded size, height)
    stack: list[_Frame] = []
    total = 0

    def fail(why: str, event: Any, key: str = "") -> LoadError:
        mark = getattr(event, "start_mark", None)
        return LoadError(key, why, source=source, line=None if mark is None else mark.line + 1)

    def add_leaf(size: int, height: int, event: Any) -> None:
        nonlocal total
        total += size
        if total > MAX_NODES:
            raise fail(f"more than {MAX_NODES:,} values (aliases expanded)", event)
        if stack:
            top = stack[-1]
            top.size += size
            top.height = max(top.height, height + 1)
            if len(stack) + height > MAX_DEPTH:
                raise fail(f"nested deeper than {MAX_DEPTH} levels", event, top.child_path())

    for event in events:
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            path = stack[-1].child_path() if stack else ""
            if len(stack) >= MAX_DEPTH:
                raise fail(f"nested deeper than {MAX_DEPTH} levels", event, path)
            total += 1
            if total > MAX_NODES:
                raise fail(f"more than {MAX_NODES:,} values (aliases expanded)", event)
            stack.append(_Frame(event.anchor, isinstance(event, yaml.MappingStartEvent), path))
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            frame = stack.pop()
            if frame.anchor is not None:
                anchors[frame.anchor] = (frame.size, frame.height)
            total -= 1  # counted at the start; add_leaf counts the whole frame again
            add_leaf(frame.size, frame.height, event)
            if stack:
                stack[-1].advance()
        elif isinstance(event, yaml.ScalarEvent):
            key = stack[-1].child_path() if stack else ""
            value = _check_scalar(resolver, event, key, fail)
            top = stack[-1] if stack else None
            if top is not None and top.mapping and not top.index % 2:  # a key
                # PyYAML keeps the last of a repeated key silently: a second ``now:`` planned
                # at another time, a second ``pending:`` dropped the first's jobs without a
                # word. A merge key (``<<``) may repeat: each merges another mapping.
                if value in top.keys and value != "<<":
                    raise fail(f"key {show(value)} appears twice in this mapping", event, top.path)
                top.keys.add(value)
            if event.anchor is not None:
                anchors[event.anchor] = (1, 1)
            add_leaf(1, 1, event)
            if stack:
                stack[-1].advance(value if stack[-1].mapping else None)
        elif isinstance(event, yaml.AliasEvent):
            size, height = anchors.get(event.anchor, (1, 1))
            add_leaf(size, height, event)
            if stack:
                stack[-1].advance()
        elif isinstance(event, yaml.DocumentEndEvent):
            stack.clear()


_CONSTRUCTOR = yaml.constructor.SafeConstructor()


def _check_scalar(resolver: Any, event: Any, key: str, fail) -> Any:
    """The scalar's text, after refusing integers beyond 64 bits and non-finite floats."""
    tag = event.tag
    if tag is None or tag == "!":
        tag = resolver.resolve(yaml.ScalarNode, event.value, event.implicit)
    if tag == _INT_TAG:
        try:
            number = _CONSTRUCTOR.construct_yaml_int(yaml.ScalarNode(tag, event.value))
        except (ValueError, TypeError, IndexError):
            raise fail(f"not an integer: {show(event.value)}", event, key) from None
        if abs(number) > MAX_INT:
            raise fail(f"integer {show(event.value)} is out of range", event, key)
    elif tag == _FLOAT_TAG:
        try:
            number = _CONSTRUCTOR.construct_yaml_float(yaml.ScalarNode(tag, event.value))
        except (ValueError, TypeError, IndexError):
            raise fail(f"not a number: {show(event.value)}", event, key) from None
        if not math.isfinite(number):
            raise fail(f"{show(event.value)} is not a finite number", event, key)
    return event.value


# -- JSON ---------------------------------------------------------------------------------------
def load_json(path: str | Path, *, what: str = "file") -> Any:
    return parse_json(read_text(path, what=what), str(path))


def parse_json(text: str, source: str = "<text>") -> Any:
    """Parse JSON text, then walk it (iteratively) for depth, size and number range.

    ``NaN`` and ``Infinity`` are not JSON; Python's parser accepts them, this one does not."""

    def refuse_constant(name: str) -> Any:
        raise _NonFinite(name)

    def refuse_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        """An object, unless a key repeats (Python's parser keeps the last silently)."""
        out = dict(pairs)
        if len(out) < len(pairs):
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    raise _Repeated(key)
                seen.add(key)
        return out

    try:
        data = json.loads(text, parse_constant=refuse_constant, object_pairs_hook=refuse_repeats)
    except _Repeated as exc:
        why = f"key {show(exc.args[0])} appears twice in one object"
        raise LoadError("", why, source=source) from None
    except json.JSONDecodeError as exc:
        raise LoadError("", f"not valid JSON: {exc.msg}", source=source, line=exc.lineno) from None
    except _NonFinite as exc:
        raise LoadError("", f"{exc.args[0]} is not a JSON number", source=source) from None
    except RecursionError:
        raise LoadError("", f"nested deeper than {MAX_DEPTH} levels", source=source) from None
    except (ValueError, OverflowError, MemoryError) as exc:
        raise LoadError("", f"not valid JSON: {_one_line(str(exc))}", source=source) from None
    check_tree(data, source)
    return data


class _NonFinite(Exception):
    pass


class _Repeated(Exception):
    pass


def check_tree(data: Any, source: str = "<data>") -> None:
    """Depth, size and number checks over already-parsed data (JSON, request bodies)."""
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    count = 0
    while stack:
        value, key, depth = stack.pop()
        count += 1
        if count > MAX_NODES:
            raise LoadError("", f"more than {MAX_NODES:,} values", source=source)
        if depth > MAX_DEPTH:
            raise LoadError(key, f"nested deeper than {MAX_DEPTH} levels", source=source)
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            if abs(value) > MAX_INT:
                raise LoadError(key, "integer is out of range", source=source)
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise LoadError(key, f"{show(value)} is not a finite number", source=source)
        elif isinstance(value, dict):
            for name, item in value.items():
                name = str(name)[:40]
                stack.append((item, _short(f"{key}.{name}" if key else name), depth + 1))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                stack.append((item, _short(f"{key}[{i}]"), depth + 1))


def load_structured(path: str | Path, *, what: str = "file") -> Any:
    """A ``.json`` file (or any file whose text starts with ``{`` and parses as JSON) as JSON --
    json is much faster than YAML for large files -- and anything else as YAML."""
    text = read_text(path, what=what)
    source = str(path)
    if Path(path).suffix.lower() == ".json":
        return parse_json(text, source)
    if text.lstrip().startswith("{"):
        try:
            return parse_json(text, source)
        except LoadError:
            pass
    return parse_yaml(text, source)


def _short(key: str) -> str:
    return key if len(key) <= 100 else "..." + key[-80:]


def _one_line(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= 120 else text[:117] + "..."


# -- NPY ----------------------------------------------------------------------------------------
def load_npy(path: str | Path, *, what: str = "samples file", max_items: int = 50_000_000):
    """A real-valued ``.npy`` array, its header checked against the file before any allocation.

    Refuses pickles, object/complex/string/datetime dtypes, headers that claim more items than the
    file holds (a damaged header used to allocate 1e11 items). Values are the caller's to check:
    it knows what a sample means and can name the bad one."""
    import io

    import numpy as np

    data = read_bytes(path, what=what)
    source = str(path)
    fh = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
        else:
            raise ValueError(f"unsupported .npy version {version}")
    except LoadError:
        raise
    except Exception as exc:  # numpy reports a damaged header with many exception types
        why = f"not a readable .npy array: {_one_line(str(exc))}"
        raise LoadError("", why, source=source) from None
    if dtype.kind not in "fiub" or dtype.hasobject:
        raise LoadError(
            "", f"expected a real-valued array, got dtype {_one_line(str(dtype))}", source=source
        )
    if not all(isinstance(n, int) and n >= 0 for n in shape):
        raise LoadError(
            "", f"not a readable .npy array: shape {_one_line(str(shape))}", source=source
        )
    items = math.prod(shape)
    if items > max_items:
        raise LoadError(
            "", f"the header claims {items:,} values; the limit is {max_items:,}", source=source
        )
    need = items * dtype.itemsize
    if len(data) - fh.tell() < need:
        raise LoadError(
            "", f"the header claims {items:,} values but the file is too short", source=source
        )
    array = np.frombuffer(data, dtype=dtype, count=items, offset=fh.tell())
    return array.reshape(shape, order="F" if fortran else "C").astype(np.float64)
