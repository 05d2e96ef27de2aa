"""Gemini CLI sessions: ``~/.gemini/tmp/<project>/chats/session-<time>-<id>.jsonl`` (Gemini CLI 0.4x and later;
pinned and checked against 0.61.0).

Gemini CLI's ``ChatRecordingService`` appends one JSON object a line:

- a *header* ``{sessionId, projectHash, startTime, lastUpdated, kind}`` (no ``id``): the first line, and again
  each time the session is resumed (``--resume``), which appends to the same file;
- a *message record* ``{id, timestamp, type, content, …}``: ``type`` ``user`` (its ``content`` parts: text, or
  the ``functionResponse`` parts of tool results, which become tool messages) or ``gemini`` (one model
  response: text ``content``, ``toolCalls`` ``[{id, name, args, result, status, …}]``, ``thoughts`` (thought
  summaries), ``model`` and ``tokens`` ``{input, output, cached, thoughts, tool, total}``: the response's
  ``usageMetadata``). A record is written again, whole, each time it grows (its tokens arrive, its tool calls
  are added): the same ``id`` replaces the earlier state. ``info`` / ``error`` / ``warning`` records are the
  terminal's notices (:data:`IGNORED_MESSAGES`);
- ``{"$set": {…}}``: a patch of the conversation record. ``$set.messages`` replaces the whole message list
  (the conversation as the model will next see it): written at the start (the ``<session_context>`` user
  message, which has no record of its own), when a resume restates the history (with the tool results twice,
  as Gemini CLI 0.61 then sends them), when a turn is rolled back, and by a *chat compression*: a shorter list
  whose head is new (a ``<state_snapshot>`` summary as a user message and the model's acknowledgement) —
  read as a :class:`Compaction`. The other keys are metadata (:data:`READ_SET_KEYS`, :data:`IGNORED_SET_KEYS`);
- ``{"$rewindTo": id}``: the interactive ``/rewind``: the conversation from that message on is dropped.

Usage: one provider call per ``gemini`` record with ``tokens``. ``input`` is ``promptTokenCount`` (the whole
prompt, the cached part included), ``cached`` is ``cachedContentTokenCount`` (the cache read); the Gemini API has
no cache-write figure (None). The compression's own summarisation requests are not recorded (no cost).
The system instruction and tool definitions are not in the file: their size is inferred by the importer.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.model.messages import Message
from engine.sources.model import (
    LINE_ERRORS,
    Compaction,
    LineBuffer,
    ProviderCall,
    Skipped,
    SourceChanges,
    SourceSession,
    dict_at,
    feed_whole,
    int_or_none,
    iso,
    json_args,
    json_lines,
    line_problem,
)

READ_MESSAGES = frozenset({"user", "gemini"})
_NOTICE = "a notice the terminal showed the user (Gemini CLI's info, error and warning records); not sent to the model"
# Message record types left out on purpose, and why (counted as ``message/<type>``).
IGNORED_MESSAGES: dict[str, str] = {"info": _NOTICE, "error": _NOTICE, "warning": _NOTICE}
KNOWN_MESSAGES = READ_MESSAGES | frozenset(IGNORED_MESSAGES)

READ_SET_KEYS = frozenset({"messages", "lastUpdated", "sessionId", "startTime", "projectHash", "kind"})
# ``$set`` keys left out on purpose, and why (counted as ``$set/<key>``).
IGNORED_SET_KEYS: dict[str, str] = {
    "summary": "a one-line title of the session for the resume list; not sent to the model",
    "memoryScratchpad": "workflow notes kept for memory extraction; not sent to the model",
    "directories": "workspace folders added with /dir add; the model is told of them in its messages",
}
KNOWN_SET_KEYS = READ_SET_KEYS | frozenset(IGNORED_SET_KEYS)

# Record kinds: the header, message records, patches and rewinds (for the tests' "every type known").
RECORD_KINDS = ("header", "message", "$set", "$rewindTo")

# The models' windows as Gemini CLI 0.61's ``tokenLimit`` gives them (1,048,576 for every Gemini model,
# 256,000 for the Gemma 4 models it routes to).
GEMINI_WINDOW = 1_048_576
GEMMA_WINDOW = 256_000
SNAPSHOT_MARK = "<state_snapshot>"
_WORKSPACE_RE = re.compile(r"\*\*Workspace Directories:\*\*\n\s*- ([^\n]+)")


def window_for_model(model: str) -> int | None:
    """The model's window as Gemini CLI counts it; None for a model it does not know."""
    name = model.lower().removeprefix("models/")
    if name.startswith("gemma-4"):
        return GEMMA_WINDOW
    if name.startswith("gemini-"):
        return GEMINI_WINDOW
    return None


