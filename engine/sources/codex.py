"""OpenAI Codex CLI rollouts: ``${CODEX_HOME:-~/.codex}/sessions/YYYY/MM/DD/rollout-*.jsonl``.

``{timestamp, type, payload}`` lines:

- ``session_meta`` (id, cwd, ``base_instructions``), ``turn_context`` (the model of each turn);
- ``response_item``: Responses-API items, which become messages: ``message`` (user / assistant;
  ``developer`` instructions before the conversation join the system prompt), ``reasoning``
  (summary text, and encrypted content shown as such, sized by its length), ``function_call`` /
  ``function_call_output`` and ``custom_tool_call`` / ``custom_tool_call_output`` paired by
  ``call_id``, ``web_search_call``;
- ``event_msg``: ``token_count`` carries ``last_token_usage`` (one call) and ``total_token_usage``
  (the running sum) and ``model_context_window``. Codex writes each one twice: a call is a
  ``token_count`` whose ``total_token_usage`` changed. ``input_tokens`` is the whole prompt and
  includes ``cached_input_tokens`` (the cache read); there is no cache-write figure (None, not 0);
- ``compacted`` (with ``event_msg`` ``context_compacted``): a compaction whose
  ``replacement_history`` is the context after it.

Text a publisher redacted as ``[REDACTED_TEXT len=N …]`` is estimated from N.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.model.messages import Message
from engine.sources.model import (
    Compaction,
    ProviderCall,
    Skipped,
    SourceSession,
    dict_at,
    expand_redacted,
    int_or_none,
    iso,
    read_json_lines,
    text_of,
)

KNOWN_TYPES = frozenset({"session_meta", "turn_context", "response_item", "event_msg", "compacted"})
OUTPUT_ITEMS = frozenset({"reasoning", "function_call", "custom_tool_call", "web_search_call", "local_shell_call"})


@dataclass
class _State:
    session: SourceSession
    ts: str = ""
    model: str = ""
    window: int | None = None
    last_total: Any = None
    last_total_raw: bytes = b""
    response_start: int | None = None  # message index where the current response's output began
    pending_reasoning: list[str] = field(default_factory=list)
    system_parts: list[str] = field(default_factory=list)
    started: bool = False  # a user or assistant message has been seen
    turn_open: bool = False  # a turn started and has had a call since
    compaction_pending: bool = False


def _text(parts: Any) -> str:
    if isinstance(parts, list):
        return "\n".join(expand_redacted(text_of([p])) for p in parts if isinstance(p, dict | str))
    return expand_redacted(text_of(parts))


def _add(state: _State, msg: Message) -> Message:
    msg["id"] = state.session.make_id()
    msg["ts"] = state.ts
    state.session.messages.append(msg)
    return msg


def _mark_output(state: _State) -> None:
    if state.response_start is None:
        state.response_start = len(state.session.messages)


def _encrypted_size(enc: str) -> int:
    """Characters an encrypted blob stands for (a redacted one says its length)."""
    expanded = expand_redacted(enc)
    return len(expanded) if expanded is not enc else len(enc)


def _reasoning_text(payload: dict[str, Any]) -> str:
    summary, content = payload.get("summary"), payload.get("content")
    parts = [_text(s.get("text") or "") for s in summary if isinstance(s, dict)] if isinstance(summary, list) else []
    for c in content if isinstance(content, list) else []:
        if isinstance(c, dict) and isinstance(c.get("text"), str):
            parts.append(expand_redacted(c["text"]))
    enc = payload.get("encrypted_content")
    if isinstance(enc, str) and enc:
        size = _encrypted_size(enc)
        head = f"[encrypted reasoning: {size} characters]"
        parts.append(head + " " + "." * max(0, size - len(head) - 1))
    return "\n".join(p for p in parts if p)


def _assistant_for_call(state: _State) -> Message:
    """The assistant message a tool call joins: the current response's, or a new one."""
    msgs = state.session.messages
    start = state.response_start if state.response_start is not None else len(msgs)
    for msg in reversed(msgs[start:]):
        if msg["role"] == "assistant":
            return msg
    return _assistant(state, None)


def _assistant(state: _State, content: str | None) -> Message:
    msg: Message = {"role": "assistant", "content": content}
    if state.pending_reasoning:
        msg["reasoning_content"] = "\n".join(state.pending_reasoning)
        state.pending_reasoning.clear()
    return _add(state, msg)


def _tool_call(state: _State, call_id: str, name: str, arguments: str) -> None:
    _mark_output(state)
    msg = _assistant_for_call(state)
    if state.pending_reasoning:
        prev = msg.get("reasoning_content") or ""
        msg["reasoning_content"] = prev + ("\n" if prev else "") + "\n".join(state.pending_reasoning)
        state.pending_reasoning.clear()
    msg.setdefault("tool_calls", []).append(
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}})


def _output_text(output: Any) -> str:
    if isinstance(output, dict):  # older rollouts: {"content": ..., "success": ...}
        output = output.get("content", output)
    if isinstance(output, list):
        return _text(output)
    return expand_redacted(output) if isinstance(output, str) else str(output)


