"""Cline sessions: ``~/.cline/data/sessions/<ms>_<rand>/<id>.messages.json`` (Cline CLI 3.0.65, ``@cline/cli``;
checked against the pinned version in the real-agent tier).

Unlike the JSONL formats, the messages file is **one JSON document that Cline rewrites in place** (same inode,
truncated then written) after each message: ``{version, updated_at, agent, sessionId, origin, messages,
system_prompt}``. Beside it, ``<id>.json`` (the *meta*: ``provider``, ``model``, ``cwd``, ``prompt``,
``started_at`` / ``ended_at``, ``status``, ``exit_code``, ``metadata.title``, ``metadata.usage`` totals and
``metadata.totalCost``).

``messages`` are Anthropic-style: ``{id, role, content: [blocks], ts (epoch ms), modelInfo?, metrics?}``. A user
message holds ``text`` blocks (the prompt, wrapped as ``<user_input mode="…">…</user_input>`` in the file but
sent bare: the wrapper is removed here, as the request shows) and ``tool_result`` blocks (``tool_use_id``,
``content``, ``is_error``); Cline's own ``[SYSTEM]`` nudges are user messages it sends too. An assistant message
holds ``text``, ``thinking`` / ``reasoning`` and ``tool_use`` blocks (``id``, ``name``, ``input``).

Usage: one provider call per assistant message with ``metrics`` ``{inputTokens, outputTokens, cacheReadTokens,
cacheWriteTokens}``, in file order (there is no response id). ``inputTokens`` is the whole prompt, its cached part
included (checked against the scripted server: equal to ``prompt_tokens``); should the cache figures exceed it,
they are taken as outside it (prompt = input + cache read + cache write). The per-call figures are cross-checked
with the meta's ``metadata.usage`` totals (a difference is a note). Cline prices only the models it knows:
``totalCost`` 0 with an unknown model is no price, so the agent's cost is taken only when it is above 0.

The system prompt is in the file (``system_prompt``: equal to what was sent) — the last run's only: a session
continued in the TUI (``cline --id``) gets the TUI's system prompt written over the headless run's, so the calls
made before the last change between a headless run (``<user_input mode="yolo">``) and the TUI (``act`` /
``plan``) are marked ``prompt_unlike_file`` (their prompt held a system prompt the file lacks); two TUI runs in a
row are taken to share theirs (the same mode of Cline; not verified). The tool definitions are not
(their size is inferred: ``prefix_label``). The model's window is not recorded (unknown). A compaction is
not recorded (checked with ``--compaction basic`` headless: Cline drops old messages from its requests but keeps them
all in the file): the calls from the first whose prompt fell below half the one before are marked
``prompt_unlike_file`` and said in a note (inferred); an agentic compaction's summarisation request is recorded
nowhere, not even in the meta's totals. A half-written document (read while Cline writes it) is no error: the
reader waits for the rewrite to complete (:class:`ClineReader`).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.model.messages import Message
from engine.sources.model import (
    LINE_ERRORS,
    ProviderCall,
    Skipped,
    SourceChanges,
    SourceError,
    SourceSession,
    _decode,
    dict_at,
    float_or_none,
    int_or_none,
    iso,
    line_problem,
    read_regular,
)

MESSAGES_SUFFIX = ".messages.json"
PREFIX_LABEL = "tool definitions"
USER_INPUT_RE = re.compile(r"\A<user_input(?:\s[^>]*)?>(.*)</user_input>\Z", re.DOTALL)
USER_INPUT_MODE_RE = re.compile(r'<user_input(?:\s+mode="([^"]*)")?')
COMPACTED = ("sent after a compaction Cline does not record (its prompt fell below half the call before's): the "
             "request held fewer messages than the file keeps")
EARLIER_RUN = ("sent with the system prompt of an earlier run (headless, or the TUI), which Cline does not keep: "
               "the file holds the last run's")
EARLIER_NOTE = f"the system prompt is the last run's: the calls before it ({EARLIER_RUN})"
READ_BLOCKS = frozenset({"text", "tool_use", "tool_result", "thinking", "reasoning", "redacted_thinking", "image"})
USAGE_KEYS = ("inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens")


def is_cline_document(obj: Any) -> bool:
    """Cline's messages document: ``messages`` (a list), ``sessionId``, ``agent`` and ``system_prompt`` or
    ``version`` at its top (an OpenHands or SWE-agent file has none of ``agent`` / ``sessionId`` there)."""
    return (isinstance(obj, dict) and isinstance(obj.get("messages"), list) and isinstance(obj.get("sessionId"), str)
            and isinstance(obj.get("agent"), str) and ("system_prompt" in obj or "version" in obj))


def is_cline_meta(obj: Any) -> bool:
    """Cline's ``<id>.json`` beside the messages (``session_id``, ``messages_path``)."""
    return (isinstance(obj, dict) and isinstance(obj.get("session_id"), str)
            and isinstance(obj.get("messages_path"), str) and "provider" in obj)


