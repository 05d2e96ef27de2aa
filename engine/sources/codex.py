"""OpenAI Codex CLI rollouts: ``${CODEX_HOME:-~/.codex}/sessions/YYYY/MM/DD/rollout-*.jsonl``.

``{timestamp, [ordinal,] type, payload}`` lines:

- ``session_meta`` (id, cwd, ``base_instructions``: the system prompt, ``{"text": ...}`` or a string;
  it is also the exact request prefix :data:`PREFIX_KEY` of every call; in code mode Codex 0.17x also writes it as
  the first developer message, as it sends it: the prefix is then the developer messages the requests open with,
  the base once), ``turn_context`` (the model of each turn); a forked subagent's rollout holds a second
  ``session_meta``, of the thread it was forked from (only the first is read);
- ``response_item``: Responses-API items, which become messages: ``message`` (user / assistant;
  ``developer`` instructions before the conversation join the system prompt), ``reasoning``
  (summary text, and encrypted content shown as such, sized by its length), ``function_call`` /
  ``function_call_output`` and ``custom_tool_call`` / ``custom_tool_call_output`` paired by
  ``call_id`` (a namespaced call named ``namespace.name``), ``web_search_call``, ``agent_message`` (a
  message between the agents of a team: a subagent's task, a subagent's answer; a user message named
  ``agent`` with ``agent_message``: author, recipient and, from the ``inter_agent_communication_metadata``
  line before it, whether it started a turn). ``additional_tools`` (Codex 0.17x in code mode: the tool
  definitions, sent as the request's first input item instead of ``tools``) are the tool definitions of the
  calls made after it, exact (each distinct set its own prefix key); without it (``tools`` sent) a rollout
  does not record them;
- ``token_usage_record`` (Codex 0.1xx and later): one per response, with its ``response_id`` and
  ``usage``: the call's figures, cache write included (``cache_write_input_tokens``; 0 stays 0);
- ``event_msg``: ``token_count`` carries ``last_token_usage`` (one call) and ``total_token_usage``
  (the running sum) and ``model_context_window``. Older versions write each one twice: a call is a
  ``token_count`` whose ``total_token_usage`` changed. ``input_tokens`` is the whole prompt and
  includes ``cached_input_tokens`` (the cache read); older files have no cache-write figure (None,
  not 0). A ``token_count`` with the figures of the ``token_usage_record`` just before it (or after
  it) is that response's, not another call (:class:`Pairing`);
- ``world_state`` (Codex 0.1xx): the environment the model is told about; its cwd is used when
  ``session_meta`` has none;
- ``compacted`` (with ``event_msg`` ``context_compacted``): a compaction whose
  ``replacement_history`` is the context after it. The file does not record what triggered it: inside a
  turn it is automatic; between turns (an automatic one before a turn's first call, or ``/compact``) it is
  "unknown";
- ``event_msg`` ``turn_aborted``: each call the interrupted turn left without an output is answered "aborted" in
  the next request (as Codex sends it; seen in a forked subagent's first request): a tool message marked so;
- ``event_msg`` ``item_completed`` of a ``SubAgentActivity`` (``spawn_agent``): the call that started a
  subagent and its thread, whose own rollout (``rollout-*-<thread id>.jsonl``, its ``session_meta``
  naming this thread as its parent) is read as the subagent's session (:mod:`engine.sources.codex_agents`).

Every record type, item type and event type is read, or left out on purpose (:mod:`engine.sources.codex_kinds`:
``IGNORED_RECORDS``, ``IGNORED_ITEMS``, ``IGNORED_EVENTS``, ``IGNORED_TURN_ITEMS``, each with its reason; counted in
``session.ignored``); any other goes to ``session.skipped``.

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
from engine.sources.codex_agents import link_subagents
from engine.sources.codex_kinds import IGNORED_EVENTS, IGNORED_ITEMS, IGNORED_RECORDS, READ_RECORDS
from engine.sources.model import (
    LINE_ERRORS,
    Compaction,
    LineBuffer,
    ProviderCall,
    RequestPrefix,
    Skipped,
    SourceChanges,
    SourceSession,
    dict_at,
    expand_redacted,
    feed_whole,
    int_or_none,
    iso,
    json_lines,
    line_problem,
    text_of,
)

PREFIX_KEY = "base_instructions"  # the key of session_meta's system prompt in SourceSession.prefixes



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
    summarising: bool = False  # the summariser's answer was read: the next call is the compaction's own
    compaction_cost: ProviderCall | None = None  # that call, for the compaction line that follows it
    pairing: Pairing = field(default_factory=lambda: Pairing())
    initial: set[str] = field(default_factory=set)  # the developer messages before the conversation (as written)
    unlike_file: str = ""  # why the next call's prompt figure counts what the rollout does not hold ("" if nothing)
    base: str | None = None  # session_meta's system prompt when the file holds it as sent (the exact prefix)
    tool_sets: list[list[dict[str, Any]]] = field(default_factory=list)  # additional_tools, each distinct set once
    prefix_key: str = ""  # the prefix of the calls made now ("" when there is no exact one)
    trigger_turn: bool | None = None  # inter_agent_communication_metadata's, for the agent_message that follows
    spawned: dict[str, tuple[str, str]] = field(default_factory=dict)  # spawn_agent call id -> (thread id, path)
    meta_read: bool = False  # the file's own session_meta was read (a later one is a forked-from thread's)
    base_alone: bool = False  # system_parts holds session_meta's base instructions only (no developer message yet)
    base_sent: bool = False  # the base went as the first developer message: the prefix is the developer messages


# Why a call's provider figure is not the rollout's history as written (ProviderCall.prompt_unlike_file).
WEB_SEARCH = ("its prompt figure includes the results of the web search it ran, which the rollout does not hold "
              "(the next request sends the search call only)")
RESUMED = ("Codex wrote the session's initial instructions again (a resumed thread) and rebuilt the request: "
           "the rollout does not hold the request as it was sent")


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


IMAGE_PART = {"type": "image_url", "image_url": {"url": "about:blank#image-not-imported"}}


def _content(parts: Any) -> str | list[dict[str, Any]]:
    """A user message's or tool output's content: its text; with an image (``input_image``), a list of parts
    in which each image is a part of its own (counted as an image, its data not imported)."""
    if not isinstance(parts, list) or not any(isinstance(p, dict) and p.get("type") == "input_image" for p in parts):
        return _text(parts)
    return [dict(IMAGE_PART) if isinstance(p, dict) and p.get("type") == "input_image" else
            {"type": "text", "text": _text([p])} for p in parts if isinstance(p, dict | str)]


def _output_text(output: Any) -> str | list[dict[str, Any]]:
    if isinstance(output, dict):  # older rollouts: {"content": ..., "success": ...}
        output = output.get("content", output)
    if isinstance(output, list):
        return _content(output)
    return expand_redacted(output) if isinstance(output, str) else str(output)


def _sent_base(text: str, base: str) -> bool:
    """Whether a first developer message is the base instructions as sent (Codex 0.17x sends no ``instructions``:
    the base goes as that message, whole, or without the lines about tools it did not send): the same text, or the
    same first 200 characters of a long one."""
    return text == base or (len(base) >= 200 and text[:200] == base[:200])


def _message_item(state: _State, payload: dict[str, Any]) -> None:
    role = payload.get("role")
    text = _text(payload.get("content"))
    if role in ("developer", "system"):
        if not state.started:
            if state.base_alone and _sent_base(text, state.system_parts[0]):
                state.system_parts[0] = text  # Codex 0.17x sends the base instructions as this first message
                state.base_sent = True
            else:
                state.system_parts.append(text)
            state.base_alone = False
            state.initial.add(text)
        else:
            if text in state.initial and not state.unlike_file and state.session.calls:
                state.unlike_file = RESUMED  # (before the thread's first call: a forked subagent's own instructions)
            _add(state, {"role": "user", "name": "developer", "content": text})
    elif role == "assistant":
        _mark_output(state)
        _assistant(state, text)
        state.started = True
    elif role == "user":
        _add(state, {"role": "user", "content": _content(payload.get("content"))})
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
        name, namespace = str(payload.get("name") or ""), payload.get("namespace")
        name = f"{namespace}.{name}" if isinstance(namespace, str) and namespace else name
        _tool_call(state, str(payload.get("call_id") or ""), name, args_text)
        state.started = True
    elif kind in ("function_call_output", "custom_tool_call_output"):
        _add(state, {"role": "tool", "tool_call_id": str(payload.get("call_id") or ""),
                     "content": _output_text(payload.get("output"))})
    elif kind == "additional_tools":
        _additional_tools(state, payload)
    elif kind == "agent_message":
        _agent_message(state, payload)
    elif kind in ("web_search_call", "local_shell_call"):
        _mark_output(state)
        if kind == "web_search_call" and n > 0:  # run by the provider inside this response (not a replayed item)
            state.unlike_file = WEB_SEARCH
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
    elif isinstance(kind, str) and kind in IGNORED_ITEMS:
        if n > 0:  # a line of its own (not an item of a compaction's replacement history)
            state.session.ignore(f"response_item/{kind}")
    else:
        state.session.skipped.append(Skipped(n, f"response item type {kind!r} is not one this reader knows"))


def tools_key(index: int) -> str:
    """The prefix key of the ``index``-th distinct tool set of a rollout (the first is :data:`PREFIX_KEY`)."""
    return PREFIX_KEY if index == 0 else f"{PREFIX_KEY}#{index + 1}"


def _set_prefixes(state: _State) -> None:
    """The exact prefixes: the system prompt as sent with each tool set (none: without tool definitions)."""
    if state.base is None:
        return
    for i, tools in enumerate(state.tool_sets or [[]]):
        state.session.prefixes[tools_key(i)] = RequestPrefix(tools_key(i), state.base, list(tools))
    state.prefix_key = state.prefix_key or PREFIX_KEY


def _additional_tools(state: _State, payload: dict[str, Any]) -> None:
    """The tool definitions sent as an input item (code mode): those of the calls made from now on."""
    raw = payload.get("tools")
    tools = [t for t in raw if isinstance(t, dict)] if isinstance(raw, list) else []
    if tools not in state.tool_sets:
        state.tool_sets.append(tools)
    state.prefix_key = tools_key(state.tool_sets.index(tools)) if state.base is not None else ""
    _set_prefixes(state)


def _agent_text(content: Any) -> str:
    """An agent message's text: its text parts, its encrypted parts shown as such (sized by their length)."""
    parts = []
    for part in content if isinstance(content, list) else [content]:
        enc = part.get("encrypted_content") if isinstance(part, dict) else None
        if isinstance(enc, str):
            size = _encrypted_size(enc)
            head = f"[encrypted content: {size} characters]"
            parts.append(head + " " + "." * max(0, size - len(head) - 1))
        elif isinstance(part, dict | str):
            parts.append(expand_redacted(text_of([part])))
    return "\n".join(p for p in parts if p)


