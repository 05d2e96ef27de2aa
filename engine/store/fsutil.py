"""Durable file primitives: fsync'd appends and atomic replaces (temp file + rename)."""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


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


_orjson_dumps: Any
_msgspec_decode: Any
try:
    from orjson import (
        OPT_PASSTHROUGH_DATACLASS,
        OPT_PASSTHROUGH_DATETIME,
        OPT_PASSTHROUGH_SUBCLASS,
    )
    from orjson import dumps as _orjson_dumps

    # only what the standard module writes itself (str, int, float, bool, None, dict, list, tuple): a dataclass, a
    # datetime or a subclass (an enum's str) make orjson raise, and the standard module says what it makes of them
    _DUMPS_OPTS = OPT_PASSTHROUGH_DATACLASS | OPT_PASSTHROUGH_DATETIME | OPT_PASSTHROUGH_SUBCLASS
except ImportError:  # pragma: no cover - orjson is in the lock; without it the standard module writes everything
    _orjson_dumps = None
    _DUMPS_OPTS = 0
try:
    from msgspec.json import Decoder as _Decoder

    _msgspec_decode = _Decoder().decode
except ImportError:  # pragma: no cover - msgspec is in the lock; without it the standard module reads everything
    _msgspec_decode = None


def fast_json(raw: bytes) -> tuple[bool, Any]:
    """``(True, value)`` when msgspec reads ``raw`` (about 2× the standard module's speed), which gives the standard
    module's value wherever it reads a text at all — integers past 64 bits exact, floats correctly rounded, a repeated
    key's last value, strings checked as UTF-8 — so no line need be searched first for what it would read otherwise
    (orjson, before, made an integer past 64 bits a float: a search for 19 digits cost 40 % of its decoding).
    ``(False, None)`` when msgspec refuses it (NaN or an infinity, a number past a double or an integer of more
    digits than Python converts, a lone surrogate escape, a raw control character, nested too deeply, not UTF-8, not
    JSON): the caller reads it with the standard module, which says what it makes of it. (Nested within a few levels
    of the interpreter's recursion limit, msgspec still reads what the standard module refuses as too deep — orjson
    did for 29 levels more.)"""
    if _msgspec_decode is not None:
        try:
            return True, _msgspec_decode(raw)
        except (ValueError, RecursionError):  # (msgspec.DecodeError, UnicodeDecodeError)
            pass
    return False, None


def typed_json(decode: Callable[[bytes], T], raw: bytes) -> T | None:
    """``decode(raw)``, a msgspec decoder of a ``Struct`` naming only the fields a pass reads (the others are passed
    over, never made into objects: 3× orjson on a session's assistant lines), where its fields hold the values the
    standard module gives them; None when they may not: msgspec refuses the line (NaN, a number past a double, a raw
    control character, an escaped lone surrogate, not an object, a field of another shape than the Struct's) or the
    line is not UTF-8 (msgspec does not check the bytes of the fields it passes over; the standard module refuses
    such a line whole). The caller then reads the line as before. (An integer past 64 bits is kept exact, a repeated
    key's last value taken: both as the standard module.)"""
    try:
        value = decode(raw)
    except (ValueError, TypeError, RecursionError):  # (msgspec's DecodeError and ValidationError are ValueErrors)
        return None
    if not raw.isascii():
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return None
    return value


def json_loads(data: bytes | str) -> Any:
    """``json.loads`` for input we do not control (msgspec where it reads the text, giving the very same value:
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


def _hashed(value: Any) -> int:
    kind = type(value)
    if kind is str:
        return hash(value)  # (a string keeps its hash: hashed once)
    if kind is dict:
        return hash(("d", *sorted((str(k), _hashed(v)) for k, v in value.items())))
    if kind is list or kind is tuple:
        return hash(("l", *map(_hashed, value)))
    if kind is int or value is None:
        return hash(("i", value))
    if kind is bool:
        return hash(("b", value))
    if kind is float:
        return hash(("f", value if math.isfinite(value) else repr(value)))
    if isinstance(value, str):  # a subclass (an enum's str): its text, as its JSON form
        return hash(str.__str__(value))
    if isinstance(value, dict | list | tuple | int | float):
        return _hashed(dict(value) if isinstance(value, dict) else list(value) if isinstance(value, list | tuple)
                       else bool(value) if isinstance(value, bool) else int(value) if isinstance(value, int)
                       else float(value))
    return hash(("o", str(value)))


def fingerprint(obj: Any) -> int:
    """A hash of ``obj`` (dicts by their items, in any order; anything JSON does not know as its ``str``): equal for
    equal values, to compare one value with what it was in this process (never written anywhere). Built from the
    values' own hashes, not from orjson's JSON bytes: orjson attaches a UTF-8 copy to every non-ASCII string it
    writes, kept as long as the string lives (a followed file's messages held their text twice: 3.5 MB over ten
    minutes at 20 lines a second)."""
    return _hashed(obj)


class Fingerprints:
    """The :func:`fingerprint` of the last ``keep`` items of a growing list, and how many items it has: what a followed
    view compares to find the messages that changed at its end (a change further back is handled otherwise), not one
    fingerprint an item for as long as the list grows."""

    def __init__(self, items: Sequence[Any], keep: int) -> None:
        self.count = len(items)
        self._recent: deque[int] = deque(map(fingerprint, items[-keep:] if keep else ()), keep)

    def __len__(self) -> int:
        return len(self._recent)

    def changed(self, index: int, item: Any) -> bool:
        """Whether item ``index`` (one of the last ``keep``) is not what it was; its fingerprint kept."""
        sig = fingerprint(item)
        if sig == self._recent[index - self.count]:
            return False
        self._recent[index - self.count] = sig
        return True

    def extend(self, items: Iterable[Any]) -> None:
        for item in items:
            self._recent.append(fingerprint(item))
            self.count += 1


def dumps_line(obj: Any, *, once: bool = False) -> bytes:
    """One JSON Lines record: compact, UTF-8, newline-terminated, no raw newlines inside — the standard module's
    ``json.dumps(obj, ensure_ascii=False, separators=(",", ":"))``, written by orjson (about 5× faster) wherever it
    gives the same value: not for a key that is not a string, an integer past 64 bits, a lone surrogate, a type
    the standard module does not write itself (orjson raises: the standard module writes it or says why not), nor
    for NaN and infinities (orjson writes ``null`` where the standard module writes ``NaN``: looked for only when
    the line holds a ``null``). Floats may be spelt otherwise (``0.00001`` for ``1e-05``): the same number.

    ``once``: by the standard module, for a value that stays in memory after it is written (a message appended to
    an open session): orjson attaches to every non-ASCII string it writes a UTF-8 copy that lives as long as the
    string, so the text would be held twice (a session's history and archive are written so, in bulk too; records
    that are not kept after they are written keep orjson's speed)."""
    if _orjson_dumps is not None and not once:
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


def append_lines(path: Path, records: Iterable[Any], *, sync: bool = True, once: bool = False) -> int:
    """Append JSON records to a JSONL file (see :func:`append_bytes`; ``once``: :func:`dumps_line`'s); return
    bytes written."""
    return append_bytes(path, b"".join(dumps_line(r, once=once) for r in records), sync=sync)


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
