"""Qwen Code sessions: ``~/.qwen/projects/<cwd with / as ->/chats/<session uuid>.jsonl`` (``@qwen-code/qwen-code``,
a fork of Gemini CLI; checked against Qwen Code 0.24.4).

Qwen Code's ``ChatRecordingService`` appends one JSON object a line; ``--continue`` appends to the same file. Every
line has ``uuid``, ``parentUuid`` (the line before it: one chain), ``sessionId``, ``timestamp``, ``type``, ``cwd`` and
``version``. Types (:data:`READ_TYPES`):

- ``user``: ``message.parts`` (Gemini ``Part`` objects: ``text``);
- ``assistant``: ``message`` {role ``model``, parts ``text`` (``thought: true`` for reasoning) / ``functionCall``},
  ``model`` and ``usageMetadata`` {``promptTokenCount`` (the whole prompt, cached part included),
  ``candidatesTokenCount``, ``cachedContentTokenCount``, ``thoughtsTokenCount``, ``totalTokenCount``};
- ``tool_result``: ``message.parts`` of ``functionResponse`` {id, name, response} and ``toolCallResult``;
- ``system`` with ``subtype`` ``ui_telemetry`` (``systemPayload.uiEvent``: ``qwen-code.api_response`` for *every*
  provider call, summarisation calls included, with ``response_id``, ``input_token_count``, ``output_token_count``,
  ``cached_content_token_count``, ``thoughts_token_count`` and ``prompt_id``: ``compress-<ms>`` for a
  compaction's summary call), ``chat_compression`` (``systemPayload.info`` {``originalTokenCount``,
  ``newTokenCount``, ``triggerReason`` ``manual`` / ``token_limit``}, ``compressedHistory``: the new history) and
  ``attribution_snapshot`` (ignored).

Usage: one provider call per ``api_response`` event, by ``response_id``, exact; the assistant line after it is the
call's message (its ``usageMetadata`` equal). An assistant line with usage but no event before it (a file without
the telemetry records) is a call of its own. Summarisation calls are not turn calls but the cost of the
``chat_compression`` that follows them (summed when Qwen Code made two): for ``/compress`` their prompt id is
``compress-<ms>``; for an automatic compaction (mid-turn) it is the turn's, and they are the events that no assistant
line followed before the ``chat_compression`` line. ``originalTokenCount`` is Qwen Code's estimate when
``originalTokenCountIsEstimated`` (automatic compactions): ``estimated``, else the provider's figure.
Subagents (the ``agent`` tool): their
calls are ``api_response`` events of the main file that name a ``subagent_id`` (``<type>-<tool call id>``): each
subagent is a child session (:class:`SubagentRef`, linked to the ``agent`` call) holding those calls, exact by
response id, and only there (never one of the main session's calls). Its conversation is a file of its own,
``<project>/subagents/<session id>/agent-<subagent id>.jsonl`` (the same lines, ``isSidechain: true``: the
subagent's prompt without the reminders sent before it; each round an assistant line with ``usageMetadata`` and no
parts, then one with its function calls, or one with its text and usage) beside an ``agent-<id>.meta.json``
(``toolUseId``: the ``agent`` call): :meth:`QwenCodeReader.read_beside` reads it (:func:`read_qwen_code` does), for
the subagent's messages; its calls stay the events, placed at its file's rounds in order where their figures are
the same (else after its last message). A subagent file no event names: its calls are its file's
``usageMetadata`` (exact figures, no response id). The system prompt and tool definitions are
not in the session file (``--openai-logging`` writes them elsewhere): their size is inferred by the importer. No
cost is recorded: it is priced from the model name (unknown for a model without a price).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.model.messages import Message
from engine.sources.model import (
    ESTIMATED,
    LINE_ERRORS,
    PROVIDER,
    Compaction,
    LineBuffer,
    ProviderCall,
    Skipped,
    SourceChanges,
    SourceError,
    SourceSession,
    SubagentRef,
    Trigger,
    _decode,
    capped_lines,
    dict_at,
    feed_whole,
    int_or_none,
    iso,
    json_args,
    json_lines,
    line_problem,
    open_regular,
    read_regular,
)

READ_TYPES = frozenset({"user", "assistant", "tool_result", "system"})
READ_SUBTYPES = frozenset({"ui_telemetry", "chat_compression"})
# system subtypes and telemetry events left out on purpose, and why (counted as ``system/<subtype>`` /
# ``ui_telemetry/<event>``)
IGNORED_SUBTYPES: dict[str, str] = {
    "attribution_snapshot": "which files the agent changed (for commit attribution); not sent to the model",
}
API_RESPONSE = "qwen-code.api_response"
COMPRESS_PREFIX = "compress-"  # the prompt id of a compaction's summarisation call
TRIGGERS: dict[str, Trigger] = {"manual": "manual", "token_limit": "auto"}
# what Qwen Code writes on every line (the shape told apart from Claude Code's, which has no ``version`` of this
# kind with ``provenance`` and no Gemini ``parts``)
LINE_KEYS = ("uuid", "parentUuid", "sessionId", "timestamp", "type", "cwd")


def is_qwen_line(obj: dict[str, Any]) -> bool:
    """A line of a Qwen Code session: the common keys (:data:`LINE_KEYS`) and a Gemini-shaped body (``message``
    with ``parts``) or a ``system`` line with ``subtype`` and ``systemPayload``. Claude Code's lines have
    ``message.content``, never ``parts``, and no ``systemPayload``."""
    if not all(k in obj for k in LINE_KEYS) or obj.get("type") not in READ_TYPES:
        return False
    if obj["type"] == "system":
        return isinstance(obj.get("subtype"), str) and isinstance(obj.get("systemPayload"), dict)
    return isinstance(dict_at(obj, "message").get("parts"), list)


def _parts(msg: dict[str, Any]) -> list[dict[str, Any]]:
    parts = msg.get("parts")
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def parts_text(parts: list[dict[str, Any]]) -> str:
    """The text of Gemini parts (reasoning left out)."""
    return "".join(p["text"] for p in parts if isinstance(p.get("text"), str) and not p.get("thought"))


def _response_text(response: Any) -> str:
    if isinstance(response, dict):
        for key in ("output", "error"):
            if isinstance(response.get(key), str):
                return str(response[key])
    return response if isinstance(response, str) else json_args(response)


def convert(kind: str, msg: dict[str, Any], ts: str) -> list[Message]:
    """A ``user`` / ``assistant`` / ``tool_result`` line's message as OpenAI-format messages."""
    parts = _parts(msg)
    if kind == "tool_result" or any("functionResponse" in p for p in parts):
        out: list[Message] = []
        for part in parts:
            resp = part.get("functionResponse")
            if isinstance(resp, dict):
                out.append({"role": "tool", "tool_call_id": str(resp.get("id") or ""),
                            "content": _response_text(resp.get("response")), "ts": ts})
        return out
    if kind == "user" or msg.get("role") == "user":
        return [{"role": "user", "content": parts_text(parts), "ts": ts}]
    if not parts:  # a round's usage line of a subagent file: its function calls come on the next line
        return []
    calls = [{"id": str(fc.get("id") or ""), "type": "function",
              "function": {"name": str(fc.get("name") or ""), "arguments": json_args(fc.get("args") or {})}}
             for fc in (p.get("functionCall") for p in parts) if isinstance(fc, dict)]
    thoughts = [p["text"] for p in parts if p.get("thought") and isinstance(p.get("text"), str)]
    message: Message = {"role": "assistant", "content": parts_text(parts), "ts": ts}
    if calls:
        message["tool_calls"] = calls
    if thoughts:
        message["reasoning_content"] = "\n".join(thoughts)
    return [message]