def _agent_message(state: _State, payload: dict[str, Any]) -> None:
    """A message between the agents of a team, input to the recipient's next call."""
    msg = _add(state, {"role": "user", "name": "agent", "content": _agent_text(payload.get("content"))})
    meta: dict[str, Any] = {"author": str(payload.get("author") or ""),
                            "recipient": str(payload.get("recipient") or "")}
    if state.trigger_turn is not None:
        meta["trigger_turn"] = state.trigger_turn
        state.trigger_turn = None
    msg["agent_message"] = meta
    state.started = True


def _call(usage: dict[str, Any], *, index: int, model: str, ts: str, window: int | None, message_index: int,
          request_id: str = "") -> ProviderCall:
    return ProviderCall(
        index=index, prompt_tokens=int_or_none(usage.get("input_tokens")),
        completion_tokens=int_or_none(usage.get("output_tokens")),
        cache_read_tokens=int_or_none(usage.get("cached_input_tokens")),
        cache_write_tokens=int_or_none(usage.get("cache_write_input_tokens")),
        model=model, ts=ts, window=window, message_index=message_index, request_id=request_id,
        reasoning_tokens=int_or_none(usage.get("reasoning_output_tokens")))


def call_from_usage(info: dict[str, Any], *, index: int, model: str, ts: str, window: int | None,
                    message_index: int = 0) -> ProviderCall:
    """The provider call a ``token_count`` event's ``last_token_usage`` reports: its prompt includes
    the cached part (cache read); the cache write where the file gives it (newer versions), else None
    (not 0)."""
    return _call(dict_at(info, "last_token_usage"), index=index, model=model, ts=ts, window=window,
                 message_index=message_index)


