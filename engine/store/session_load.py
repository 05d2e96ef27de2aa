"""Loading a session folder: read session.json and history.jsonl, repair crash damage, say what was done.

A torn last line (crash mid-write) is moved to ``history.jsonl.torn-<timestamp>``; lines that are not
valid messages (or repeat an id) to ``history.jsonl.invalid-<timestamp>``; a damaged session.json is
kept aside and its unusable fields reset. :class:`LoadReport` says what was found. Nothing is
silently dropped.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.model.events import Outcome
from engine.model.messages import HISTORY_ROLES, Message, MessageError, new_id, now_iso, validate_message
from engine.model.records import compaction_records
from engine.store.event_log import EVENTS_FILE, read_records
from engine.store.fsutil import atomic_write_bytes, atomic_write_json, dumps_line, json_loads

FORMAT = 1
SESSION_FILE = "session.json"
HISTORY_FILE = "history.jsonl"
ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


@dataclass
class LoadReport:
    """What :meth:`Session.load` found and repaired."""

    messages: int = 0
    torn_bytes: int = 0
    torn_path: Path | None = None
    invalid: list[str] = field(default_factory=list)  # one description per rejected line
    invalid_path: Path | None = None
    repaired: list[str] = field(default_factory=list)  # other repairs (meta, pending commit, newline)

    @property
    def clean(self) -> bool:
        return not (self.torn_bytes or self.invalid or self.repaired)

    def describe(self) -> str:
        parts = []
        if self.torn_bytes:
            parts.append(
                f"history.jsonl ended with a torn line ({self.torn_bytes} bytes, a write cut short); "
                f"moved to {self.torn_path.name if self.torn_path else '?'}"
            )
        if self.invalid:
            where = self.invalid_path.name if self.invalid_path else "?"
            listed = "; ".join(self.invalid[:5])
            parts.append(f"{len(self.invalid)} invalid line(s) moved to {where}: {listed}")
        parts.extend(self.repaired)
        return "\n".join(parts) if parts else f"{self.messages} messages, no damage"


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE_RE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    return value


def _line(msg: Message) -> bytes:
    """One history line; lone surrogates (from undecodable bytes) become U+FFFD, in place. Written by the standard
    module (``once``: :func:`engine.store.fsutil.dumps_line`): the message stays in memory (the session's, the
    reader's), and orjson would attach a UTF-8 copy to each of its non-ASCII strings (4.8 MB for a 30 MB Claude Code
    session, and as much again per 20 MB it grows); 2× orjson's time (41 against 19 ms for 3,444 messages)."""
    try:
        return dumps_line(msg, once=True)
    except UnicodeEncodeError:
        cleaned = _clean(msg)
        msg.clear()
        msg.update(cleaned)
        return dumps_line(msg, once=True)


def check_message(obj: Any, where: str) -> Message:
    """A message fit for the history: valid OpenAI format and a history role (user/assistant/tool)."""
    msg = validate_message(obj, where)
    if msg["role"] not in HISTORY_ROLES:
        raise MessageError(f"{where}: role {msg['role']!r} does not belong in the history")
    return msg


def load_meta(path: Path, report: LoadReport) -> dict[str, Any]:
    """session.json, rebuilt when missing or unreadable, with unusable fields reset (reported)."""
    meta_path = path / SESSION_FILE
    problem = ""
    meta: Any = None
    if meta_path.exists():
        try:
            meta = json_loads(meta_path.read_bytes())
        except (ValueError, OSError) as exc:
            problem = f"session.json could not be read ({exc})"
        if meta is not None and not isinstance(meta, dict):
            problem, meta = "session.json does not hold a JSON object", None
    else:
        problem = "session.json was missing"
    if meta is None:
        if meta_path.exists():
            aside = path / f"{SESSION_FILE}.corrupt-{_stamp()}"
            os.replace(meta_path, aside)
            problem += f"; moved to {aside.name}"
        meta = {"format": FORMAT, "id": path.name, "title": path.name, "created": now_iso()}
        summary = _last_summary(path / EVENTS_FILE)
        meta["summary"] = summary
        if summary:
            problem += "; summary recovered from events.jsonl"
        atomic_write_json(meta_path, meta)
        report.repaired.append(problem + "; rebuilt it")
    meta.setdefault("id", path.name)
    meta.setdefault("title", meta["id"])
    meta.setdefault("summary", "")
    meta.setdefault("undo", [])
    meta.setdefault("pending", None)
    bad = _bad_meta_fields(meta)
    if bad:  # keep the file as it was, then reset the fields the app cannot use
        aside = path / f"{SESSION_FILE}.corrupt-{_stamp()}"
        atomic_write_bytes(aside, meta_path.read_bytes())
        defaults: dict[str, Any] = {"id": path.name, "title": path.name, "summary": "", "undo": [], "pending": None,
                    "calibrator": None, "system_prompt": "", "tools": None}
        for key in bad:
            meta[key] = defaults[key]
        atomic_write_json(meta_path, meta)
        report.repaired.append(
            f"session.json: {', '.join(f'{k!r} {why}' for k, why in bad.items())}; reset "
            f"(the original file is kept as {aside.name})"
        )
    loaded: dict[str, Any] = meta
    return loaded