def _event_call(event: dict[str, Any], index: int, ts: str, at: int) -> ProviderCall:
    return ProviderCall(index=index, prompt_tokens=int_or_none(event.get("input_token_count")),
                        completion_tokens=int_or_none(event.get("output_token_count")),
                        cache_read_tokens=int_or_none(event.get("cached_content_token_count")),
                        cache_write_tokens=None, model=str(event.get("model") or ""), ts=ts, message_index=at,
                        request_id=str(event.get("response_id") or ""),
                        reasoning_tokens=int_or_none(event.get("thoughts_token_count")))


def _metadata_call(obj: dict[str, Any], index: int, ts: str, at: int) -> ProviderCall:
    usage = dict_at(obj, "usageMetadata")
    return ProviderCall(index=index, prompt_tokens=int_or_none(usage.get("promptTokenCount")),
                        completion_tokens=int_or_none(usage.get("candidatesTokenCount")),
                        cache_read_tokens=int_or_none(usage.get("cachedContentTokenCount")),
                        cache_write_tokens=None, model=str(obj.get("model") or ""), ts=ts, message_index=at,
                        reasoning_tokens=int_or_none(usage.get("thoughtsTokenCount")))


def _summed(calls: list[ProviderCall]) -> ProviderCall | None:
    """The summarisation call(s) of one compaction as one call (their figures summed; ids joined)."""
    if not calls:
        return None
    first = calls[0]

    def total(name: str) -> int | None:
        values = [getattr(c, name) for c in calls]
        return None if any(v is None for v in values) else sum(values)

    return ProviderCall(index=0, prompt_tokens=total("prompt_tokens"), completion_tokens=total("completion_tokens"),
                        cache_read_tokens=total("cache_read_tokens"), cache_write_tokens=None, model=first.model,
                        ts=first.ts, request_id=",".join(c.request_id for c in calls),
                        reasoning_tokens=total("reasoning_tokens"))