def call_from_record(payload: dict[str, Any], *, index: int, model: str, ts: str, window: int | None,
                     message_index: int = 0) -> ProviderCall | None:
    """The provider call a ``token_usage_record`` reports (None when it has no ``usage``): the prompt
    includes the cached part, the cache write is the file's (0 stays 0), ``request_id`` is the
    response's id."""
    usage = dict_at(payload, "usage")
    if not usage:
        return None
    return _call(usage, index=index, model=model, ts=ts, window=window, message_index=message_index,
                 request_id=str(payload.get("response_id") or ""))


def _figures(call: ProviderCall) -> tuple[int | None, int | None, int | None]:
    return call.prompt_tokens, call.cache_read_tokens, call.completion_tokens


@dataclass
class Pairing:
    """One response, two lines: newer Codex writes a ``token_usage_record`` and a ``token_count`` for
    each response (the record first). The call one of them made waits here until the other comes: when
    the other has the same figures (prompt, cache read, output) it is that call's, not another call."""

    from_record: ProviderCall | None = None  # a call a record made, its token_count not seen yet
    from_count: ProviderCall | None = None  # a call a token_count made, its record not seen yet

    def record(self, call: ProviderCall) -> ProviderCall | None:
        """The earlier call (from a ``token_count``) that ``call`` is, now with the record's figures
        (request id, cache write, reasoning); None when ``call`` is a new one."""
        prev, self.from_count = self.from_count, None
        if prev is not None and _figures(prev) == _figures(call):
            prev.request_id = call.request_id or prev.request_id
            prev.cache_write_tokens = call.cache_write_tokens if call.cache_write_tokens is not None \
                else prev.cache_write_tokens
            prev.reasoning_tokens = call.reasoning_tokens if call.reasoning_tokens is not None \
                else prev.reasoning_tokens
            return prev
        self.from_record = call
        return None

    def count(self, call: ProviderCall) -> ProviderCall | None:
        """The earlier call (from a ``token_usage_record``) that this ``token_count``'s ``call`` is (its
        window filled in when it had none); None when ``call`` is a new one."""
        prev, self.from_record = self.from_record, None
        if prev is not None and _figures(prev) == _figures(call):
            prev.window = prev.window if prev.window is not None else call.window
            return prev
        self.from_count = call
        return None


