"""The dialog archive: ``dialog/YYYY-MM-DD.jsonl`` in the session folder (SPEC §4 "Archive before drop").

Messages that leave the context are appended here first, grouped by each message's own date
(:func:`engine.model.messages.message_date`), one JSON object per line, fsync'd. The archive is
append-only: restoring a message copies it back into the history and the archive keeps its copy.

Appends skip messages whose id is already in the target day file, so a compaction retried after a
crash (archive written, history not yet rewritten) never stores a message twice.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from engine.model.messages import Message, MessageError, call_ids, content_text, message_date, validate_message
from engine.store import textsearch
from engine.store.fsutil import append_lines, json_loads, read_jsonl_objects

DIALOG_DIR = "dialog"
_DAY_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class ArchiveError(ValueError):
    """Bad archive request (unknown day, bad regular expression); the text says what."""


@dataclass(frozen=True)
class ArchiveHit:
    day: str
    line: int  # 1-based line in the day file
    message_id: str
    role: str
    ts: str
    snippet: str  # the matching text with some context
    message: Message


def dialog_dir(session_dir: Path) -> Path:
    return Path(session_dir) / DIALOG_DIR


def day_path(session_dir: Path, day: str) -> Path:
    if not isinstance(day, str) or not _DAY_RE.match(day):
        raise ArchiveError(f"not an archive day: {day!r} (expected YYYY-MM-DD)")
    return dialog_dir(session_dir) / f"{day}.jsonl"


def _record(msg: Message) -> Message:
    """The archived form: the whole stored message (id, role, content, tool fields, ts, metadata)."""
    return dict(msg)


def _ids_in(path: Path) -> set[str]:
    ids: set[str] = set()
    if not path.exists():
        return ids
    for raw in path.read_bytes().splitlines():
        try:
            obj = json_loads(raw)
        except ValueError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("id"), str):
            ids.add(obj["id"])
    return ids


def append(session_dir: Path, messages: Iterable[Message], *, dedupe: bool = True) -> list[str]:
    """Append ``messages`` to their day files (fsync'd); return the days written, ascending.

    With ``dedupe`` (the default) a message whose id already sits in its day file is not written
    again.
    """
    groups: dict[str, list[Message]] = {}
    for msg in messages:
        groups.setdefault(message_date(msg).isoformat(), []).append(msg)
    written: list[str] = []
    for day in sorted(groups):
        path = day_path(session_dir, day)
        batch = groups[day]
        if dedupe:
            present = _ids_in(path)
            batch = [m for m in batch if not (isinstance(m.get("id"), str) and m["id"] in present)]
        if batch:
            append_lines(path, [_record(m) for m in batch], once=True)  # (the messages stay in memory: the reader's)
            written.append(day)
    return written


def list_days(session_dir: Path) -> list[str]:
    """Days that have an archive file, ascending."""
    folder = dialog_dir(session_dir)
    if not folder.is_dir():
        return []
    return sorted(p.stem for p in folder.glob("*.jsonl") if _DAY_RE.match(p.stem))


def read_day(session_dir: Path, day: str, problems: list[str] | None = None) -> list[Message]:
    """The messages archived on ``day``, in the order they were written.

    A line that is not a JSON object (a torn last line after a crash), or not a valid message (a
    damaged file), is skipped and described in ``problems`` when a list is given.
    """
    path = day_path(session_dir, day)
    if not path.exists():
        raise ArchiveError(f"no archive for {day}")
    out: list[Message] = []
    for obj in read_jsonl_objects(path, problems):
        if "role" not in obj:
            if problems is not None:
                problems.append(f"{path.name}: a line without a role is not a message")
            continue
        try:
            validate_message(obj, f"{path.name}: message {obj.get('id')!r}")
        except MessageError as exc:
            if problems is not None:
                problems.append(str(exc))
            continue
        out.append(obj)
    return out


def _searchable(msg: Message) -> str:
    parts = [content_text(msg.get("content"))]
    if msg.get("reasoning_content"):
        parts.append(str(msg["reasoning_content"]))
    for call in msg.get("tool_calls") or ():
        if isinstance(call, dict):
            fn = call.get("function") or {}
            parts.append(f"{fn.get('name', '')}({fn.get('arguments', '')})")
    return "\n".join(p for p in parts if p)


def _snippet(text: str, start: int, end: int, width: int = 60) -> str:
    a, b = max(0, start - width), min(len(text), end + width)
    s = " ".join(text[a:b].split())
    return ("…" if a > 0 else "") + s + ("…" if b < len(text) else "")


def search(
    session_dir: Path,
    query: str,
    *,
    regex: bool = False,
    case_sensitive: bool = False,
    limit: int = 200,
    days: Sequence[str] | None = None,
) -> list[ArchiveHit]:
    """Full-text search over the archive (content, reasoning, tool calls); newest first.

    ``query`` is a plain substring unless ``regex`` is true. Raises :class:`ArchiveError` for an
    empty query or a bad regular expression.
    """
    if not query:
        raise ArchiveError("search: the query is empty")
    try:
        pattern = textsearch.compile_pattern(query, ignore_case=not case_sensitive, literal=not regex)
    except textsearch.PatternError as exc:
        raise ArchiveError(f"search: {exc}") from exc
    hits: list[ArchiveHit] = []
    for day in sorted(days if days is not None else list_days(session_dir), reverse=True):
        path = day_path(session_dir, day)
        if not path.exists():
            continue
        lines = path.read_bytes().splitlines()
        for n in range(len(lines), 0, -1):
            try:
                msg = json_loads(lines[n - 1])
            except ValueError:
                continue
            try:
                validate_message(msg)
            except MessageError:
                continue  # not a message (read_day describes it)
            text = _searchable(msg)
            try:
                m = textsearch.search(pattern, text)
            except textsearch.PatternError as exc:
                raise ArchiveError(f"search: {exc}") from exc
            if m is None:
                continue
            hits.append(
                ArchiveHit(
                    day=day,
                    line=n,
                    message_id=str(msg.get("id") or ""),
                    role=str(msg.get("role") or ""),
                    ts=str(msg.get("ts") or ""),
                    snippet=_snippet(text, m.start(), m.end()),
                    message=msg,
                )
            )
            if len(hits) >= limit:
                return hits
    return hits


def find(session_dir: Path, ids: Iterable[str]) -> list[Message]:
    """Archived messages with these ids, in archive order (the latest copy when one was archived twice)."""
    wanted = set(ids)
    found: dict[str, Message] = {}
    order: list[str] = []
    for day in list_days(session_dir):
        for msg in read_day(session_dir, day):
            mid = msg.get("id")
            if mid in wanted:
                if mid not in found:
                    order.append(mid)
                found[mid] = msg
    return [found[i] for i in order]


def restore_selection(session_dir: Path, ids: Iterable[str]) -> list[Message]:
    """The archived messages to bring back for ``ids``, with their tool-call partners, in archive order.

    Choosing an assistant message that makes tool calls brings its results; choosing a tool result
    brings the call that made it and that call's other results. Unknown ids raise ArchiveError.
    """
    wanted = list(dict.fromkeys(ids))
    everything: list[Message] = []
    seen: dict[str, int] = {}
    for day in list_days(session_dir):
        for msg in read_day(session_dir, day):
            mid = msg.get("id")
            if isinstance(mid, str) and mid in seen:
                everything[seen[mid]] = msg  # keep the latest copy, at the first position
                continue
            if isinstance(mid, str):
                seen[mid] = len(everything)
            everything.append(msg)
    missing = [i for i in wanted if i not in seen]
    if missing:
        raise ArchiveError(f"not in the archive: {', '.join(missing[:5])}{' …' if len(missing) > 5 else ''}")
    call_owner: dict[str, int] = {}
    results: dict[str, list[int]] = {}
    for k, msg in enumerate(everything):
        if msg.get("role") == "assistant":
            for cid in call_ids(msg):
                call_owner.setdefault(cid, k)
        elif msg.get("role") == "tool":
            results.setdefault(str(msg.get("tool_call_id") or ""), []).append(k)
    chosen: set[int] = set()
    todo = [seen[i] for i in wanted]
    while todo:
        k = todo.pop()
        if k in chosen:
            continue
        chosen.add(k)
        msg = everything[k]
        if msg.get("role") == "assistant":
            for cid in call_ids(msg):
                todo.extend(results.get(cid, ()))
        elif msg.get("role") == "tool":
            owner = call_owner.get(str(msg.get("tool_call_id") or ""))
            if owner is not None:
                todo.append(owner)
    return [everything[k] for k in sorted(chosen)]


def _second(msg: Message) -> str:
    """A message's time to the second (``YYYY-MM-DDTHH:MM:SS``): messages of one second keep the order they were
    written in (an agent writes a prompt and what it attaches to it, or a call and its result, within one)."""
    return str(msg.get("ts") or "")[:19]


def merge_archived(live: list[Message], archived: list[Message]) -> list[Message]:
    """The live history with archived messages (not live any more) put back in time order: to the second, the
    archive's own order kept within one second; messages an agent restated after a compaction (``preserved``,
    with their first time) come after every archived message up to the next live one."""
    live_ids = {str(m.get("id")) for m in live}
    extra: list[Message] = []
    seen: set[str] = set()
    for msg in archived:
        mid = str(msg.get("id") or "")
        if not mid or mid in live_ids or mid in seen or msg.get("role") not in ("user", "assistant", "tool"):
            continue
        seen.add(mid)
        extra.append(msg)
    if not extra:
        return list(live)
    extra.sort(key=_second)  # stable: one second's messages in the archive's order
    # the time each live message is placed at: a restated one's is the next live message's that is not restated
    at = [""] * len(live)
    following = "\uffff"  # after every time
    for k in range(len(live) - 1, -1, -1):
        own = _second(live[k])
        at[k] = following if live[k].get("preserved") else own
        if not live[k].get("preserved") and own:
            following = own
    out: list[Message] = []
    i = 0
    for msg, ts in zip(live, at, strict=True):
        while i < len(extra) and ts and _second(extra[i]) <= ts:
            out.append(extra[i])
            i += 1
        out.append(msg)
    out.extend(extra[i:])
    return out