SUBAGENTS_DIR = "subagents"  # beside the chats folder: <session id>/agent-<subagent id>.jsonl (+ .meta.json)


def subagent_files(path: Path, session_id: str) -> list[Path]:
    """The subagents' own files of the session ``session_id`` whose main file is ``path`` (``<project>/subagents/
    <session id>/agent-<id>.jsonl``), in name order (OSError when the folder cannot be listed)."""
    folder = path.parent.parent / SUBAGENTS_DIR / session_id
    return sorted(folder.glob("agent-*.jsonl")) if folder.is_dir() else []


def _figures(call: ProviderCall) -> tuple[int | None, int | None, int | None]:
    return call.prompt_tokens, call.completion_tokens, call.cache_read_tokens


@dataclass
class _Sub:
    """A subagent: its calls from the main file's events (exact, by response id), its messages from its own file
    (read by a reader of its own, fed what was appended)."""

    ref: SubagentRef
    child: SourceSession
    events: list[ProviderCall] = field(default_factory=list)
    reader: QwenCodeReader | None = None
    offset: int = 0

    def read(self, file: Path) -> None:
        """What was appended to the subagent's file since the last read (the whole file again when it shrank)."""
        try:
            with open_regular(file) as fh:
                size = os.fstat(fh.fileno()).st_size
                if self.reader is None or size < self.offset:
                    self.reader, self.offset = QwenCodeReader(file), 0
                fh.seek(self.offset)
                data = fh.read(size - self.offset)
        except (OSError, SourceError) as exc:
            self.ref.problem = f"subagent file {file.name} cannot be read: {exc}"
            return
        self.offset += len(data)
        self.reader.feed(data)
        self.ref.path, self.ref.problem = file, ""
        tool = _meta_tool_id(file)
        self.ref.parent_tool_call_id = tool or self.ref.parent_tool_call_id

    def assemble(self) -> None:
        """The child session: the file's messages; the events as its calls, each at the file's round of the same
        order when their figures are the same (else after the last message); without events, the file's calls."""
        child = self.child
        own = self.reader.session if self.reader is not None else None
        child.notes = []
        if own is None:
            child.notes.append("the subagent's calls from the main file's api_response events (exact); its own file "
                               "is not there (yet): no messages")
            return
        child.messages, child.lines, child.skipped = own.messages, own.lines, own.skipped
        child.started = own.started or child.started
        child.last_activity = max(child.last_activity, own.last_activity)
        child.cwd = own.cwd or child.cwd
        if not self.events:
            child.calls = own.calls
            child.model = own.model or child.model
            child.notes.append("no api_response event of the main file names this subagent: its calls are its "
                               "file's usageMetadata (no response id)")
            return
        placed = 0
        for i, call in enumerate(self.events):
            mine = own.calls[i] if i < len(own.calls) else None
            if mine is not None and _figures(mine) == _figures(call):
                call.message_index = mine.message_index
                placed += 1
            else:
                call.message_index = len(child.messages)
        child.notes.append(f"the subagent's calls from the main file's api_response events (exact); its messages from "
                           f"its own file, {placed} of {len(self.events)} call(s) placed at its rounds (same order, "
                           "same figures)")


