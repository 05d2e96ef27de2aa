"""Durable file primitives: fsync'd appends and atomic replaces (temp file + rename)."""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def fsync_dir(path: Path) -> None:
    """fsync a directory so that a rename or a new file in it survives a crash."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically: write a temp file beside it, fsync, rename. With ``durable``
    False nothing is fsync'd (still atomic for readers; a crash may leave the old content or an empty file): for
    caches that are rebuilt when unreadable."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if durable:
        fsync_dir(path.parent)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: Path, obj: Any) -> None:
    try:
        data = (json.dumps(obj, ensure_ascii=False, indent=1) + "\n").encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (a file name that is not UTF-8): as an escape, read back the same
        data = (json.dumps(obj, ensure_ascii=True, indent=1) + "\n").encode("ascii")
    atomic_write_bytes(path, data)


# a run of 19 digits: maybe an integer past 64 bits, which orjson would turn into a float (the stdlib keeps it exact);
# found as 19 "0"s in the line with its digits made "0" and the rest " " (C speed: 6× a regex's)
_DIGITS = bytes(48 if 48 <= i <= 57 else 32 for i in range(256))
_LONG_RUN = b"0" * 19
_orjson_loads: Any
_orjson_dumps: Any
try:
    from orjson import (
        OPT_NON_STR_KEYS,
        OPT_PASSTHROUGH_DATACLASS,
        OPT_PASSTHROUGH_DATETIME,
        OPT_PASSTHROUGH_SUBCLASS,
        OPT_SORT_KEYS,
    )
    from orjson import dumps as _orjson_dumps
    from orjson import loads as _orjson_loads

    # only what the standard module writes itself (str, int, float, bool, None, dict, list, tuple): a dataclass, a
    # datetime or a subclass (an enum's str) make orjson raise, and the standard module says what it makes of them
    _DUMPS_OPTS = OPT_PASSTHROUGH_DATACLASS | OPT_PASSTHROUGH_DATETIME | OPT_PASSTHROUGH_SUBCLASS
    _KEY_OPTS = OPT_SORT_KEYS | OPT_NON_STR_KEYS
except ImportError:  # pragma: no cover - orjson is in the lock; without it the standard module reads everything
    _orjson_loads = _orjson_dumps = None
    _DUMPS_OPTS = _KEY_OPTS = 0


def fast_json(raw: bytes) -> tuple[bool, Any]:
    """``(True, value)`` when orjson reads ``raw`` as the standard module would (about 3× faster): not when it
    refuses it (NaN, a lone surrogate, a raw control character, nested too deeply, not UTF-8: the standard module
    then says what it makes of it) nor when it may hold an integer past 64 bits (orjson would make it a float).
    ``(False, None)`` otherwise: the caller reads it with the standard module."""
    if _orjson_loads is not None and _LONG_RUN not in raw.translate(_DIGITS):
        try:
            return True, _orjson_loads(raw)
        except ValueError:  # orjson.JSONDecodeError
            pass
    return False, None


def json_loads(data: bytes | str) -> Any:
    """``json.loads`` for input we do not control (orjson where it gives the very same value:
    :func:`fast_json`): too deep a nesting is a ValueError like any other bad JSON (``json.loads`` raises
    RecursionError beyond ~1,000 levels, which callers never expect)."""
    if isinstance(data, bytes):
        done, value = fast_json(data)
        if done:
            return value
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _non_finite(obj: Any) -> bool:
    """Whether ``obj`` holds a NaN or an infinity (at any depth; dicts, lists and tuples of exactly those types:
    orjson refused their subclasses)."""
    stack = [obj]
    pop, push_all = stack.pop, stack.extend
    while stack:
        item = pop()
        kind = type(item)
        if kind is dict:
            push_all(item.values())
        elif kind is list or kind is tuple:
            push_all(item)
        elif kind is float and not math.isfinite(item):
            return True
    return False


def fingerprint(obj: Any) -> int:
    """A hash of ``obj``'s JSON form with sorted keys (anything JSON does not know as its ``str``): equal for equal
    values, to compare one value with what it was (never written anywhere). orjson's bytes where it can, the
    standard module's where it cannot (an integer past 64 bits, a lone surrogate)."""
    if _orjson_dumps is not None:
        try:
            return hash(_orjson_dumps(obj, default=str, option=_KEY_OPTS))
        except TypeError:  # orjson.JSONEncodeError
            pass
    return hash(json.dumps(obj, sort_keys=True, default=str))