def messages_path(path: Path) -> Path:
    """The messages document of ``path`` (itself, or the ``<id>.messages.json`` beside a meta ``<id>.json``)."""
    path = Path(path)
    if path.name.endswith(MESSAGES_SUFFIX) or path.suffix != ".json":
        return path
    return path.with_name(path.stem + MESSAGES_SUFFIX)


def meta_path(path: Path) -> Path:
    """The meta ``<id>.json`` beside a messages document."""
    path = Path(path)
    return path.with_name(path.name.removesuffix(MESSAGES_SUFFIX) + ".json")


def read_meta(path: Path) -> dict[str, Any]:
    """The meta beside the messages at ``path``; {} when there is none or it cannot be read (it is only context)."""
    try:
        obj = _decode(read_regular(meta_path(path)).decode("utf-8"))
    except (OSError, ValueError, RecursionError, SourceError):
        return {}
    return obj if isinstance(obj, dict) else {}


def ms_iso(value: Any) -> str:
    """An epoch-milliseconds time (Cline's ``ts``) or an ISO string as ISO-8601 UTC; "" when it is neither."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return iso(value / 1000)
    return iso(value)


# --------------------------------------------------------------------------- messages


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, list):
        return content
    return [] if content is None or content == "" else [content]


def block_text(block: Any) -> str:
    if isinstance(block, str):
        return block
    if not isinstance(block, dict):
        return ""
    if block.get("type") == "image":
        return "[image]"
    text = block.get("text")
    return text if isinstance(text, str) else ""


def _text(content: Any) -> str:
    return "\n".join(t for t in (block_text(b) for b in _blocks(content)) if t)


def stringify(value: Any) -> str:
    """``value`` as ``JSON.stringify`` writes it (compact, non-ASCII kept): how Cline sends tool arguments and
    structured results; a string as it is."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def result_text(content: Any) -> str:
    """A ``tool_result``'s content as sent: a string as it is, content blocks as their text, anything else (a
    tool's structured result, e.g. ``run_commands``' list of ``{query, result, success}``) as compact JSON, as
    ``JSON.stringify`` writes it."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(b, dict) and b.get("type") in ("text", "image") for b in content):
        return _text(content)
    return stringify(content)


def input_mode(msg: Any) -> str:
    """The ``mode`` of a user message's ``<user_input mode="…">`` prompt ("" for any other message): ``yolo`` for a
    headless run (``-y``), ``act`` / ``plan`` in the TUI."""
    if not isinstance(msg, dict) or msg.get("role") != "user":
        return ""
    for block in _blocks(msg.get("content")):
        text = block_text(block)
        if text.startswith("<user_input") and (found := USER_INPUT_MODE_RE.match(text)):
            return found.group(1) or "?"
    return ""


def calls_of_earlier_runs(raw: list[Any]) -> int:
    """How many calls (assistant messages with ``metrics``) were made before the last change between a headless
    run (``yolo``) and the TUI (``act`` / ``plan``): Cline keeps one ``system_prompt``, the last run's, and the two
    send different ones; those calls were sent a system prompt the file no longer holds."""
    kinds = [(i, mode == "yolo") for i, mode in ((i, input_mode(m)) for i, m in enumerate(raw)) if mode]
    start = 0
    for (_, before), (i, kind) in itertools.pairwise(kinds):
        if kind != before:
            start = i
    return sum(1 for m in raw[:start] if isinstance(m, dict) and m.get("role") == "assistant"
               and isinstance(m.get("metrics"), dict))


def mark_earlier_runs(session: SourceSession, raw: list[Any]) -> list[int]:
    """Say of each call made before the last run (:func:`calls_of_earlier_runs`) that its prompt held a system
    prompt the file does not; the indices of the calls whose mark changed."""
    earlier = calls_of_earlier_runs(raw)
    changed = []
    for call in session.calls:
        want = EARLIER_RUN if call.index < earlier else ""
        if call.prompt_unlike_file != want:
            call.prompt_unlike_file = want
            changed.append(call.index)
    return changed


def mark_compacted(session: SourceSession) -> list[int]:
    """Say of each call from the first whose prompt fell below half the one before (a compaction: Cline sent fewer
    messages than the file keeps, and records no compaction) that its prompt is not the file's history; the
    indices of the calls whose mark changed. Calls already marked for an earlier run keep that mark."""
    changed: list[int] = []
    compacted = False
    before: int | None = None
    for call in session.calls:
        if call.prompt_tokens is not None:
            compacted = compacted or (before is not None and call.prompt_tokens * 2 < before)
            before = call.prompt_tokens
        if compacted and call.prompt_unlike_file in ("", COMPACTED):
            if call.prompt_unlike_file != COMPACTED:
                call.prompt_unlike_file = COMPACTED
                changed.append(call.index)
    return changed


def user_text(text: str) -> str:
    """A user text block as Cline sends it (the ``<user_input>`` wrapper the file keeps removed)."""
    found = USER_INPUT_RE.match(text)
    return found.group(1) if found else text


def _user(msg: dict[str, Any], ts: str, session: SourceSession) -> list[Message]:
    out: list[Message] = []
    texts: list[str] = []
    for block in _blocks(msg.get("content")):
        kind = block.get("type") if isinstance(block, dict) else "text"
        if kind == "tool_result" and isinstance(block, dict):
            out.append({"role": "tool", "tool_call_id": str(block.get("tool_use_id") or ""),
                        "content": result_text(block.get("content")), "ts": ts})
        elif kind in ("text", "image"):
            texts.append(user_text(block_text(block)))
        else:
            session.ignore(f"block/{kind}")
    if texts:
        out.append({"role": "user", "content": "\n".join(texts), "ts": ts})
    return out


def _assistant(msg: dict[str, Any], ts: str, session: SourceSession) -> Message:
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in _blocks(msg.get("content")):
        kind = block.get("type") if isinstance(block, dict) else "text"
        if kind == "tool_use" and isinstance(block, dict):
            calls.append({"id": str(block.get("id") or ""), "type": "function",
                          "function": {"name": str(block.get("name") or ""),
                                       "arguments": stringify(block.get("input") or {})}})
        elif kind in ("thinking", "reasoning") and isinstance(block, dict):
            thought = block.get("thinking") or block.get("text") or block.get("reasoning")
            if isinstance(thought, str) and thought:
                thoughts.append(thought)
        elif kind == "text":
            texts.append(block_text(block))
        else:
            session.ignore(f"block/{kind}")
    out: Message = {"role": "assistant", "content": "".join(texts), "ts": ts}
    if calls:
        out["tool_calls"] = calls
    if thoughts:
        out["reasoning_content"] = "\n".join(thoughts)
    return out


def _prompt(metrics: dict[str, Any]) -> int | None:
    given = int_or_none(metrics.get("inputTokens"))
    if given is None:
        return None
    cached = (int_or_none(metrics.get("cacheReadTokens")) or 0) + (int_or_none(metrics.get("cacheWriteTokens")) or 0)
    return given if cached <= given else given + cached


def _call(msg: dict[str, Any], session: SourceSession, ts: str) -> ProviderCall:
    metrics = dict_at(msg, "metrics")
    model = str(dict_at(msg, "modelInfo").get("id") or session.model)
    return ProviderCall(index=len(session.calls), prompt_tokens=_prompt(metrics),
                        completion_tokens=int_or_none(metrics.get("outputTokens")),
                        cache_read_tokens=int_or_none(metrics.get("cacheReadTokens")),
                        cache_write_tokens=int_or_none(metrics.get("cacheWriteTokens")),
                        model=model, ts=ts, window=session.window, message_index=len(session.messages))


def add_message(session: SourceSession, n: int, msg: Any) -> None:
    """Message ``n`` (1-based) of the document into ``session``: its messages, and a call for an assistant
    message with ``metrics``; a message of another shape is skipped (said)."""
    if not isinstance(msg, dict):
        session.skipped.append(Skipped(n, f"message {n} is not an object ({type(msg).__name__})", damaged=True))
        return
    role = msg.get("role")
    content = msg.get("content")
    if not isinstance(content, list | str) and content is not None:
        session.skipped.append(Skipped(n, f"message {n}: content is a {type(content).__name__}, not a list of blocks",
                                       damaged=True))
        return
    ts = ms_iso(msg.get("ts"))
    if ts:
        session.started = session.started or ts
        session.last_activity = max(session.last_activity, ts)
    try:
        if role == "user":
            new = _user(msg, ts, session)
        elif role == "assistant":
            if isinstance(msg.get("metrics"), dict):
                session.calls.append(_call(msg, session, ts))
            new = [_assistant(msg, ts, session)]
        else:
            session.skipped.append(Skipped(n, f"message {n}: role {role!r} is not one Cline writes"))
            return
    except LINE_ERRORS as exc:
        session.skipped.append(line_problem(n, exc))
        return
    for m in new:
        m["id"] = session.make_id()
        session.messages.append(m)


# --------------------------------------------------------------------------- the document


def parse_document(data: bytes, name: str) -> dict[str, Any]:
    """The messages document in ``data``; ValueError when it is not (yet) complete JSON, SourceError when it is
    JSON but not Cline's."""
    obj = _decode(data.decode("utf-8"))
    if not is_cline_document(obj):
        missing = [k for k in ("messages", "sessionId", "agent") if not isinstance(obj, dict) or k not in obj]
        what = (f"a JSON {type(obj).__name__}" if not isinstance(obj, dict)
                else f"an object without {', '.join(missing)}" if missing else "fields of other types")
        raise SourceError(f"{name}: not a Cline messages document ({what}: a list 'messages', a string "
                          "'sessionId' and 'agent' expected)")
    doc: dict[str, Any] = obj
    return doc