def record_kind(obj: dict[str, Any]) -> str:
    """Which of :data:`RECORD_KINDS` a line is ("" when none)."""
    if isinstance(obj.get("$set"), dict):
        return "$set"
    if isinstance(obj.get("$rewindTo"), str):
        return "$rewindTo"
    if isinstance(obj.get("id"), str):
        return "message"
    if isinstance(obj.get("sessionId"), str) and isinstance(obj.get("projectHash"), str):
        return "header"
    return ""


# --------------------------------------------------------------------------- records to messages


def _parts(content: Any) -> list[Any]:
    if isinstance(content, list):
        return content
    return [] if content is None or content == "" else [content]


def _response_text(response: Any) -> str:
    """A ``functionResponse.response`` as the text the model read: its ``output`` (or ``error``), else JSON."""
    if isinstance(response, dict):
        for key in ("output", "error", "content"):
            if isinstance(response.get(key), str) and len(response) == 1:
                return str(response[key])
        if isinstance(response.get("output"), str) and set(response) <= {"output", "error"}:
            return "\n".join(str(response[k]) for k in ("output", "error") if response.get(k))
    return response if isinstance(response, str) else json.dumps(response, ensure_ascii=False)


def _part_text(part: Any) -> str:
    """The text of a part that is no function call or response ("" for those)."""
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return ""
    if isinstance(part.get("text"), str):
        return str(part["text"])
    for key in ("inlineData", "fileData"):
        data = dict_at(part, key)
        if data:
            return f"[{key}: {data.get('mimeType') or ''} {data.get('fileUri') or ''}]".replace(" ]", "]")
    for key in ("executableCode", "codeExecutionResult"):
        if isinstance(part.get(key), dict):
            return f"[{key}] {json.dumps(part[key], ensure_ascii=False)}"
    return ""


def _thoughts_text(rec: dict[str, Any]) -> str:
    out = []
    thoughts = rec.get("thoughts")
    for t in thoughts if isinstance(thoughts, list) else []:
        if isinstance(t, dict):
            subject, description = str(t.get("subject") or ""), str(t.get("description") or "")
            out.append(f"{subject}: {description}" if subject and description else subject or description)
    return "\n".join(o for o in out if o)


def _user_messages(rec: dict[str, Any], ts: str) -> list[Message]:
    texts: list[str] = []
    tools: list[Message] = []
    for part in _parts(rec.get("content")):
        response = dict_at(part, "functionResponse")
        if response:
            tools.append({"role": "tool", "tool_call_id": str(response.get("id") or ""),
                          "content": _response_text(response.get("response")), "ts": ts})
        else:
            text = _part_text(part)
            if text:
                texts.append(text)
    if texts or not tools:
        tools.append({"role": "user", "content": "\n".join(texts), "ts": ts})
    return tools