def load_history(path: Path, report: LoadReport) -> list[Message]:
    """history.jsonl's messages; torn and invalid lines moved aside (reported)."""
    hist = path / HISTORY_FILE
    if not hist.exists():
        return []
    data = hist.read_bytes()
    raw_lines = data.split(b"\n")
    tail = raw_lines.pop()  # bytes after the last newline: b"" when the file ends cleanly
    messages: list[Message] = []
    good: list[bytes] = []
    bad: list[bytes] = []
    seen: set[str] = set()
    rewrite = False
    reserialised: list[int] = []

    def take(raw: bytes, n: int) -> bool:
        try:
            obj = json_loads(raw)
            msg = check_message(obj, f"line {n}")
        except (ValueError, MessageError) as exc:
            why = str(exc) if isinstance(exc, MessageError) else f"line {n}: not JSON ({exc})"
            report.invalid.append(why)
            return False
        mid = msg.get("id")
        if not isinstance(mid, str) or not mid:
            msg["id"] = new_id()
            msg.setdefault("ts", now_iso())
            report.repaired.append(f"line {n}: message had no id; gave it {msg['id']}")
            reserialised.append(n)
            good.append(_line(msg))
            messages.append(msg)
            return True
        if mid in seen:
            report.invalid.append(f"line {n}: repeats message id {mid}")
            return False
        seen.add(mid)
        messages.append(msg)
        good.append(raw + b"\n")
        return True

    for n, raw in enumerate(raw_lines, start=1):
        if not raw.strip():
            rewrite = True
            continue
        if not take(raw, n):
            bad.append(raw + b"\n")
            rewrite = True
    if tail.strip():
        n = len(raw_lines) + 1
        try:
            complete = isinstance(json_loads(tail), dict)
        except ValueError:
            complete = False
        if complete and take(tail, n):
            report.repaired.append(f"line {n} was complete but had no final newline; kept it")
        else:
            if complete:  # a complete line that is not a valid message: report as invalid
                bad.append(tail + b"\n")
            else:
                report.torn_bytes = len(tail)
                report.torn_path = path / f"{HISTORY_FILE}.torn-{_stamp()}"
                atomic_write_bytes(report.torn_path, tail)
        rewrite = True
    if bad:
        report.invalid_path = path / f"{HISTORY_FILE}.invalid-{_stamp()}"
        atomic_write_bytes(report.invalid_path, b"".join(bad))
    if rewrite or reserialised:
        atomic_write_bytes(hist, b"".join(good))
    return messages


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _bad_meta_fields(meta: dict[str, Any]) -> dict[str, str]:
    """Fields of session.json whose type the app cannot use: {field: what is wrong}."""
    bad: dict[str, str] = {}

    def strs(value: Any) -> bool:
        return isinstance(value, list) and all(isinstance(i, str) for i in value)

    def ids(value: Any) -> bool:
        return strs(value) and all(ID_RE.match(i) for i in value)

    for key in ("id", "title"):
        if not isinstance(meta.get(key), str) or not meta[key]:
            bad[key] = "is not a non-empty string"
    for key in ("summary", "system_prompt"):
        if key in meta and meta[key] is not None and not isinstance(meta[key], str):
            bad[key] = f"is a {type(meta[key]).__name__}, not a string"
    if not ids(meta.get("undo")):
        bad["undo"] = "is not a list of undo ids"
    pending = meta.get("pending")
    if pending is not None and not (
        isinstance(pending, dict)
        and all(strs(pending.get(k) or []) for k in ("absent", "present"))
        and isinstance(pending.get("summary", ""), str)
        and all(v is None or (isinstance(v, str) and ID_RE.match(v))
                for v in (pending.get("undo_push"), pending.get("undo_pop")))
    ):
        bad["pending"] = "is not a valid pending-commit record"
    cal = meta.get("calibrator")
    if cal is not None and not (
        isinstance(cal, dict)
        and all(cal.get(k) is None or _is_int(cal[k]) for k in ("last_raw", "last_actual"))
        and isinstance(cal.get("last_prefix") or [], list | tuple)
        and all(isinstance(i, str) for i in cal.get("last_prefix") or [])
        and (cal.get("last_fixed") is None or (
            isinstance(cal["last_fixed"], list | tuple) and len(cal["last_fixed"]) == 3
            and all(_is_int(v) for v in cal["last_fixed"])))
    ):
        bad["calibrator"] = "is not a valid calibration record"
    tools = meta.get("tools")
    if tools is not None and not (isinstance(tools, list) and all(isinstance(t, dict) for t in tools)):
        bad["tools"] = "is not a list of tool definitions"
    return bad


def _last_summary(events: Path) -> str:
    summary = ""
    for rec in compaction_records(read_records(events)):
        if rec.result in (Outcome.SUMMARIZED, Outcome.DROPPED, Outcome.UNDONE):
            summary = rec.summary
    return summary


_READ_ID = re.compile(rb'"id":\s*"([0-9a-f]{24})[0-9a-f]{8}"')
_REPREFIXED = (SESSION_FILE, HISTORY_FILE, EVENTS_FILE)


def reprefix_ids(folder: Path, prefix: str) -> None:
    """Give the messages of a session folder just written by an import (a read-only view's) ids under ``prefix``:
    a reader makes each read's ids of a random 24-hex prefix and a counter (:class:`engine.sources.model.IdMaker`),
    and a view read again keeps its messages' ids when the prefix is the view's own. Every file of the folder that
    holds them (session.json, history, events, the archive's days) is replaced whole, atomically (not fsync'd: a
    view folder is made again from its source when it is lost)."""
    files = [folder / name for name in _REPREFIXED] + sorted((folder / "dialog").glob("*.jsonl"))
    found: bytes | None = None
    for f in files[1:2] + files[3:]:  # the history and the archive hold the messages
        try:
            m = _READ_ID.search(f.read_bytes())
        except OSError:
            continue
        if m:
            found = m.group(1)
            break
    if found is None or found == prefix.encode():
        return
    for f in files:
        try:
            data = f.read_bytes()
        except OSError:
            continue
        if found in data:
            atomic_write_bytes(f, data.replace(found, prefix.encode()), durable=False)