def dumps_line(obj: Any) -> bytes:
    """One JSON Lines record: compact, UTF-8, newline-terminated, no raw newlines inside — the standard module's
    ``json.dumps(obj, ensure_ascii=False, separators=(",", ":"))``, written by orjson (about 5× faster) wherever it
    gives the same value: not for a key that is not a string, an integer past 64 bits, a lone surrogate, a type
    the standard module does not write itself (orjson raises: the standard module writes it or says why not), nor
    for NaN and infinities (orjson writes ``null`` where the standard module writes ``NaN``: looked for only when
    the line holds a ``null``). Floats may be spelt otherwise (``0.00001`` for ``1e-05``): the same number."""
    if _orjson_dumps is not None:
        try:
            out: bytes = _orjson_dumps(obj, option=_DUMPS_OPTS)
        except TypeError:  # orjson.JSONEncodeError
            pass
        else:
            if b"null" not in out or not _non_finite(obj):
                return out + b"\n"
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def append_bytes(path: Path, data: bytes, *, sync: bool = True) -> int:
    """Append raw JSONL bytes as one write, fsync'd; return bytes written.

    If the file ends with a torn (unterminated) line, a newline is written first so the new
    records start on their own line.
    """
    path = Path(path)
    if not data:
        return 0
    new = not path.exists()
    if new:
        path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab+") as fh:
        if not new and fh.seek(0, os.SEEK_END) > 0:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) != b"\n":
                data = b"\n" + data
        fh.write(data)
        fh.flush()
        if sync:
            os.fsync(fh.fileno())
    if new and sync:
        fsync_dir(path.parent)
    return len(data)


def append_lines(path: Path, records: Iterable[Any], *, sync: bool = True) -> int:
    """Append JSON records to a JSONL file (see :func:`append_bytes`); return bytes written."""
    return append_bytes(path, b"".join(dumps_line(r) for r in records), sync=sync)


def read_jsonl_objects(path: Path, problems: list[str] | None = None, label: str | None = None) -> list[dict[str, Any]]:
    """Every JSON object line of a JSONL file, in order; blank lines skipped.

    A line that is not JSON, or not an object (a torn last line after a crash), is skipped and
    described in ``problems`` (``"<label> line <n>: …"``) when a list is given.
    """
    path = Path(path)
    label = label or path.name
    out: list[dict[str, Any]] = []
    for n, raw in enumerate(path.read_bytes().splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            obj = json_loads(raw)
        except ValueError as exc:
            if problems is not None:
                problems.append(f"{label} line {n}: not JSON ({exc})")
            continue
        if isinstance(obj, dict):
            out.append(obj)
        elif problems is not None:
            problems.append(f"{label} line {n}: not an object")
    return out


def write_lines_atomic(path: Path, records: Iterable[Any]) -> None:
    """Replace a JSONL file with ``records`` atomically."""
    atomic_write_bytes(path, b"".join(dumps_line(r) for r in records))


def count_file_lines(path: Path) -> int:
    """Lines in a file (a last line without a newline counts), read in 1 MiB chunks; 0 if missing."""
    path = Path(path)
    if not path.exists():
        return 0
    newlines = 0
    last = b""
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            newlines += chunk.count(b"\n")
            last = chunk[-1:]
    return newlines + (1 if last and last != b"\n" else 0)