def _tool_call(call: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI tool call from a ``functionCall`` part or a ``toolCalls`` entry (``id``, ``name``, ``args``)."""
    return {"id": str(call.get("id") or ""), "type": "function",
            "function": {"name": str(call.get("name") or ""), "arguments": json_args(call.get("args") or {})}}


def _gemini_message(rec: dict[str, Any], ts: str) -> Message:
    texts, thought_texts, calls = [], [], []
    for part in _parts(rec.get("content")):
        call = dict_at(part, "functionCall")
        if call:
            calls.append(_tool_call(call))
        elif isinstance(part, dict) and part.get("thought") is True:
            thought_texts.append(_part_text(part))
        elif text := _part_text(part):
            texts.append(text)
    records = rec.get("toolCalls")
    if isinstance(records, list) and records:  # the record's own list (the content holds only the text)
        calls = [_tool_call(c) for c in records if isinstance(c, dict)]
    msg: Message = {"role": "assistant", "content": "".join(texts), "ts": ts}
    if calls:
        msg["tool_calls"] = calls
    reasoning = "\n".join(t for t in [_thoughts_text(rec), *thought_texts] if t)
    if reasoning:
        msg["reasoning_content"] = reasoning
    return msg


def _convert(rec: dict[str, Any]) -> list[Message]:
    ts = iso(rec.get("timestamp"))
    kind = rec.get("type")
    if kind == "user":
        return _user_messages(rec, ts)
    if kind == "gemini":
        return [_gemini_message(rec, ts)]
    return []


def _sig(msg: Message) -> tuple[Any, ...]:
    """What two copies of a message share whatever record they came from (a record line or a ``$set`` list)."""
    calls = tuple((c["id"], c["function"]["name"]) for c in msg.get("tool_calls") or [])
    return msg["role"], msg.get("content"), msg.get("tool_call_id"), calls


# --------------------------------------------------------------------------- the reader


@dataclass
class _Pending:
    """Where the feed changed things (the earliest index touched; -1 when nothing)."""

    messages: int = -1
    compactions: int = -1

    def touch_message(self, index: int) -> None:
        self.messages = index if self.messages < 0 else min(self.messages, index)

    def touch_compaction(self, index: int) -> None:
        self.compactions = index if self.compactions < 0 else min(self.compactions, index)


class GeminiCliReader:
    """The incremental reader of one Gemini CLI session file: bytes (or complete lines) in, changes out.

    ``feed`` takes what was appended (a partial last line waits for the rest) and returns a
    :class:`SourceChanges`. A record seen again (same ``id``) replaces its earlier messages; a ``$set`` of the
    message list is compared with the live conversation (the messages since the last compaction): what it
    adds is appended, what it changes or drops is replaced from the first difference on, and a list with a new
    head (the chat compression) is a compaction whose replacement is appended whole."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        stem = self.path.stem.removeprefix("session-")
        self.session = SourceSession("gemini-cli", self.path, stem,
                                     project=self.path.parent.parent.name if self.path.parent.name == "chats" else "",
                                     prefix_label="system prompt and tool definitions")
        self._buffer = LineBuffer()
        self._n = 0
        self._gid: list[str] = []  # the Gemini record id of each message (parallel to session.messages)
        # record id -> the positions of its messages in _gid, ascending (None: to be made again from _gid, after
        # messages were cut or shifted): a record is found without scanning the conversation
        self._where: dict[str, list[int]] | None = {}
        self._seen: set[str] = set()  # record ids seen (records and $set lists)
        self._call_gid: list[str] = []  # the record id of each call (parallel to session.calls)
        self._call_by_gid: dict[str, int] = {}  # record id -> index in session.calls
        self._headers = 0
        self._reindex = False
        self._orphans: set[int] = set()  # calls whose response is not in the messages (rolled back, for now)
        self._touched = _Pending()
        self._updated: set[int] = set()

    # ------------------------------------------------------------------ input
    def feed(self, data: bytes) -> SourceChanges:
        """Take appended bytes; a partial last line is kept until its newline arrives."""
        return self.feed_lines(self._buffer.lines(data))

    def feed_lines(self, lines: Iterable[bytes]) -> SourceChanges:
        """Take complete lines (each ending with its newline; a last one without it is read as torn)."""
        session = self.session
        mark = (len(session.messages), len(session.calls), len(session.compactions))
        self._touched, self._updated = _Pending(), set()
        for n, obj in json_lines(lines, session.skipped, start=self._n + 1):
            self._n = n
            session.lines = n
            try:
                self._line(n, obj)
            except LINE_ERRORS as exc:  # a field of a shape never seen: this line skipped, said
                session.skipped.append(line_problem(n, exc))
        if self._reindex or self._orphans:
            self._fix_call_indices()
        self._derive()
        touched = self._touched
        return SourceChanges(
            messages_from=min(mark[0], touched.messages) if touched.messages >= 0 else mark[0],
            calls_from=mark[1], calls_updated=sorted(i for i in self._updated if i < mark[1]),
            compactions_from=min(mark[2], touched.compactions) if touched.compactions >= 0 else mark[2],
            subagents_from=len(session.subagents))

    def finish(self) -> SourceSession:
        """The whole session: a last line without its newline read as it is (or reported torn)."""
        if pending := self._buffer.rest():
            self.feed_lines([pending])
        return self.session

    # ------------------------------------------------------------------ lines
    def _line(self, n: int, obj: dict[str, Any]) -> None:
        session = self.session
        kind = record_kind(obj)
        if kind == "message":
            rtype = obj.get("type")
            if not isinstance(rtype, str):  # ``"type": []`` and the like: no record type (never hashed)
                session.skipped.append(Skipped(n, f"message type {rtype!r} is not one this reader knows"))
            elif rtype in READ_MESSAGES:
                self._record(obj)
            elif rtype in IGNORED_MESSAGES:
                session.ignore(f"message/{rtype}")
            else:
                session.skipped.append(Skipped(n, f"message type {rtype!r} is not one this reader knows"))
            ts = iso(obj.get("timestamp"))
            if ts:
                session.started = session.started or ts
                session.last_activity = max(session.last_activity, ts)
        elif kind == "$set":
            self._set(n, obj["$set"])
        elif kind == "header":
            self._header(obj)
        elif kind == "$rewindTo":
            self._rewind(str(obj["$rewindTo"]))
        else:
            session.skipped.append(Skipped(n, "a line of no record type Gemini CLI writes (header, message, "
                                              "$set, $rewindTo)"))

    def _header(self, obj: dict[str, Any]) -> None:
        session = self.session
        self._headers += 1
        if self._headers == 1:
            session.session_id = str(obj.get("sessionId") or session.session_id)
            session.started = iso(obj.get("startTime")) or session.started
        else:
            session.notes.append(f"resumed at {iso(obj.get('startTime')) or 'an unknown time'}")
        if obj.get("kind") == "subagent" and "a subagent's session" not in session.notes:
            session.notes.append("a subagent's session")
        ts = iso(obj.get("lastUpdated"))
        if ts:
            session.last_activity = max(session.last_activity, ts)

    def _set(self, n: int, patch: dict[str, Any]) -> None:
        session = self.session
        for key, value in patch.items():
            if key == "messages":
                if isinstance(value, list):
                    self._set_messages([m for m in value if isinstance(m, dict) and isinstance(m.get("id"), str)])
                else:
                    session.skipped.append(Skipped(n, "$set.messages is not a list"))
            elif key == "lastUpdated":
                ts = iso(value)
                if ts:
                    session.last_activity = max(session.last_activity, ts)
            elif key == "sessionId":
                session.session_id = str(value or session.session_id)
            elif key in READ_SET_KEYS:
                pass  # startTime, projectHash, kind: the header's, restated
            elif key in IGNORED_SET_KEYS:
                session.ignore(f"$set/{key}")
            else:
                session.skipped.append(Skipped(n, f"$set key {key!r} is not one this reader knows"))

    # ------------------------------------------------------------------ messages
    def _positions(self, gid: str, live: int) -> list[int]:
        """The positions of record ``gid``'s messages from ``live`` on, ascending."""
        if self._where is None:
            self._where = {}
            for i, g in enumerate(self._gid):
                self._where.setdefault(g, []).append(i)
        where = self._where.get(gid)
        if not where:
            return []
        if where[0] >= live:
            return where
        return where[bisect_left(where, live):]

    def _add(self, gid: str, msgs: list[Message]) -> None:
        session = self.session
        for msg in msgs:
            msg["id"] = session.make_id()
            msg.setdefault("ts", "")
            session.messages.append(msg)
            if self._where is not None:
                self._where.setdefault(gid, []).append(len(self._gid))
            self._gid.append(gid)
            if not session.cwd and msg["role"] == "user" and (m := _WORKSPACE_RE.search(str(msg.get("content")))):
                session.cwd = m.group(1).strip()

    def _truncate(self, at: int) -> None:
        session = self.session
        if at < len(session.messages):
            del session.messages[at:]
            del self._gid[at:]
            self._where = None
            self._touched.touch_message(at)
            self._reindex = True

    def _record(self, rec: dict[str, Any]) -> None:
        """A message record: new, or a record seen before that grew (it replaces its earlier messages)."""
        session = self.session
        gid = str(rec["id"])
        msgs = _convert(rec)
        self._seen.add(gid)
        live = session.live_start
        where = self._positions(gid, live)
        if where and where == list(range(where[0], where[-1] + 1)):
            start, end = where[0], where[-1] + 1
            old = session.messages[start:end]
            for msg, prev in zip(msgs, old, strict=False):
                msg["id"] = prev["id"]  # the same message, grown: it keeps its id
            for msg in msgs[len(old):]:
                msg["id"] = session.make_id()
            if msgs != old:
                session.messages[start:end] = msgs
                self._gid[start:end] = [gid] * len(msgs)
                if len(msgs) != len(old):
                    self._where = None  # the messages after it moved
                self._touched.touch_message(start)
                self._reindex = self._reindex or len(msgs) != len(old)
        else:
            self._touched.touch_message(len(session.messages))
            self._add(gid, msgs)
        if rec.get("type") == "gemini":
            self._usage(gid, rec)

    def _usage(self, gid: str, rec: dict[str, Any]) -> None:
        tokens = rec.get("tokens")
        if not isinstance(tokens, dict):
            return
        session = self.session
        model = str(rec.get("model") or "")
        where = self._positions(gid, session.live_start)
        first = where[0] if where else len(session.messages)
        call = ProviderCall(
            index=len(session.calls), prompt_tokens=int_or_none(tokens.get("input")),
            completion_tokens=int_or_none(tokens.get("output")), cache_read_tokens=int_or_none(tokens.get("cached")),
            cache_write_tokens=None, model=model, ts=iso(rec.get("timestamp")), window=window_for_model(model),
            message_index=first, reasoning_tokens=int_or_none(tokens.get("thoughts")))
        known = self._call_by_gid.get(gid)
        if known is None:
            self._call_by_gid[gid] = call.index
            self._call_gid.append(gid)
            session.calls.append(call)
            for comp in session.compactions:
                if comp.tokens_after is None and comp.calls_before == call.index:
                    comp.tokens_after = call.prompt_tokens
                    self._touched.touch_compaction(comp.index)
            return
        old = session.calls[known]
        call.index, call.message_index = old.index, old.message_index
        if call != old:
            session.calls[known] = call
            self._updated.add(known)

    def _set_messages(self, records: list[dict[str, Any]]) -> None:
        """``$set.messages``: the conversation is now ``records``."""
        session = self.session
        flat: list[tuple[str, Message]] = [(str(r["id"]), m) for r in records for m in _convert(r)]
        live = session.live_start
        old = session.messages[live:]
        p = 0
        while p < len(old) and p < len(flat) and _sig(old[p]) == _sig(flat[p][1]):
            p += 1
        ids = {str(r["id"]) for r in records}
        new_ids = ids - self._seen
        dropped = {g for g in self._gid[live:] if g not in ids}
        self._seen |= ids
        if p == len(old):  # the same conversation, maybe longer
            self._append(flat[p:])
        elif new_ids and dropped and any(g in new_ids for g, _ in flat[p:]):
            self._compaction(records, flat, new_ids)
        else:  # restated with differences (a resume, a rollback, tool outputs masked): replaced from there
            self._truncate(live + p)
            self._append(flat[p:])

    def _append(self, items: list[tuple[str, Message]]) -> None:
        if items:
            self._touched.touch_message(len(self.session.messages))
        for gid, msg in items:
            self._add(gid, [msg])

    def _compaction(self, records: list[dict[str, Any]], flat: list[tuple[str, Message]], new_ids: set[str]) -> None:
        session = self.session
        before = session.messages[-1] if len(session.messages) > session.live_start else None
        mid_turn = before is not None and (before["role"] == "tool" or bool(before.get("tool_calls")))
        summary = next((m.get("content") or "" for g, m in flat if g in new_ids and m["role"] == "user"
                        and SNAPSHOT_MARK in str(m.get("content"))), "")
        if not summary:
            summary = next((m.get("content") or "" for g, m in flat if g in new_ids and m["role"] == "user"), "")
        prev = next((c.prompt_tokens for c in reversed(session.calls) if c.prompt_tokens is not None), None)
        comp = Compaction(
            index=len(session.compactions), trigger="auto" if mid_turn else "unknown",
            trigger_source="inferred: mid-turn" if mid_turn else "inferred: between turns (auto or /compress)",
            ts=iso(records[-1].get("timestamp")) if records else "", message_index=len(session.messages),
            calls_before=len(session.calls), tokens_before=prev, summary=str(summary), messages_after=len(flat))
        session.compactions.append(comp)
        self._touched.touch_compaction(comp.index)
        self._append(flat)
        session.live_start = comp.message_index

    def _rewind(self, gid: str) -> None:
        """``$rewindTo``: the conversation from ``gid`` on is dropped (all of it when ``gid`` is not in it)."""
        session = self.session
        live = session.live_start
        where = self._positions(gid, live)
        at = where[0] if where else live
        session.off_chain += len(session.messages) - at
        self._truncate(at)

    # ------------------------------------------------------------------ derived
    def _fix_call_indices(self) -> None:
        """After messages were replaced: each call points again at its response's first message."""
        self._reindex = False
        session = self.session
        first: dict[str, int] = {}
        for i, gid in enumerate(self._gid):
            if session.messages[i]["role"] == "assistant":
                first.setdefault(gid, i)
        for call, gid in zip(session.calls, self._call_gid, strict=True):
            index = first.get(gid)
            if index is None:
                self._orphans.add(call.index)
                index = min(call.message_index, len(session.messages))
            else:
                self._orphans.discard(call.index)
            if index != call.message_index:
                call.message_index = index
                self._updated.add(call.index)

    def _derive(self) -> None:
        session = self.session
        session.model = next((c.model for c in reversed(session.calls) if c.model), session.model)
        session.window = window_for_model(session.model) if session.model else None
        session.window_source = "model" if session.window else ""
        if session.cwd and not session.project:
            session.project = Path(session.cwd).name


def read_gemini_cli(path: Path, *, lines: Iterable[bytes] | None = None) -> SourceSession:
    """Read one Gemini CLI session file; ``lines``: its lines already read (kept by the caller)."""
    reader = GeminiCliReader(Path(path))
    feed_whole(reader, path, lines)
    return reader.finish()