def _message_item(state: _State, payload: dict[str, Any]) -> None:
    role = payload.get("role")
    text = _text(payload.get("content"))
    if role in ("developer", "system"):
        if not state.started:
            state.system_parts.append(text)
        else:
            _add(state, {"role": "user", "name": "developer", "content": text})
    elif role == "assistant":
        _mark_output(state)
        _assistant(state, text)
        state.started = True
    elif role == "user":
        _add(state, {"role": "user", "content": text})
        state.started = True
    else:
        state.session.skipped.append(Skipped(0, f"a message with role {role!r}"))


def _response_item(state: _State, n: int, payload: dict[str, Any]) -> None:
    kind = payload.get("type")
    if kind == "message":
        _message_item(state, payload)
    elif kind == "reasoning":
        _mark_output(state)
        text = _reasoning_text(payload)
        if text:
            state.pending_reasoning.append(text)
    elif kind in ("function_call", "custom_tool_call"):
        args = payload.get("arguments") if kind == "function_call" else payload.get("input")
        args_text = expand_redacted(args) if isinstance(args, str) else str(args or "")
        _tool_call(state, str(payload.get("call_id") or ""), str(payload.get("name") or ""), args_text)
        state.started = True
    elif kind in ("function_call_output", "custom_tool_call_output"):
        _add(state, {"role": "tool", "tool_call_id": str(payload.get("call_id") or ""),
                     "content": _output_text(payload.get("output"))})
    elif kind in ("web_search_call", "local_shell_call"):
        _mark_output(state)
        action = payload.get("action")
        detail = _text(str(action.get("query") or "")) if isinstance(action, dict) else ""
        _assistant(state, f"[{kind}] {detail}".strip())
    elif kind in ("compaction", "compaction_summary") and state.session.compactions:
        enc = payload.get("encrypted_content")
        text = _text(str(payload.get("summary") or payload.get("text") or ""))
        if isinstance(enc, str) and enc:
            size = _encrypted_size(enc)
            head = f"[encrypted compaction summary: {size} characters]"
            text = (text + "\n" if text else "") + head + " " + "." * max(0, size - len(head) - 1)
        state.session.compactions[-1].summary = text
    else:
        state.session.skipped.append(Skipped(n, f"response item type {kind!r} is not one this reader knows"))


def call_from_usage(info: dict[str, Any], *, index: int, model: str, ts: str, window: int | None,
                    message_index: int = 0) -> ProviderCall:
    """The provider call a ``token_count`` event's ``last_token_usage`` reports: its prompt includes
    the cached part (cache read); Codex reports no cache write (None, not 0)."""
    last = dict_at(info, "last_token_usage")
    return ProviderCall(
        index=index, prompt_tokens=int_or_none(last.get("input_tokens")),
        completion_tokens=int_or_none(last.get("output_tokens")),
        cache_read_tokens=int_or_none(last.get("cached_input_tokens")), cache_write_tokens=None,
        model=model, ts=ts, window=window, message_index=message_index,
        reasoning_tokens=int_or_none(last.get("reasoning_output_tokens")))


@dataclass(frozen=True)
class TokenCount:
    """A ``token_count`` event as both readers (the full one and the follower) take it."""

    info: dict[str, Any]
    window: int | None  # ``model_context_window``, when given
    total: Any  # ``total_token_usage``: what tells a new call from a repeat
    new: bool  # False for the second of Codex's duplicated pair (same total): not another call


def read_token_count(payload: dict[str, Any], last_total: Any) -> TokenCount | None:
    """The ``token_count`` payload's usage (None when it has none); ``new`` is False when its total
    equals the last one seen — Codex writes each call's event twice."""
    info = payload.get("info")
    if not isinstance(info, dict):
        return None
    total = info.get("total_token_usage")
    return TokenCount(info, int_or_none(info.get("model_context_window")), total, total != last_total)


def _token_count(state: _State, payload: dict[str, Any]) -> None:
    count = read_token_count(payload, state.last_total)
    if count is None:
        return
    state.window = count.window or state.window
    if not count.new:
        return
    state.last_total = count.total
    info = count.info
    session = state.session
    start = state.response_start if state.response_start is not None else len(session.messages)
    session.calls.append(call_from_usage(info, index=len(session.calls), model=state.model, ts=state.ts,
                                         window=state.window, message_index=start))
    state.response_start = None
    state.turn_open = True
    state.compaction_pending = False


def _compacted(state: _State, payload: dict[str, Any]) -> None:
    session = state.session
    before = next((c.prompt_tokens for c in reversed(session.calls) if c.prompt_tokens), None)
    summary = _text(str(payload.get("message") or ""))
    comp = Compaction(
        index=len(session.compactions), trigger="auto" if state.turn_open else "manual",
        trigger_source="inferred: mid-turn" if state.turn_open else "inferred: own turn",
        ts=state.ts, message_index=len(session.messages), calls_before=len(session.calls),
        tokens_before=before, summary="" if summary.startswith("[redacted: 0 ") else summary)
    session.compactions.append(comp)
    state.response_start = None
    state.pending_reasoning.clear()
    history = payload.get("replacement_history")
    for item in history if isinstance(history, list) else []:
        if isinstance(item, dict):
            _response_item(state, 0, item)
    state.response_start = None  # the replacement is input to the next call, not its output
    state.pending_reasoning.clear()
    comp.messages_after = len(session.messages) - comp.message_index
    state.compaction_pending = True