@dataclass(frozen=True)
class TokenCount:
    """A ``token_count`` event as both readers (the full one and the follower) take it."""

    info: dict[str, Any]
    window: int | None  # ``model_context_window``, when given
    total: Any  # ``total_token_usage``: what tells a new call from a repeat
    new: bool  # False for the second of Codex's duplicated pair (same total): not another call


def same_total(total: Any, last_total: Any) -> bool:
    """Whether two ``total_token_usage`` values are the same (the second of Codex's duplicated pair): equal, or
    written the same (a NaN in both is never ``==`` itself, but is the same repeat)."""
    if total == last_total:
        return True
    if not _holds_nan(total):  # written the same but not equal: only a NaN (never == itself) makes that so
        return False
    try:
        return json.dumps(total, sort_keys=True) == json.dumps(last_total, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        return False


def _holds_nan(value: Any) -> bool:
    """Whether ``value`` (a decoded JSON value) holds a NaN anywhere."""
    if isinstance(value, float):
        return value != value
    if isinstance(value, dict):
        return any(_holds_nan(v) for v in value.values())
    if isinstance(value, list):
        return any(_holds_nan(v) for v in value)
    return False


def read_token_count(payload: dict[str, Any], last_total: Any) -> TokenCount | None:
    """The ``token_count`` payload's usage (None when it has none); ``new`` is False when its total
    equals the last one seen — Codex writes each call's event twice."""
    info = payload.get("info")
    if not isinstance(info, dict):
        return None
    total = info.get("total_token_usage")
    return TokenCount(info, int_or_none(info.get("model_context_window")), total,
                      not same_total(total, last_total))


def _token_count(state: _State, payload: dict[str, Any]) -> None:
    count = read_token_count(payload, state.last_total)
    if count is None:
        return
    state.window = count.window or state.window
    if not count.new:
        return
    state.last_total = count.total
    session = state.session
    start = state.response_start if state.response_start is not None else len(session.messages)
    call = call_from_usage(count.info, index=len(session.calls), model=state.model, ts=state.ts,
                           window=state.window, message_index=start)
    if state.pairing.count(call) is None:
        _take_call(state, call)


def _token_usage_record(state: _State, n: int, payload: dict[str, Any]) -> None:
    session = state.session
    start = state.response_start if state.response_start is not None else len(session.messages)
    call = call_from_record(payload, index=len(session.calls), model=state.model, ts=state.ts,
                            window=state.window, message_index=start)
    if call is None:
        session.skipped.append(Skipped(n, "a token_usage_record without usage"))
        return
    if state.pairing.record(call) is None:
        _take_call(state, call)


def _take_call(state: _State, call: ProviderCall) -> None:
    """A new call: one of the conversation's, or the summarisation of a compaction (its cost)."""
    if state.summarising:
        call.index = -1
        state.compaction_cost = call
        state.summarising = False
        return
    call.prompt_unlike_file, state.unlike_file = state.unlike_file, ""
    call.prefix_key = state.prefix_key
    call.prompt_transient = call.prompt_unlike_file == WEB_SEARCH
    state.session.calls.append(call)
    state.response_start = None
    state.turn_open = True
    state.compaction_pending = False


def _world_state(state: _State, payload: dict[str, Any]) -> None:
    """The environment the model is told about: its cwd stands in for a missing session_meta cwd (the
    rest — skills, permissions, date — reaches the model as the developer and user messages read)."""
    envs = dict_at(dict_at(dict_at(payload, "state"), "environments"), "environments")
    for env in envs.values():
        cwd = env.get("cwd") if isinstance(env, dict) else None
        if isinstance(cwd, str) and cwd and not state.session.cwd:
            state.session.cwd = cwd


def _compacted(state: _State, payload: dict[str, Any]) -> None:
    session = state.session
    before = next((c.prompt_tokens for c in reversed(session.calls) if c.prompt_tokens), None)
    summary = _text(str(payload.get("message") or ""))
    comp = Compaction(
        index=len(session.compactions), trigger="auto" if state.turn_open else "unknown",
        trigger_source="inferred: mid-turn" if state.turn_open else NOT_RECORDED,
        ts=state.ts, message_index=len(session.messages), calls_before=len(session.calls),
        tokens_before=before, summary="" if summary.startswith("[redacted: 0 ") else summary,
        cost=state.compaction_cost)
    state.compaction_cost = None
    session.compactions.append(comp)
    state.response_start = None
    state.pending_reasoning.clear()
    history = payload.get("replacement_history")
    unlike = state.unlike_file
    for item in history if isinstance(history, list) else []:
        if isinstance(item, dict):
            _response_item(state, 0, item)
    state.unlike_file = unlike  # the instructions a replacement history repeats are the compaction's, not a resume
    state.response_start = None  # the replacement is input to the next call, not its output
    state.pending_reasoning.clear()
    comp.messages_after = len(session.messages) - comp.message_index
    state.compaction_pending = True


NOT_RECORDED = "not recorded (between turns: automatic before the turn's first call, or /compact)"


def _item_completed(state: _State, payload: dict[str, Any]) -> None:
    """A finished turn item: a SubAgentActivity is read (a started subagent's thread), the others ignored."""
    item = dict_at(payload, "item")
    if item.get("type") != "SubAgentActivity":
        state.session.ignore("event_msg/item_completed")
        return
    thread, call_id = item.get("agent_thread_id"), item.get("id")
    if item.get("kind") == "started" and isinstance(thread, str) and thread and isinstance(call_id, str):
        state.spawned[call_id] = (thread, str(item.get("agent_path") or ""))


ABORTED = "aborted"  # the output Codex sends for a call an interrupted turn left without one


def _turn_aborted(state: _State) -> None:
    """An interrupted turn: each call it left without an output is answered "aborted" in the next request (as
    Codex sends it; the rollout holds no such item): a tool message marked ``codex_aborted``."""
    answered = {m.get("tool_call_id") for m in state.session.messages if m["role"] == "tool"}
    for msg in list(state.session.messages):
        for call in msg.get("tool_calls") or []:
            if call.get("id") not in answered:
                _add(state, {"role": "tool", "tool_call_id": call["id"], "content": ABORTED, "codex_aborted": True})


def _line(state: _State, n: int, obj: dict[str, Any]) -> None:
    kind = obj.get("type") if isinstance(obj.get("type"), str) else repr(obj.get("type"))
    payload = dict_at(obj, "payload")
    state.ts = iso(obj.get("timestamp")) or state.ts
    session = state.session
    if state.ts:
        session.started = session.started or state.ts
        session.last_activity = state.ts
    if kind in IGNORED_RECORDS:
        session.ignore(kind)
    elif kind not in READ_RECORDS:
        session.skipped.append(Skipped(n, f"record type {kind!r} is not one this reader knows"))
    elif kind == "session_meta":
        if state.meta_read:  # a forked subagent's rollout then holds the meta of the thread it was forked from
            return
        state.meta_read = True
        session.session_id = str(payload.get("id") or session.session_id)
        session.cwd = str(payload.get("cwd") or session.cwd)
        text = base_instructions(payload)
        if text:
            shown = expand_redacted(text)
            state.system_parts.insert(0, shown)
            state.base_alone = len(state.system_parts) == 1
            if shown == text:  # the text itself, not a publisher's stand-in: the exact prefix
                state.base = text
                _set_prefixes(state)
    elif kind == "token_usage_record":
        _token_usage_record(state, n, payload)
    elif kind == "world_state":
        _world_state(state, payload)
    elif kind == "turn_context":
        state.model = str(payload.get("model") or state.model)
    elif kind == "inter_agent_communication_metadata":
        trigger = payload.get("trigger_turn")
        state.trigger_turn = trigger if isinstance(trigger, bool) else None
    elif kind == "response_item":
        if dict_at(obj, "metadata").get("compaction_output") is True:
            # the summariser's answer in a local compaction: not part of the conversation; its text is
            # the compacted line's summary, and the call that follows it is the compaction's cost
            state.summarising = True
            session.ignore("response_item/compaction_output")
        else:
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
        elif etype == "context_compacted":
            if not state.compaction_pending:
                _compacted(state, {})  # a compaction announced without its ``compacted`` line
        elif etype == "item_completed":
            _item_completed(state, payload)
        elif etype == "turn_aborted":
            _turn_aborted(state)
        elif isinstance(etype, str) and etype in IGNORED_EVENTS:
            session.ignore(f"event_msg/{etype}")
        else:
            session.skipped.append(Skipped(n, f"event type {etype!r} is not one this reader knows"))


def base_instructions(payload: dict[str, Any]) -> str:
    """``session_meta``'s system prompt: ``base_instructions`` as ``{"text": ...}`` or a string ("" if none)."""
    base = payload.get("base_instructions")
    text = base.get("text") if isinstance(base, dict) else base
    return text if isinstance(text, str) else ""


_NEEDED_EVENTS = (b'"token_count"', b'"task_started"', b'"context_compacted"', b'"SubAgentActivity"')
_MODEL_RE = re.compile(rb'"model":"([^"\\]{1,200})"')
_RAW_DECODE = json.JSONDecoder(strict=False).raw_decode  # as json_lines reads a line (raw control characters)
_TOTAL_RE = re.compile(rb'"total_token_usage":(\{[^{}]*\})')
# a compact line's head: its timestamp, then (Codex 0.1xx) its ordinal, then its type
_HEAD_RE = re.compile(rb'\{"timestamp":"([^"]{1,40})",(?:"ordinal":\d+,)?"type":"(\w{1,40})"')
_PAYLOAD_TYPE_RE = re.compile(rb',"payload":\{"type":"(\w{1,60})"')


def _token_count_info(state: _State, raw: bytes, stamp: bytes) -> bool:
    """A new ``token_count``: parse only its ``info`` object (not the rate limits after it)."""
    at = raw.find(b'"info":{')
    if at < 0:
        return False
    try:
        info, _ = _RAW_DECODE(raw[at + 7:].decode("utf-8"))
    except (ValueError, RecursionError):
        return False  # read in full (and skipped there with the reason)
    if not isinstance(info, dict):
        return False
    ts = iso(stamp.decode("ascii", "replace"))
    if ts:
        state.ts = ts
        state.session.last_activity = ts
    _token_count(state, {"info": info})
    return True


def _fast_path(state: _State, raw: bytes) -> bool:
    """Handle, from its bytes, a compact line that needs no parsing (True when handled): event lines
    that only echo a response item (counted as ignored), ``turn_context`` (only its model matters
    here), and the second ``token_count`` of each pair. On a large rollout this halves the reading time."""
    head = _HEAD_RE.match(raw)
    if head is None:
        return False
    stamp, kind = head.group(1), head.group(2)
    if kind == b"event_msg":
        if not any(key in raw for key in _NEEDED_EVENTS):
            etype = _PAYLOAD_TYPE_RE.match(raw, head.end())
            name = etype.group(1).decode("ascii") if etype is not None else ""
            if name in IGNORED_EVENTS:
                state.session.ignore(f"event_msg/{name}")
                return True
            return False  # read in full: unknown (or not in this compact form)
        if b'"token_count"' in raw and (total := _TOTAL_RE.search(raw)) is not None:
            if total.group(1) == state.last_total_raw:
                return True
            state.last_total_raw = total.group(1)
            return _token_count_info(state, raw, stamp)
        return False
    if kind == b"turn_context" and (model := _MODEL_RE.search(raw)) is not None:
        state.model = model.group(1).decode("utf-8", "replace")
        ts = stamp.decode("ascii", "replace")
        state.ts = iso(ts) or ts
        return True
    return False


def _fast_path_or_none(state: _State, raw: bytes) -> bool:
    """:func:`_fast_path`, or False (the line read in full, and skipped there with the reason) when a field of the
    line is of a shape it does not expect."""
    try:
        return _fast_path(state, raw)
    except LINE_ERRORS:
        return False


def _figures_of(call: ProviderCall) -> tuple[Any, ...]:
    return (call.prompt_tokens, call.completion_tokens, call.cache_read_tokens, call.cache_write_tokens,
            call.reasoning_tokens, call.request_id)


class CodexReader:
    """The incremental reader of one Codex rollout: bytes (or complete lines) in, :class:`SourceChanges`
    out. A rollout only grows at its end: each line is read once, as it comes; the messages a feed may
    change are those of the response in progress (a tool call joins its assistant message, reasoning waits
    for the message it belongs to) and the last compaction (its summary item follows it)."""

    def __init__(self, path: Path, depth: int = 0) -> None:
        self.path = Path(path)
        self.depth = depth  # how deep a subagent this rollout is (0: a session of its own)
        self._notes_mark: int | None = None  # session.notes before the subagents were linked
        self.session = SourceSession("codex", self.path, self.path.stem.removeprefix("rollout-"), project="",
                                     prefix_label="tool definitions")
        self.state = _State(self.session)
        self._buffer = LineBuffer()

    def feed(self, data: bytes) -> SourceChanges:
        """Take appended bytes; a partial last line is kept until its newline arrives."""
        return self.feed_lines(self._buffer.lines(data))

    def feed_lines(self, lines: Iterable[bytes]) -> SourceChanges:
        """Take complete lines (each ending with its newline; a last one without it is read as torn)."""
        session, state = self.session, self.state
        old_messages, old_calls, old_comps = len(session.messages), len(session.calls), len(session.compactions)
        touched = state.response_start if state.response_start is not None else old_messages
        before = [_figures_of(c) for c in session.calls]
        for n, obj in json_lines(self._buffer.counted(lines), session.skipped,
                                 skip=lambda raw: _fast_path_or_none(state, raw), start=self._buffer.count + 1):
            session.lines = n
            try:
                _line(state, n, obj)
            except LINE_ERRORS as exc:  # a field of a shape never seen: this line skipped, said
                session.skipped.append(line_problem(n, exc))
        session.lines = self._buffer.count
        self._derive()
        return SourceChanges(
            messages_from=min(old_messages, touched),
            calls_from=old_calls,
            calls_updated=[i for i, figures in enumerate(before) if _figures_of(session.calls[i]) != figures],
            compactions_from=max(0, old_comps - 1) if old_comps else 0,
            subagents_from=len(session.subagents))

    def finish(self) -> SourceSession:
        """The whole session: a torn last line read as such, reasoning still waiting for its message kept."""
        if pending := self._buffer.rest():
            self.feed_lines([pending])
        if self.state.pending_reasoning:
            _assistant(self.state, None)
        self._derive()
        return self.session

    def read_beside(self, *, subagents: bool = True) -> SourceSession:
        """The rollouts of the subagents this one spawned (:mod:`engine.sources.codex_agents`), read again: a
        followed session gains them as it goes. The lines already fed are not read again."""
        session = self.session
        if self._notes_mark is None:
            self._notes_mark = len(session.notes)
        del session.notes[self._notes_mark:]
        session.subagents.clear()
        for msg in session.messages:
            msg.pop("subagent", None)
        if subagents:
            link_subagents(session, self.state.spawned, self.depth, lambda path, depth: read_codex(path, depth=depth))
        return session

    def _derive(self) -> None:
        session, state = self.session, self.state
        session.system_prompt = "\n\n".join(p for p in state.system_parts if p)
        if state.base_sent:  # what the requests open with: the developer messages as sent (the base among them)
            for prefix in session.prefixes.values():
                prefix.system = session.system_prompt
        for comp in session.compactions:
            after = next((c for c in session.calls[comp.calls_before:] if c.prompt_tokens), None)
            comp.tokens_after = after.prompt_tokens if after else None
        session.live_start = session.compactions[-1].message_index if session.compactions else 0
        models = [c.model for c in session.calls if c.model]
        session.model = models[-1] if models else state.model
        session.window = state.window
        session.window_source = "source" if state.window else ""
        session.project = Path(session.cwd).name if session.cwd else ""


def read_codex(path: Path, *, lines: Iterable[bytes] | None = None, subagents: bool = True,
               depth: int = 0) -> SourceSession:
    """Read one Codex rollout file (and, with ``subagents``, the rollouts of the subagents it spawned);
    ``lines``: its lines already read (kept by the caller)."""
    reader = CodexReader(Path(path), depth)
    feed_whole(reader, reader.path, lines)
    reader.finish()
    return reader.read_beside(subagents=subagents)
