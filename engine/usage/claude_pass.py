"""A first index's pass over one Claude Code file (issue 28): its Sources summary and its index rows, the very ones
:func:`engine.usage.rows.summary_and_rows_read` makes through the reader (:func:`engine.sources.session_summary.
summarize_read`), with less work per line.

The reader's own scan, build and derive make the session (:class:`engine.sources.claude_code.ClaudeCodeReader`:
``_scan_line`` for each line's object, then ``finish``), the light pass's :meth:`_ClaudeScan.take` the summary, and
:func:`engine.usage.rows.rows_of` the rows. What differs:

- the file is read in blocks of :data:`BLOCK` and cut into lines at C speed, not by a ``readline`` and three
  generators per line (:func:`engine.sources.model.capped_lines`, ``LineBuffer.counted``, ``json_lines``);
- a line is decoded by :func:`engine.store.fsutil.fast_json` directly (what
  :func:`engine.sources.model.loads_line` does); a line it refuses, one that is not an object and a torn last line go
  through ``json_lines`` as before (the lines it cannot read said in the session's ``skipped``, as before);
- the summary's ``take`` and the one-hour pass are handed only the lines they can learn from (their own conditions);
- a ``progress`` line (70 % of a session's lines) without a string ``data.agentId``, once the scan and the summary
  know the first time, the working folder and the session id, is all ``_scan_line`` does with it: its uuid's parent
  kept (the chain runs through such lines), its raw timestamp kept, not turned into ISO — the scan's last time is
  the last of these that is a time, worked out when the next other line has none or the file ends
  (:func:`_last_time`); a progress line with an agent id (a subagent's call streamed into the file) and every
  line before that point go through ``_scan_line``;
- such a progress line, written as Claude Code writes it (``"type":"progress"`` where the last two progress lines
  decoded whole had it: the byte checked, not searched for), is decoded for the few fields the pass reads of it
  (:class:`_ProgressLine`, by :func:`engine.store.fsutil.typed_json`), its ``data`` (a hook's command, a shell's
  whole output) passed over; one that holds a ``message``, names a subagent, is another type after all or that
  msgspec reads otherwise than the standard module is decoded whole;
- tool calls' arguments are not made into JSON text (``ClaudeCodeReader(arguments=False)``): no row reads them (a
  call's ``tools`` are the names of its response's tool calls, a tool result's tokens its own text's).

:func:`summary_and_session` reads; :func:`engine.usage.rows.summary_and_rows` makes the rows of what it read. A line
longer than :data:`engine.sources.model.MAX_LINE_BYTES`: None, and the caller reads the file as before.
``tests/engine/usage/test_claude_pass.py`` compares the summary, the rows and the damaged lines with the reader's on
every shared session, on a folder shaped as the benchmark's and on lines made to take every way.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from engine.sources import model as _model
from engine.sources.model import (
    LINE_ERRORS,
    SourceError,
    SourceSession,
    iso,
    json_lines,
    line_problem,
    open_regular,
)
from engine.store.fsutil import fast_json, typed_json

if TYPE_CHECKING:
    from engine.sources.entry import SourceEntry

BLOCK = 8 * 2**20


class _TooLong(Exception):
    """A line longer than MAX_LINE_BYTES: the file is read as before."""


def _blocks(fh: Any, name: str) -> Iterator[tuple[bytes, list[bytes]]]:
    """(block, its complete lines without their newlines) a block at a time, then (b"", [the partial last line]) when
    the file does not end with a newline. _TooLong when a line is longer than MAX_LINE_BYTES; SourceError when reading
    takes longer than FILE_SECONDS (as :func:`engine.sources.model.capped_lines`)."""
    started = time.monotonic()
    carry = b""
    while chunk := fh.read(BLOCK):
        if time.monotonic() - started > _model.FILE_SECONDS:
            raise SourceError(f"{name}: reading took more than {_model.FILE_SECONDS:.0f} s: stopped")
        data = carry + chunk if carry else chunk
        cut = data.rfind(b"\n") + 1
        carry = data[cut:]
        if len(carry) > _model.MAX_LINE_BYTES:
            raise _TooLong
        if cut:
            block = data[:cut]
            lines = block.split(b"\n")
            lines.pop()
            if cut > _model.MAX_LINE_BYTES and max(map(len, lines)) > _model.MAX_LINE_BYTES:
                raise _TooLong
            yield block, lines
    if carry:
        yield b"", [carry]


def _last_time(scan: Any, stamps: list[Any]) -> None:
    """``scan.last_ts`` as :func:`engine.sources.claude_code._scan_line` leaves it after the lines whose raw
    timestamps are ``stamps`` (the last one that is a time; ``iso`` raises nothing); ``stamps`` emptied."""
    for value in reversed(stamps):
        if ts := iso(value):
            scan.last_ts = ts
            break
    stamps.clear()


class _ProgressData(msgspec.Struct):
    """What the pass reads of a progress line's ``data`` (an object): whether it names a subagent."""

    agentId: Any = None  # (the record's own key)


class _ProgressLine(msgspec.Struct):
    """What :func:`_pass` reads of a ``progress`` line once ``ready`` (the module's doc), decoded by
    :func:`engine.store.fsutil.typed_json`: ``data``'s other fields (a hook's command, a shell's whole output: 30 % of
    a file's bytes) passed over, never made into objects. An absent field and a null both None, as ``dict.get``
    gives them; a ``data`` that is no object, a line msgspec does not read as the standard module: None from
    typed_json, and the line is decoded whole."""

    type: Any = None
    uuid: Any = None
    parentUuid: Any = None
    logicalParentUuid: Any = None
    timestamp: Any = None
    message: Any = None
    data: _ProgressData | None = None