def apply_meta(session: SourceSession, meta: dict[str, Any]) -> None:
    """What the meta adds: the model and provider, cwd, times, the title, the cost, and the usage totals
    cross-checked with the calls' sums (a difference is a note)."""
    session.model = session.model or str(meta.get("model") or "")
    session.cwd = session.cwd or str(meta.get("cwd") or meta.get("workspace_root") or "")
    if session.cwd:
        session.project = Path(session.cwd).name
    session.started = ms_iso(meta.get("started_at")) or session.started
    session.last_activity = max(session.last_activity, ms_iso(meta.get("ended_at")))
    extra = dict_at(meta, "metadata")
    cost = float_or_none(extra.get("totalCost"))
    if cost:  # 0 is what Cline says of a model it has no price for: no price, not a free model
        session.agent_cost_usd = cost
        session.agent_cost_by_model = {session.model: cost}
    totals = dict_at(extra, "usage")
    if not totals or not session.calls:
        return
    sums = {"inputTokens": sum(c.prompt_tokens or 0 for c in session.calls),
            "outputTokens": sum(c.completion_tokens or 0 for c in session.calls),
            "cacheReadTokens": sum(c.cache_read_tokens or 0 for c in session.calls),
            "cacheWriteTokens": sum(c.cache_write_tokens or 0 for c in session.calls)}
    off = [f"{k} {totals.get(k)} (calls: {v})" for k, v in sums.items()
           if int_or_none(totals.get(k)) is not None and int_or_none(totals.get(k)) != v]
    if off:
        session.notes.append("the meta's usage totals differ from the sum of the calls in the file: " + ", ".join(off)
                             + " (calls whose messages are no longer in the file, or a run still writing)")