def _line(state: _State, n: int, obj: dict[str, Any]) -> None:
    kind = obj.get("type") if isinstance(obj.get("type"), str) else repr(obj.get("type"))
    payload = dict_at(obj, "payload")
    state.ts = iso(obj.get("timestamp")) or state.ts
    session = state.session
    if state.ts:
        session.started = session.started or state.ts
        session.last_activity = state.ts
    if kind not in KNOWN_TYPES:
        session.skipped.append(Skipped(n, f"record type {kind!r} is not one this reader knows"))
    elif kind == "session_meta":
        session.session_id = str(payload.get("id") or session.session_id)
        session.cwd = str(payload.get("cwd") or "")
        base = payload.get("base_instructions")
        text = base.get("text") if isinstance(base, dict) else base
        if isinstance(text, str) and text:
            state.system_parts.insert(0, expand_redacted(text))
    elif kind == "turn_context":
        state.model = str(payload.get("model") or state.model)
    elif kind == "response_item":
        _response_item(state, n, payload)
    elif kind == "compacted":
        _compacted(state, payload)
    elif kind == "event_msg":
        etype = payload.get("type")
        if etype == "token_count":
            _token_count(state, payload)
        elif etype == "task_started":
            state.window = int_or_none(payload.get("model_context_window")) or state.window
            state.turn_open = False
        elif etype == "context_compacted" and not state.compaction_pending:
            _compacted(state, {})  # a compaction announced without its ``compacted`` line


_NEEDED_EVENTS = (b'"token_count"', b'"task_started"', b'"context_compacted"')
_MODEL_RE = re.compile(rb'"model":"([^"\\]{1,200})"')
_RAW_DECODE = json.JSONDecoder().raw_decode
_TOTAL_RE = re.compile(rb'"total_token_usage":(\{[^{}]*\})')


def _token_count_info(state: _State, raw: bytes) -> bool:
    """A new ``token_count``: parse only its ``info`` object (not the rate limits after it)."""
    at = raw.find(b'"info":{')
    if at < 0:
        return False
    try:
        info, _ = _RAW_DECODE(raw[at + 7:].decode("utf-8"))
    except ValueError:
        return False
    stamp = iso(raw[14:38].decode("ascii", "replace"))
    if stamp:
        state.ts = stamp
        state.session.last_activity = stamp
    _token_count(state, {"info": info})
    return True


def _fast_path(state: _State, raw: bytes) -> bool:
    """Handle, from its bytes, a compact line that needs no parsing (True when handled): event lines
    that only echo a response item, ``turn_context`` (only its model matters here), and the second
    ``token_count`` of each pair. On a large rollout this halves the reading time."""
    if not raw.startswith(b'{"timestamp":"') or raw[38:48] != b'","type":"':
        return False
    kind = raw[48:62]
    if kind.startswith(b'event_msg"'):
        if not any(key in raw for key in _NEEDED_EVENTS):
            return True
        if b'"token_count"' in raw and (total := _TOTAL_RE.search(raw)) is not None:
            if total.group(1) == state.last_total_raw:
                return True
            state.last_total_raw = total.group(1)
            return _token_count_info(state, raw)
        return False
    if kind.startswith(b'turn_context"') and (model := _MODEL_RE.search(raw)) is not None:
        state.model = model.group(1).decode("utf-8", "replace")
        state.ts = raw[14:38].decode("ascii", "replace")
        state.ts = iso(state.ts) or state.ts
        return True
    return False


def read_codex(path: Path, *, lines: Iterable[bytes] | None = None) -> SourceSession:
    """Read one Codex rollout file; ``lines``: its lines already read (a followed file's
    :class:`engine.sources.follow.LineLog`)."""
    path = Path(path)
    session = SourceSession("codex", path, path.stem.removeprefix("rollout-"), project="")
    state = _State(session)
    for n, obj in read_json_lines(path, session.skipped, skip=lambda raw: _fast_path(state, raw),
                                   lines=lines):
        session.lines = n
        _line(state, n, obj)
    if state.pending_reasoning:
        _assistant(state, None)
    session.system_prompt = "\n\n".join(p for p in state.system_parts if p)
    for comp in session.compactions:
        after = next((c for c in session.calls[comp.calls_before:] if c.prompt_tokens), None)
        comp.tokens_after = after.prompt_tokens if after else None
    session.live_start = session.compactions[-1].message_index if session.compactions else 0
    models = [c.model for c in session.calls if c.model]
    session.model = models[-1] if models else state.model
    session.window = state.window
    session.window_source = "source" if state.window else ""
    session.project = Path(session.cwd).name if session.cwd else ""
    session.prefix_label = "tool definitions"
    return session