def _meta_tool_id(file: Path) -> str | None:
    """The ``agent`` call that started a subagent: ``toolUseId`` of ``agent-<id>.meta.json`` beside its file."""
    meta = file.with_name(file.name.removesuffix(".jsonl") + ".meta.json")
    try:
        data = json.loads(read_regular(meta)) if meta.is_file() else None
    except (OSError, SourceError, ValueError, RecursionError):
        return None
    tool = data.get("toolUseId") if isinstance(data, dict) else None
    return tool if isinstance(tool, str) and tool else None


class QwenCodeReader:
    """The incremental reader of one Qwen Code session file (``AppendedReader``): bytes in, changes out. The file
    is one chain written in order, so every line only adds to what was read."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.session = SourceSession("qwen-code", self.path, self.path.stem,
                                     prefix_label="system prompt and tool definitions")
        self.session.notes.append("the system prompt and tool definitions are not in Qwen Code's session file "
                                  "(inferred)")
        self._buffer = LineBuffer()
        self._n = 0
        # api_response calls not yet followed by their assistant line: a turn call (its assistant line next, or a
        # user / tool result line: a response without a message), or a summarisation call (a chat_compression next)
        self._unbound: list[ProviderCall] = []
        self._summary_calls: list[ProviderCall] = []  # compress- calls waiting for their chat_compression
        self._touched = -1
        self._subs: dict[str, _Sub] = {}  # subagent id -> the subagent (in session.subagents in this order)
        self._subs_touched = -1

    def feed(self, data: bytes) -> SourceChanges:
        """Take appended bytes; a partial last line is kept until its newline arrives."""
        return self.feed_lines(self._buffer.lines(data))

    def feed_lines(self, lines: Iterable[bytes]) -> SourceChanges:
        """Take complete lines (each ending with its newline; a last one without it is read as torn)."""
        session = self.session
        mark = (len(session.messages), len(session.calls), len(session.compactions), len(session.subagents))
        self._touched = self._subs_touched = -1
        for n, obj in json_lines(lines, session.skipped, start=self._n + 1):
            self._n = n
            session.lines = n
            try:
                self._line(n, obj)
            except LINE_ERRORS as exc:  # a field of a shape never seen: this line skipped, said
                session.skipped.append(line_problem(n, exc))
        self._derive()
        touched = mark[2] if self._touched < 0 else min(mark[2], self._touched)
        subs = mark[3] if self._subs_touched < 0 else min(mark[3], self._subs_touched)
        return SourceChanges(messages_from=mark[0], calls_from=mark[1], compactions_from=touched,
                             calls_updated=[], subagents_from=subs)

    def finish(self) -> SourceSession:
        """The whole session: a last line without its newline read as it is (or reported torn)."""
        if pending := self._buffer.rest():
            self.feed_lines([pending])
        if self._unbound:  # responses whose line never came (the agent stopped): calls without a message
            self._bind()
            self._derive()
        return self.read_beside()

    def read_beside(self) -> SourceSession:
        """The subagents' own files, read for what was appended since the last time (a followed session gains
        them as it goes): each subagent's messages, its calls placed among them; a file no event named yet is a
        subagent too. The main file is not read again."""
        try:
            files = subagent_files(self.path, self.session.session_id or self.path.stem)
        except OSError as exc:
            files = []
            self.session.notes.append(f"the subagents' folder cannot be listed: {exc}")
        for file in files:
            sid = file.name.removeprefix("agent-").removesuffix(".jsonl")
            sub = self._subs.get(sid) or self._new_sub(sid, "")
            sub.read(file)
        for sub in self._subs.values():
            sub.assemble()
        links = {sub.ref.parent_tool_call_id: name for name, sub in self._subs.items() if sub.ref.parent_tool_call_id}
        for msg in self.session.messages:  # the agent call's result names the subagent it started
            started = links.get(str(msg.get("tool_call_id") or "")) if msg.get("role") == "tool" else None
            if started is not None and dict_at(msg, "subagent").get("id") != started:
                msg["subagent"] = {"id": started}
        return self.session

    def _bind(self, last: ProviderCall | None = None) -> None:
        """The unbound calls become the session's calls (``last`` then, with the next message as its own)."""
        session = self.session
        for call in [*self._unbound, *([last] if last else [])]:
            call.index, call.message_index = len(session.calls), len(session.messages)
            session.calls.append(call)
        self._unbound = []

    def _line(self, n: int, obj: dict[str, Any]) -> None:
        session = self.session
        kind = obj.get("type")
        if not isinstance(kind, str) or kind not in READ_TYPES or "uuid" not in obj:
            session.skipped.append(Skipped(n, f"a line of no type Qwen Code writes (type {kind!r})"))
            return
        ts = iso(obj.get("timestamp"))
        if ts:
            session.started = session.started or ts
            session.last_activity = max(session.last_activity, ts)
        if isinstance(obj.get("sessionId"), str) and obj["sessionId"]:
            session.session_id = obj["sessionId"]
        if isinstance(obj.get("cwd"), str) and obj["cwd"] and not session.cwd:
            session.cwd = obj["cwd"]
        if kind == "system":
            self._system(n, obj, ts)
            return
        msg = obj.get("message")
        if not isinstance(msg, dict):
            session.skipped.append(Skipped(n, f"a {kind} line without its message"))
            return
        if kind == "assistant":
            self._assistant(obj, ts)
        elif self._unbound:
            self._bind()
        for out in convert(kind, msg, ts):
            out["id"] = session.make_id()
            session.messages.append(out)

    def _assistant(self, obj: dict[str, Any], ts: str) -> None:
        call = self._unbound.pop() if self._unbound else None
        if call is None:
            if not isinstance(obj.get("usageMetadata"), dict):
                return  # no usage recorded for it (nothing to count)
            call = _metadata_call(obj, 0, ts, 0)
        call.model = call.model or str(obj.get("model") or "")
        self._bind(call)

    def _system(self, n: int, obj: dict[str, Any], ts: str) -> None:
        session = self.session
        subtype = obj.get("subtype")
        payload = dict_at(obj, "systemPayload")
        if subtype in IGNORED_SUBTYPES:
            session.ignore(f"system/{subtype}")
        elif subtype == "ui_telemetry":
            event = dict_at(payload, "uiEvent")
            name = str(event.get("event.name") or "")
            if name != API_RESPONSE:
                session.ignore(f"ui_telemetry/{name}")
                return
            if isinstance(event.get("subagent_id"), str) and event["subagent_id"]:
                self._subagent_call(event, ts)
                return
            if str(event.get("prompt_id") or "").startswith(COMPRESS_PREFIX):
                self._summary_calls.append(_event_call(event, 0, ts, len(session.messages)))
                return
            self._unbound.append(_event_call(event, 0, ts, 0))
        elif subtype == "chat_compression":
            self._compaction(payload, ts)
        else:
            session.skipped.append(Skipped(n, f"system subtype {subtype!r} is not one this reader knows"))

    def _subagent_call(self, event: dict[str, Any], ts: str) -> None:
        """A call of a subagent (the event names its ``subagent_id``): one of that child's calls, not the main's."""
        sid = str(event["subagent_id"])
        sub = self._subs.get(sid) or self._new_sub(sid, str(event.get("subagent_type") or ""))
        call = _event_call(event, len(sub.events), ts, len(sub.child.messages))
        sub.events.append(call)
        if sub.child.calls is not sub.events:  # until now its calls were its file's: the events are the exact ones
            sub.child.calls = sub.events
        child = sub.child
        child.model = call.model or child.model
        child.started = child.started or ts
        child.last_activity = max(child.last_activity, ts)
        index = list(self._subs).index(sid)
        self._subs_touched = index if self._subs_touched < 0 else min(self._subs_touched, index)

    def _new_sub(self, sid: str, kind: str) -> _Sub:
        """A subagent of id ``sid`` (``<type>-<agent tool call id>``), linked to the call its id names (its meta
        file's ``toolUseId`` when the file is there)."""
        session = self.session
        file = self.path.parent.parent / SUBAGENTS_DIR / (session.session_id or self.path.stem) / f"agent-{sid}.jsonl"
        child = SourceSession("qwen-code", file, sid, prefix_label="system prompt and tool definitions")
        child.cwd, child.project = session.cwd, session.project
        ref = SubagentRef(sid, "task", None, parent_tool_call_id=sid.removeprefix(f"{kind}-") if kind else None,
                          session=child)
        sub = self._subs[sid] = _Sub(ref, child)
        child.calls = sub.events
        session.subagents.append(ref)
        return sub

    def _compaction(self, payload: dict[str, Any], ts: str) -> None:
        session = self.session
        info = dict_at(payload, "info")
        history = payload.get("compressedHistory")
        history = [h for h in history if isinstance(h, dict)] if isinstance(history, list) else []
        word = str(info.get("triggerReason") or "")
        cost = _summed([*self._summary_calls, *self._unbound])  # manual: compress- ids; auto: the turn's
        self._summary_calls, self._unbound = [], []
        summary = parts_text(_parts(history[0])) if history else ""
        comp = Compaction(index=len(session.compactions), trigger=TRIGGERS.get(word, "unknown"),
                          trigger_source=word or "not recorded", ts=ts, message_index=len(session.messages),
                          calls_before=len(session.calls), tokens_before=int_or_none(info.get("originalTokenCount")),
                          tokens_before_source=ESTIMATED if info.get("originalTokenCountIsEstimated") else PROVIDER,
                          summary=summary, cost=cost,
                          messages_after=len(history), post_tokens=int_or_none(info.get("newTokenCount")))
        session.compactions.append(comp)
        for item in history:
            kind = "user" if item.get("role") == "user" else "assistant"
            for out in convert(kind, item, ts):
                out["id"] = session.make_id()
                session.messages.append(out)
        session.live_start = comp.message_index
        if cost is not None and len(cost.request_id.split(",")) > 1:
            session.notes.append(f"compaction {comp.index + 1}: {len(cost.request_id.split(','))} summarisation "
                                 "calls, their figures summed")

    def _derive(self) -> None:
        session = self.session
        for comp in session.compactions:  # the first call after it (None until it is made)
            after = session.calls[comp.calls_before].prompt_tokens if comp.calls_before < len(session.calls) else None
            if after != comp.tokens_after:
                comp.tokens_after = after
                self._touched = comp.index if self._touched < 0 else min(self._touched, comp.index)
        models = [c.model for c in session.calls if c.model]
        session.model = models[-1] if models else session.model
        if session.cwd and not session.project:
            session.project = Path(session.cwd).name