def build(session: SourceSession, doc: dict[str, Any], meta: dict[str, Any]) -> None:
    """``session`` (empty) from the document and its meta."""
    session.session_id = str(doc.get("sessionId") or session.session_id)
    prompt = doc.get("system_prompt")
    session.system_prompt = prompt if isinstance(prompt, str) else ""
    session.prefix_label = PREFIX_LABEL if session.system_prompt else "system prompt and tool definitions"
    session.model = str(meta.get("model") or "")
    for n, msg in enumerate(doc["messages"], 1):
        add_message(session, n, msg)
    session.lines = len(doc["messages"])
    if mark_earlier_runs(session, doc["messages"]):
        session.notes.append(EARLIER_NOTE)
    if mark_compacted(session):
        session.notes.append(f"calls {COMPACTED}")
    apply_meta(session, meta)
    session.last_activity = max(session.last_activity, ms_iso(doc.get("updated_at")))


# --------------------------------------------------------------------------- the reader


class ClineReader:
    """The reader of a Cline messages document as it is rewritten: bytes in (the whole file each time it
    changed, after :meth:`restart`), changes out. A document that does not parse yet (Cline is writing it) is
    kept and waited on; once it parses, the messages that extend the ones read before are appended
    (``messages_from`` / ``calls_from``), and a document whose earlier messages changed is read again
    (``reset``)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.session = self._new()
        self._data = bytearray()
        self._raw: list[Any] = []  # the messages of the document last read
        self._head: tuple[Any, ...] = ()  # its system prompt and session id
        self.waiting = ""  # why the bytes fed so far do not parse (a document being written); "" when they do
        self.read_once = False

    def _new(self) -> SourceSession:
        stem = self.path.name.removesuffix(MESSAGES_SUFFIX)
        return SourceSession("cline", self.path, stem, prefix_label="system prompt and tool definitions")

    def restart(self) -> None:
        """The file is read again from its start (Cline rewrote it): the bytes fed so far are dropped, the
        session kept (what the new document adds is told apart from what was read)."""
        self._data.clear()

    def feed(self, data: bytes) -> SourceChanges:
        self._data += data
        return self._parse()

    def feed_lines(self, lines: Iterable[bytes]) -> SourceChanges:
        for line in lines:
            self._data += line
        return self._parse()

    def finish(self) -> SourceSession:
        """The session read; SourceError when the bytes fed never made a complete document."""
        if not self.read_once:
            why = f"not a complete JSON document ({self.waiting})" if self.waiting else "the file is empty"
            raise SourceError(f"{self.path.name}: {why}")
        if self.waiting:
            self.session.notes.append(f"the last version of the file did not parse ({self.waiting}): the one "
                                      "before is shown")
        return self.session

    def _unchanged(self) -> SourceChanges:
        s = self.session
        return SourceChanges(messages_from=len(s.messages), calls_from=len(s.calls),
                             compactions_from=len(s.compactions), subagents_from=len(s.subagents))

    def _parse(self) -> SourceChanges:
        if not self._data.strip():
            return self._unchanged()
        try:
            doc = parse_document(bytes(self._data), self.path.name)
        except (ValueError, RecursionError) as exc:
            if "Extra data" in str(exc) and self._resync():  # a rewrite the caller did not notice: the file read now
                return self._parse()
            self.waiting = f"{type(exc).__name__}: {str(exc)[:80]}"
            return self._unchanged()
        self.waiting = ""
        self.read_once = True
        return self._update(doc)

    def _resync(self) -> bool:
        """The bytes fed hold a whole document and more (the old version and the end of a new one): the file as
        it is now replaces them; False when it cannot be read or is what was fed."""
        try:
            data = read_regular(self.path)
        except (OSError, SourceError):
            return False
        if data == self._data:
            return False
        self._data = bytearray(data)
        return True

    def _update(self, doc: dict[str, Any]) -> SourceChanges:
        raw: list[Any] = doc["messages"]
        head = (doc.get("system_prompt"), doc.get("sessionId"))
        old = self.session
        if self._raw and head == self._head and raw[:len(self._raw)] == self._raw:
            mark = self._unchanged()
            for n in range(len(self._raw), len(raw)):
                add_message(old, n + 1, raw[n])
            old.lines = len(raw)
            changed = set(mark_earlier_runs(old, raw)) | set(mark_compacted(old))
            mark.calls_updated = sorted(i for i in changed if i < mark.calls_from)
            for why, note in ((EARLIER_RUN, EARLIER_NOTE), (COMPACTED, f"calls {COMPACTED}")):
                if any(c.prompt_unlike_file == why for c in old.calls) and note not in old.notes:
                    old.notes.append(note)
            old.notes = [n for n in old.notes if not n.startswith("the meta's usage totals")]  # checked again
            apply_meta(old, read_meta(self.path))
            old.last_activity = max(old.last_activity, ms_iso(doc.get("updated_at")))
            self._raw = list(raw)
            return mark
        session = self._new()
        session.make_id = old.make_id
        build(session, doc, read_meta(self.path))
        reset = bool(old.messages or old.calls)  # a first version without messages (nor a system prompt yet): none
        self.session, self._raw, self._head = session, list(raw), head
        return SourceChanges(reset=True) if reset else SourceChanges()


def read_cline(path: Path) -> SourceSession:
    """Read one Cline session (its messages document, or the meta beside it)."""
    path = messages_path(Path(path))
    reader = ClineReader(path)
    reader.feed(read_regular(path))
    return reader.finish()


def read_cline_lines(path: Path, lines: Iterable[bytes]) -> SourceSession:
    """The same from the file's lines the caller already read (a meta's path: the messages beside it are read)."""
    if messages_path(Path(path)) != Path(path):
        return read_cline(path)
    reader = ClineReader(Path(path))
    reader.feed_lines(lines)
    return reader.finish()


@dataclass
class LightSummary:
    """What Sources lists of a Cline session (the document parsed once: it holds no lines to skip)."""

    session_id: str = ""
    started: str = ""
    last_activity: str = ""
    cwd: str = ""
    calls: int = 0
    last_prompt: int | None = None
    model: str = ""
    title: str = ""
    cost_usd: float | None = None


def light_summary(path: Path) -> LightSummary:
    """The :class:`LightSummary` of the Cline session at ``path`` (SourceError / OSError when it cannot be
    read)."""
    session = read_cline(path)
    meta = read_meta(messages_path(path))
    title = str(dict_at(meta, "metadata").get("title") or meta.get("prompt") or "")
    if not title:
        title = next((str(m.get("content") or "") for m in session.messages if m.get("role") == "user"), "")
    prompts = [c.prompt_tokens for c in session.calls if c.prompt_tokens is not None]
    return LightSummary(session.session_id, session.started, session.last_activity, session.cwd, len(session.calls),
                        prompts[-1] if prompts else None, session.model, title, session.agent_cost_usd)


__all__ = ["MESSAGES_SUFFIX", "ClineReader", "LightSummary", "is_cline_document", "is_cline_meta",
           "light_summary", "messages_path", "meta_path", "read_cline", "read_cline_lines", "user_text"]