_PROGRESS_LINE = msgspec.json.Decoder(_ProgressLine).decode
PROGRESS_TYPE = b'"type":"progress"'  # as Claude Code writes it (no space); a line written otherwise is decoded whole


def summary_and_session(path: Path, observe: Callable[[dict[str, Any]], None]
                        ) -> tuple[SourceEntry, SourceSession, bool] | None:
    """What :func:`engine.usage.rows.summary_and_rows_read` reads of a Claude Code file, read as the module's doc says:
    its Sources summary, its session (no tool call's arguments made) and whether its last line is complete;
    ``observe`` is handed each line's object whose ``message`` holds a ``usage`` (the one-hour cache pass: no other
    line teaches it anything). None when a line is longer than the reader holds (the caller reads the file as
    before)."""
    from engine.sources.claude_code import ClaudeCodeReader
    from engine.sources.session_summary import _ClaudeScan

    reader = ClaudeCodeReader(path, bulk=True, arguments=False)  # (no row reads a tool call's arguments)
    summary = _ClaudeScan()
    with open_regular(path) as fh:
        try:
            reader.scan.count = _pass(fh, path.name, reader.scan, summary, observe)
        except _TooLong:
            return None
        size = fh.seek(0, os.SEEK_END)
        complete = not size or (fh.seek(size - 1) >= 0 and fh.read(1) == b"\n")
    return summary.entry(path), reader.finish(), complete


def _objects(raw: bytes, whole: bool, n: int, skipped: list[Any]) -> list[dict[str, Any]]:
    """The object of a line :func:`fast_json` refuses, or of the torn last line (``whole`` False), as ``json_lines``
    gives it over the reader's lines: none when it is blank or cannot be read (said in ``skipped``)."""
    return [obj for _, obj in json_lines((raw + b"\n" if whole else raw,), skipped, start=n)]


def _pass(fh: Any, name: str, scan: Any, summary: Any, observe: Callable[[dict[str, Any]], None]) -> int:
    """The lines of the file ``fh`` taken by ``scan`` (the reader's), ``summary`` and ``observe`` as the module's doc
    says; the lines passed, blank ones included (as the reader counts them). Every JSON-object line is taken as
    ``json_lines`` over the reader's lines gives it (numbered from 1, blank lines passed over, the lines it cannot
    read said in ``scan.skipped``)."""
    from engine.sources.claude_code import _scan_line

    parents = scan.parents
    stamps: list[Any] = []  # the raw timestamps of the progress lines passed since scan.last_ts was last set
    held = ""  # scan.last_ts before the line after some progress lines
    ready = False  # the first time, cwd and session id known to the scan and the summary (the module's doc)
    at, at2 = -1, -1  # where the last two progress lines decoded whole had their type (the next ones have it there)
    n = 0
    for block, lines in _blocks(fh, name or "the file"):
        for raw in lines:
            n += 1
            if ready and (raw.startswith(PROGRESS_TYPE, at) or raw.startswith(PROGRESS_TYPE, at2)) and (
                    (p := typed_json(_PROGRESS_LINE, raw)) is not None and p.type == "progress"
                    and p.message is None and (p.data is None or p.data.agentId.__class__ is not str)):
                if (uid := p.uuid).__class__ is str:  # (a str subclass is never decoded)
                    parent = p.parentUuid or p.logicalParentUuid
                    parents[uid] = parent if isinstance(parent, str) else None
                stamps.append(p.timestamp)
                continue
            if block:  # (not the torn last line)
                done, obj = fast_json(raw)  # (a line it refuses, a blank one too, read by json_lines below, which
                found = [obj] if done and obj.__class__ is dict else _objects(raw, True, n, scan.skipped)
            else:  # passes over a blank line and says why it cannot read another)
                found = _objects(raw, False, n, scan.skipped)
            for obj in found:
                kind = obj.get("type")
                if kind == "progress" and ready:
                    data = obj.get("data")
                    if not isinstance(data, dict) or not isinstance(data.get("agentId"), str):
                        uid = obj.get("uuid")  # all _scan_line does with such a line once ``ready``
                        if isinstance(uid, str):
                            parent = obj.get("parentUuid") or obj.get("logicalParentUuid")
                            parents[uid] = parent if isinstance(parent, str) else None
                        stamps.append(obj.get("timestamp"))
                        if isinstance(msg := obj.get("message"), dict) and "usage" in msg:
                            observe(obj)
                        elif (i := raw.find(PROGRESS_TYPE)) >= 0 and i != at:
                            at, at2 = i, at
                        continue
                if stamps:  # this line's own time, if it has one, is the last: the stamps need no look then
                    held, scan.last_ts = scan.last_ts, ""
                if (kind == "assistant" or kind == "cost-state" or (kind == "user" and not summary.title)
                        or not summary.started or not summary.session_id):
                    summary.take(obj)  # (a line of no other kind teaches it anything: take's own conditions)
                if isinstance(msg := obj.get("message"), dict) and "usage" in msg:
                    observe(obj)
                try:
                    _scan_line(scan, n, obj)
                except LINE_ERRORS as exc:  # as the reader: this line skipped, said
                    scan.skipped.append(line_problem(n, exc))
                if stamps:
                    if scan.last_ts:
                        stamps.clear()
                    else:
                        scan.last_ts = held
                        _last_time(scan, stamps)
                ready = ready or bool(scan.first_ts and scan.cwd and scan.session_id and summary.started
                                      and summary.session_id)
    if stamps:
        _last_time(scan, stamps)
    return n