def read_qwen_code(path: Path, *, lines: Iterable[bytes] | None = None) -> SourceSession:
    """Read one Qwen Code session file; ``lines``: its lines already read (kept by the caller)."""
    reader = QwenCodeReader(Path(path))
    feed_whole(reader, path, lines)
    return reader.finish()


@dataclass
class LightSummary:
    """What Sources lists of a Qwen Code file, from a light pass (only the telemetry and assistant lines with
    usage and the first prompt are parsed)."""

    session_id: str = ""
    started: str = ""
    cwd: str = ""
    calls: int = 0
    last_prompt: int | None = None
    model: str = ""
    title: str = ""


def light_summary(path: Path) -> LightSummary:
    """The :class:`LightSummary` of the Qwen Code session at ``path`` (SourceError / OSError when it cannot be
    read): one call per assistant line with usage (the summarisation calls, which have none, apart)."""
    out = LightSummary(session_id=Path(path).stem)
    with open_regular(path) as fh:
        for raw in capped_lines(fh, name=Path(path).name):
            if not out.started:
                obj = _loads(raw)
                if isinstance(obj.get("timestamp"), str):
                    out.started, out.cwd = iso(obj["timestamp"]), str(obj.get("cwd") or "")
                    out.session_id = str(obj.get("sessionId") or out.session_id)
            if b'"usageMetadata"' in raw:
                obj = _loads(raw)
                if obj.get("type") == "assistant":
                    out.calls += 1
                    out.last_prompt = int_or_none(dict_at(obj, "usageMetadata").get("promptTokenCount"))
                    out.model = str(obj.get("model") or out.model)
            elif not out.title and b'"user"' in raw:
                obj = _loads(raw)
                if obj.get("type") == "user":
                    out.title = parts_text(_parts(dict_at(obj, "message")))
    return out


def _loads(raw: bytes) -> dict[str, Any]:
    try:
        obj = _decode(raw.decode("utf-8"))
    except (ValueError, RecursionError, UnicodeDecodeError):
        return {}
    return obj if isinstance(obj, dict) else {}


__all__ = ["API_RESPONSE", "COMPRESS_PREFIX", "IGNORED_SUBTYPES", "READ_SUBTYPES", "READ_TYPES", "LightSummary",
           "QwenCodeReader", "convert", "is_qwen_line", "light_summary", "parts_text", "read_qwen_code",
           "subagent_files"]
