"""A capture of the recording proxy (:mod:`engine.capture`) read as a session: every provider call exact, from
the request itself.

Each finished exchange to a model endpoint — Anthropic Messages (``/v1/messages``), OpenAI Chat Completions,
the OpenAI Responses API, the Gemini API (``:generateContent`` / ``:streamGenerateContent``) — is one
:class:`ProviderCall` whose

- ``input_messages`` are the request's messages (converted to OpenAI chat format, tool calls and results
  paired), so the history region of the call is what was sent;
- ``prefix_key`` names a :class:`RequestPrefix` holding the request's system prompt and each tool definition as
  sent (``prefix_source`` *file*: exact, never inferred);
- ``max_tokens`` is the request's output reserve; the usage is the response's own (reassembled from the stream);
- ``cache_breakpoints`` (Anthropic Messages): where the request put ``cache_control`` (:func:`cache_breakpoints`).

The conversation (``messages``) follows the agent's main thread — the requests that carry tools: a request
that continues the one before adds the messages it adds, and the answer; a request whose messages no longer
begin with the conversation so far replaced it (a compaction: what was before is archived). Requests without
tools (titles, summaries, quota checks) are calls of their own, with their exact input, and add no messages.
Count-tokens and other requests are counted in ``ignored``.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from engine.model.messages import Message
from engine.sources.model import (
    LINE_ERRORS,
    Compaction,
    IdMaker,
    LineBuffer,
    ProviderCall,
    RequestPrefix,
    Skipped,
    SourceChanges,
    SourceSession,
    int_or_none,
    json_args,
    json_lines,
    line_problem,
    open_regular,
    text_of,
)
from engine.sources.tail import Tail, appended_blocks

GENERATION = ("anthropic", "openai-chat", "openai-responses", "gemini")


def is_capture_line(obj: dict[str, Any]) -> bool:
    """A capture's header or exchange line."""
    kind = obj.get("type")
    if kind == "capture":
        return isinstance(obj.get("version"), int) and "id" in obj
    return kind == "exchange" and isinstance(obj.get("request"), dict) and "seq" in obj


def _json(text: Any) -> Any:
    if not isinstance(text, str):
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


def _no_cache_control(tool: Any) -> dict[str, Any]:
    return {k: v for k, v in tool.items() if k != "cache_control"} if isinstance(tool, dict) else {"tool": tool}


# --------------------------------------------------------------------------- requests, per family


def _anthropic_system(system: Any) -> str:
    if isinstance(system, str):
        return system
    return "\n\n".join(b["text"] for b in system if isinstance(b, dict) and isinstance(b.get("text"), str)) \
        if isinstance(system, list) else ""


def _anthropic_messages(items: Any, new: IdMaker, ts: str) -> list[Message]:
    out: list[Message] = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        role, content = item.get("role"), item.get("content")
        extra: dict[str, Any] = {}
        if role not in ("user", "assistant"):  # Claude Code 2.1.3xx sends its environment as a "system" message
            role, extra = "user", {"attachment": str(role)}
        if isinstance(content, str):
            out.append({"role": role, "content": content, "id": new(), "ts": ts, **extra})
            continue
        blocks = content if isinstance(content, list) else []
        texts, calls, thinking = [], [], []
        for b in blocks:
            if not isinstance(b, dict):
                continue
            kind = b.get("type")
            if kind == "text":
                texts.append(str(b.get("text") or ""))
            elif kind in ("tool_use", "server_tool_use"):
                calls.append({"id": str(b.get("id") or ""), "type": "function", "function": {
                    "name": str(b.get("name") or ""), "arguments": json_args(b.get("input", {}))}})
            elif kind == "tool_result":
                if texts:
                    out.append({"role": role, "content": "\n".join(texts), "id": new(), "ts": ts})
                    texts = []
                result = b.get("content")
                text = result if isinstance(result, str) else _blocks_text(result)
                out.append({"role": "tool", "tool_call_id": str(b.get("tool_use_id") or ""), "content": text,
                            "id": new(), "ts": ts})
            elif kind in ("thinking", "redacted_thinking"):
                thinking.append(str(b.get("thinking") or b.get("data") or ""))
            elif kind in ("image", "document"):
                texts.append(f"[{kind}]")
        if texts or calls or thinking or not blocks:
            msg: Message = {"role": role, "content": "\n".join(texts) if texts else (None if calls else ""),
                            "id": new(), "ts": ts, **extra}
            if calls:
                msg["tool_calls"] = calls
            if thinking:
                msg["reasoning_content"] = "\n".join(thinking)
            out.append(msg)
    return out


def _blocks_text(blocks: Any) -> str:
    if not isinstance(blocks, list):
        return "" if blocks is None else str(blocks)
    parts = []
    for b in blocks:
        if isinstance(b, dict) and isinstance(b.get("text"), str):
            parts.append(b["text"])
        elif isinstance(b, dict) and b.get("type") in ("image", "document"):
            parts.append(f"[{b['type']}]")
    return "\n".join(parts)


def _chat_messages(items: Any, new: IdMaker, ts: str) -> tuple[str, list[Message]]:
    system: list[str] = []
    out: list[Message] = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        if item.get("role") in ("system", "developer") and not out:
            system.append(text_of(item.get("content")))
            continue
        msg: Message = {k: item[k] for k in ("role", "content", "tool_calls", "tool_call_id", "name",
                                             "reasoning_content") if k in item}
        if msg.get("role") not in ("user", "assistant", "tool"):
            msg["attachment"] = str(msg.get("role"))
            msg["role"] = "user"
        if isinstance(msg.get("content"), list):
            msg["content"] = text_of(msg["content"])
        msg.update(id=new(), ts=ts)
        out.append(msg)
    return "\n\n".join(system), out


def _responses_messages(body: dict[str, Any], new: IdMaker, ts: str) -> tuple[str, list[Message]]:
    system = [body["instructions"]] if isinstance(body.get("instructions"), str) else []
    items = body.get("input")
    if isinstance(items, str):
        return "\n\n".join(system), [{"role": "user", "content": items, "id": new(), "ts": ts}]
    out: list[Message] = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type") or ("message" if "role" in item else "")
        if kind == "message":
            role = item.get("role")
            if role in ("system", "developer") and not out:
                system.append(text_of(item.get("content")))
                continue
            msg = {"role": role, "content": text_of(item.get("content")), "id": new(), "ts": ts}
            if role not in ("user", "assistant"):
                msg.update(role="user", attachment=str(role))
            out.append(msg)
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            call = {"id": str(item.get("call_id") or item.get("id") or ""), "type": "function", "function": {
                "name": str(item.get("name") or kind), "arguments": json_args(
                    item.get("arguments") if "arguments" in item else item.get("input", item.get("action", "")))}}
            if out and out[-1]["role"] == "assistant" and not out[-1].get("content"):
                out[-1].setdefault("tool_calls", []).append(call)
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call], "id": new(), "ts": ts})
        elif kind in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
            output = item.get("output")
            out.append({"role": "tool", "tool_call_id": str(item.get("call_id") or ""),
                        "content": output if isinstance(output, str) else json_args(output), "id": new(), "ts": ts})
        elif kind == "reasoning":
            summary = text_of(item.get("summary"))
            if summary:
                out.append({"role": "assistant", "content": None, "reasoning_content": summary, "id": new(),
                            "ts": ts})
    return "\n\n".join(system), out


def _gemini_messages(contents: Any, new: IdMaker, ts: str) -> list[Message]:
    out: list[Message] = []
    for content in contents if isinstance(contents, list) else []:
        if not isinstance(content, dict):
            continue
        role = "assistant" if content.get("role") == "model" else "user"
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        thoughts: list[str] = []
        for part in content.get("parts") or []:
            if not isinstance(part, dict):
                continue
            if isinstance(part.get("text"), str):
                (thoughts if part.get("thought") else texts).append(part["text"])
            elif isinstance(part.get("functionCall"), dict):
                fn = part["functionCall"]
                calls.append({"id": str(fn.get("id") or fn.get("name") or ""), "type": "function", "function": {
                    "name": str(fn.get("name") or ""), "arguments": json_args(fn.get("args", {}))}})
            elif isinstance(part.get("functionResponse"), dict):
                fr = part["functionResponse"]
                if texts:
                    out.append({"role": role, "content": "\n".join(texts), "id": new(), "ts": ts})
                    texts = []
                out.append({"role": "tool", "tool_call_id": str(fr.get("id") or fr.get("name") or ""),
                            "name": str(fr.get("name") or ""), "content": json_args(fr.get("response")),
                            "id": new(), "ts": ts})
            elif part.get("inlineData") or part.get("fileData"):
                texts.append("[file]")
        if texts or calls or thoughts:
            msg: Message = {"role": role, "content": "\n".join(texts) if texts else None, "id": new(), "ts": ts}
            if calls:
                msg["tool_calls"] = calls
            if thoughts:
                msg["reasoning_content"] = "\n".join(thoughts)
            out.append(msg)
    return out


def _gemini_tools(tools: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for group in tools if isinstance(tools, list) else []:
        if not isinstance(group, dict):
            continue
        decls = group.get("functionDeclarations") or group.get("function_declarations")
        if isinstance(decls, list):
            out += [d for d in decls if isinstance(d, dict)]
        else:
            out.append(group)  # a built-in tool (googleSearch, codeExecution): as sent
    return out


def request_parts(family: str, body: dict[str, Any], new: IdMaker, ts: str
                  ) -> tuple[str, list[dict[str, Any]], list[Message], int | None, str]:
    """(system prompt, tool definitions, messages, max_tokens, model) of a request body."""
    if family == "anthropic":
        tools = [_no_cache_control(t) for t in body.get("tools") or []]
        return (_anthropic_system(body.get("system")), tools, _anthropic_messages(body.get("messages"), new, ts),
                int_or_none(body.get("max_tokens")), str(body.get("model") or ""))
    if family == "openai-chat":
        system, msgs = _chat_messages(body.get("messages"), new, ts)
        return (system, list(body.get("tools") or []), msgs,
                int_or_none(body.get("max_completion_tokens") or body.get("max_tokens")), str(body.get("model") or ""))
    if family == "openai-responses":
        system, msgs = _responses_messages(body, new, ts)
        return (system, list(body.get("tools") or []), msgs, int_or_none(body.get("max_output_tokens")),
                str(body.get("model") or ""))
    system_text = _blocks_text((body.get("systemInstruction") or body.get("system_instruction") or {}).get("parts"))
    config = body.get("generationConfig") or {}
    return (system_text, _gemini_tools(body.get("tools")), _gemini_messages(body.get("contents"), new, ts),
            int_or_none(config.get("maxOutputTokens")) if isinstance(config, dict) else None, "")


# --------------------------------------------------------------------------- responses, per family


def response_messages(family: str, message: Any, new: IdMaker, ts: str) -> list[Message]:
    """The answer of a call as chat-format messages (the reassembled stream or the JSON answer)."""
    if not isinstance(message, dict):
        return []
    if family == "anthropic":
        return _anthropic_messages([{"role": "assistant", "content": message.get("content") or []}], new, ts)
    if family == "openai-chat":
        choice = next(iter(message.get("choices") or []), None)
        msg = choice.get("message") if isinstance(choice, dict) else None
        return _chat_messages([msg], new, ts)[1] if isinstance(msg, dict) else []
    if family == "openai-responses":
        out: list[Message] = []
        for item in message.get("output") or []:
            if isinstance(item, dict) and item.get("type") == "message":
                out.append({"role": "assistant", "content": text_of(item.get("content")), "id": new(), "ts": ts})
            elif isinstance(item, dict):
                out += _responses_messages({"input": [item]}, new, ts)[1]
        merged: list[Message] = []
        for msg in out:  # an answer's text and calls in one assistant message
            if merged and merged[-1]["role"] == msg["role"] == "assistant" and msg.get("tool_calls") and \
                    not merged[-1].get("tool_calls"):
                merged[-1]["tool_calls"] = msg["tool_calls"]
            else:
                merged.append(msg)
        return merged
    cand = next(iter(message.get("candidates") or []), None)
    return _gemini_messages([cand.get("content")], new, ts) if isinstance(cand, dict) and isinstance(
        cand.get("content"), dict) else []


def _sub(obj: dict[str, Any], key: str) -> dict[str, Any]:
    value = obj.get(key)
    return value if isinstance(value, dict) else {}


def call_usage(family: str, usage: Any) -> dict[str, int | None]:
    """prompt (whole, cached part included), completion, cache read / write, reasoning from a usage object."""
    u: dict[str, Any] = usage if isinstance(usage, dict) else {}
    if family == "anthropic":
        parts = [int_or_none(u.get(k)) for k in ("input_tokens", "cache_creation_input_tokens",
                                                  "cache_read_input_tokens")]
        creation = _sub(u, "cache_creation")
        return {"prompt": sum(p or 0 for p in parts) if parts[0] is not None else None,
                "completion": int_or_none(u.get("output_tokens")), "cache_read": (parts[2] or 0) if u else None,
                "cache_write": (parts[1] or 0) if u else None, "reasoning": None,
                "cache_write_1h": int_or_none(creation.get("ephemeral_1h_input_tokens"))}
    if family == "openai-chat":
        details = _sub(u, "prompt_tokens_details")
        out_details = _sub(u, "completion_tokens_details")
        return {"prompt": int_or_none(u.get("prompt_tokens")), "completion": int_or_none(u.get("completion_tokens")),
                "cache_read": int_or_none(details.get("cached_tokens")), "cache_write": None,
                "reasoning": int_or_none(out_details.get("reasoning_tokens")), "cache_write_1h": None}
    if family == "openai-responses":
        details = _sub(u, "input_tokens_details")
        out_details = _sub(u, "output_tokens_details")
        return {"prompt": int_or_none(u.get("input_tokens")), "completion": int_or_none(u.get("output_tokens")),
                "cache_read": int_or_none(details.get("cached_tokens")), "cache_write": None,
                "reasoning": int_or_none(out_details.get("reasoning_tokens")), "cache_write_1h": None}
    return {"prompt": int_or_none(u.get("promptTokenCount")), "completion": int_or_none(u.get("candidatesTokenCount")),
            "cache_read": int_or_none(u.get("cachedContentTokenCount")) if u else None, "cache_write": None,
            "reasoning": int_or_none(u.get("thoughtsTokenCount")), "cache_write_1h": None}


def cache_breakpoints(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Where an Anthropic Messages request marks its prompt cache (``cache_control``), in the order the provider reads
    the prompt (tools, system, messages): each with its place (``in``, ``index``; a content ``block``; the tool's
    ``name``, the message's ``role``) and ``ttl`` ("5m" when the marker names none)."""
    out: list[dict[str, Any]] = []

    def ttl(block: dict[str, Any]) -> str:
        control = block.get("cache_control")
        value = control.get("ttl") if isinstance(control, dict) else None
        return value if isinstance(value, str) and value else "5m"

    tools = body.get("tools")
    for i, tool in enumerate(tools if isinstance(tools, list) else []):
        if isinstance(tool, dict) and tool.get("cache_control"):
            out.append({"in": "tools", "index": i, "name": str(tool.get("name") or ""), "ttl": ttl(tool)})
    system = body.get("system")
    for i, block in enumerate(system if isinstance(system, list) else []):
        if isinstance(block, dict) and block.get("cache_control"):
            out.append({"in": "system", "index": i, "ttl": ttl(block)})
    messages = body.get("messages")
    for i, msg in enumerate(messages if isinstance(messages, list) else []):
        content = msg.get("content") if isinstance(msg, dict) else None
        for j, block in enumerate(content if isinstance(content, list) else []):
            if isinstance(block, dict) and block.get("cache_control"):
                out.append({"in": "messages", "index": i, "block": j, "role": str(msg.get("role") or ""),
                            "ttl": ttl(block)})
    return out


def _gemini_model(path: str) -> str:
    tail = path.split("?", 1)[0].rsplit("/", 1)[-1]
    return tail.split(":", 1)[0]


def _sig(msg: Message) -> tuple[Any, ...]:
    """What identifies a message when the agent sends it again (its role, text and tool calls / results)."""
    calls = tuple((c.get("id"), (c.get("function") or {}).get("name")) for c in msg.get("tool_calls") or []
                  if isinstance(c, dict))
    content = msg.get("content")
    text = content.strip() if isinstance(content, str) else json.dumps(content, sort_keys=True, default=str)
    return msg.get("role"), text, calls, msg.get("tool_call_id")


# --------------------------------------------------------------------------- the reader


class CaptureReader:
    """A capture's lines in, the session out, incrementally (:class:`engine.sources.formats.AppendedReader`): the
    whole read feeds it every line, a follower what the proxy appended; each exchange is read as its line comes
    (the order exchanges finished: a request of the main thread is sent after the answer before it finished)."""

    def __init__(self, path: Path) -> None:
        self.session = self.src = SourceSession(format="proxy-capture", path=Path(path), session_id=Path(path).stem)
        self._buffer = LineBuffer()
        self._sigs: list[tuple[Any, ...]] = []
        self._main_key: str | None = None  # the prefix of the main thread's last request
        self._low = 0  # the first message this feed changed

    def feed(self, data: bytes) -> SourceChanges:
        """Appended bytes (a partial last line waits for its newline)."""
        return self.feed_lines(self._buffer.lines(data))

    def feed_lines(self, lines: Iterable[bytes]) -> SourceChanges:
        """Complete lines (each with its newline)."""
        src = self.src
        before = SourceChanges(messages_from=len(src.messages), calls_from=len(src.calls),
                               compactions_from=len(src.compactions), subagents_from=len(src.subagents))
        self._low = len(src.messages)
        start = self._buffer.count + 1
        self.feed_objects(json_lines(self._buffer.counted(lines), src.skipped, start=start))
        before.messages_from = min(self._low, len(src.messages))
        self._settle()
        return before

    def feed_objects(self, lines: Iterable[tuple[int, dict[str, Any]]]) -> None:
        for n, obj in lines:
            try:
                self._line(n, obj)
            except LINE_ERRORS as exc:
                self.src.skipped.append(line_problem(n, exc))

    def _line(self, n: int, obj: dict[str, Any]) -> None:
        src = self.src
        src.lines += 1
        kind = obj.get("type")
        if kind == "capture":
            src.session_id = str(obj.get("id") or src.session_id)
            src.started = src.started or str(obj.get("started") or "")
            if isinstance(obj.get("agent"), str):
                src.project = src.project or obj["agent"]
            if isinstance(obj.get("cwd"), str):
                src.cwd = src.cwd or obj["cwd"]
            return
        if kind != "exchange":
            src.ignore(str(kind))
            return
        self._exchange(n, obj)

    def _settle(self) -> None:
        src = self.src
        src.live_start = src.compactions[-1].message_index if src.compactions else 0
        if src.calls:
            src.model = src.calls[-1].model
            src.last_activity = src.calls[-1].ts

    def finish(self) -> SourceSession:
        """The session read so far (a torn last line is read as such)."""
        rest = self._buffer.rest()
        if rest:
            self.feed_objects(json_lines([rest], self.src.skipped, start=self._buffer.count + 1))
        self._settle()
        return self.src

    def _exchange(self, n: int, ex: dict[str, Any]) -> None:
        src = self.src
        family = str(ex.get("family") or "")
        path = str(ex.get("path") or "")
        response: dict[str, Any] = ex["response"] if isinstance(ex.get("response"), dict) else {}
        status = response.get("status")
        if family not in GENERATION or "count_tokens" in path or ":countTokens" in path:
            src.ignore(f"exchange/{family or 'other'}")
            return
        if ex.get("outcome") != "complete" or not isinstance(status, int) or not 200 <= status < 300:
            src.ignore(f"exchange/{ex.get('outcome') or 'failed'}")
            src.notes.append(f"line {n}: {ex.get('method')} {path} → {status} ({ex.get('outcome')}): not a call")
            return
        request = ex.get("request") or {}
        body = _json(request.get("body"))
        if not isinstance(body, dict):
            src.skipped.append(Skipped(n, "the request body is not a JSON object", damaged=False))
            return
        ts = str(ex.get("started") or "")
        system, tools, inputs, max_tokens, model = request_parts(family, body, src.make_id, ts)
        answer = response.get("message")
        if family == "gemini":
            model = _gemini_model(path) or str((answer or {}).get("modelVersion") or "")
        usage = call_usage(family, response.get("usage"))
        key = _digest([system, tools])
        if key not in src.prefixes:
            src.prefixes[key] = RequestPrefix(key=key, system=system, tools=tools)
        outputs = response_messages(family, answer, src.make_id, ts)
        message_index = len(src.messages)
        index = self._continue(inputs, len(src.calls), ts, usage["prompt"], key) if tools else None
        if index is not None:
            message_index = index
            for msg in outputs:
                msg["usage"] = {"prompt_tokens": usage["prompt"], "completion_tokens": usage["completion"]}
                src.messages.append(msg)
                self._sigs.append(_sig(msg))
        src.calls.append(ProviderCall(
            index=len(src.calls), prompt_tokens=usage["prompt"], completion_tokens=usage["completion"],
            cache_read_tokens=usage["cache_read"], cache_write_tokens=usage["cache_write"], model=model, ts=ts,
            message_index=message_index, request_id=_answer_id(family, answer), reasoning_tokens=usage["reasoning"],
            input_messages=inputs, max_tokens=max_tokens, prefix_key=key,
            cache_write_1h_tokens=usage["cache_write_1h"],
            cache_breakpoints=cache_breakpoints(body) if family == "anthropic" else None))

    def _continue(self, inputs: Sequence[Message], call_index: int, ts: str, prompt: int | None,
                  key: str) -> int | None:
        """Messages of a main-thread request that are new to the conversation appended; a request of the main
        thread's prefix that no longer begins with the conversation replaced it (a compaction); the index the
        answer goes to, or None when the request is of another thread (a subagent: another system prompt)."""
        src = self.src
        sigs = [_sig(m) for m in inputs]
        start = src.compactions[-1].message_index if src.compactions else 0
        live = self._sigs[start:]
        common = 0
        limit = min(len(sigs), len(live))
        while common < limit and sigs[common] == live[common]:
            common += 1
        known = len(live)
        if self._main_key is None or (
                common >= known - 1 and len(sigs) >= known - 1 and (common == known or self._last_is_answer())):
            # it goes on from the conversation (the last answer may come back as the agent stored it)
            replaced: list[Message] = []
            if common < known:  # the agent's own copy of its last answer: it takes the answer's place (and id)
                replaced = src.messages[start + common:]
                del src.messages[start + common:]
                del self._sigs[start + common:]
                self._low = min(self._low, start + common)
            self._append(inputs[common:], replaced)
            self._main_key = key
            return len(src.messages)
        if key != self._main_key and not self._same_thread(key):
            return None
        self._main_key = key
        if _subsequence(live, sigs):  # nothing left: the history restated with more in it (a resumed Gemini CLI
            replaced = src.messages[start:]  # sends each tool result twice): no compaction
            del src.messages[start:]
            del self._sigs[start:]
            self._low = min(self._low, start)
            self._append(inputs, replaced)
            return len(src.messages)
        before = next((c.prompt_tokens for c in reversed(src.calls) if c.prefix_key == key), None)
        first = inputs[0] if inputs else None
        summary = str(first.get("content") or "") if first is not None and first.get("role") == "user" else ""
        src.compactions.append(Compaction(
            index=len(src.compactions), trigger="unknown", trigger_source="the request replaced the conversation",
            ts=ts, message_index=len(src.messages), calls_before=call_index, tokens_before=before,
            tokens_after=prompt, summary=summary, messages_after=len(inputs)))
        for msg in inputs:
            src.messages.append(dict(msg))
            self._sigs.append(_sig(msg))
        return len(src.messages)

    def _append(self, inputs: Sequence[Message], replaced: Sequence[Message]) -> None:
        """``inputs`` appended to the conversation where ``replaced`` (taken out) were: each keeps the id of the one
        at its place, so that a view updates those in place and adds the rest."""
        for i, msg in enumerate(inputs):
            msg = dict(msg)
            if i < len(replaced):
                msg["id"] = replaced[i]["id"]
            self.src.messages.append(msg)
            self._sigs.append(_sig(msg))

    def _same_thread(self, key: str) -> bool:
        """Whether the prefix ``key`` is the main thread's with small changes: the same tools by name, and a system
        prompt that differs in little (Claude Code rewrites a header line of it per run; a subagent's is another
        prompt, and usually other tools)."""
        if self._main_key is None:
            return False
        a, b = self.src.prefixes[self._main_key], self.src.prefixes[key]
        if sorted(str(t.get("name")) for t in a.tools) != sorted(str(t.get("name")) for t in b.tools):
            return False
        return _similar(a.system, b.system)

    def _last_is_answer(self) -> bool:
        return bool(self.src.messages) and self.src.messages[-1].get("role") == "assistant"


def _subsequence(old: Sequence[Any], new: Sequence[Any]) -> bool:
    """Whether every item of ``old`` is in ``new``, in the same order (others may be between them)."""
    it = iter(new)
    return all(any(item == other for other in it) for item in old)


def _similar(a: str, b: str, share: float = 0.8) -> bool:
    """Whether ``a`` and ``b`` share a common beginning and end of at least ``share`` of the longer one."""
    longest = max(len(a), len(b))
    if longest == 0:
        return True
    head = _common(a, b)
    tail = _common(a[head:][::-1], b[head:][::-1])
    return head + tail >= share * longest


def _common(a: str, b: str) -> int:
    """The length of the common beginning of ``a`` and ``b`` (bisected: a few slices compared, not each character)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _answer_id(family: str, answer: Any) -> str:
    if not isinstance(answer, dict):
        return ""
    return str(answer.get("responseId") if family == "gemini" else answer.get("id") or "")


def read_capture(path: Path, lines: Sequence[bytes] | None = None) -> SourceSession:
    """A capture file read as a session; its rolled-over parts are read after it, in order. ``lines``: the
    file's complete lines, already read (then only they are read)."""
    from engine.capture.files import capture_parts

    path = Path(path)
    reader = CaptureReader(path)
    if lines is not None:
        reader.feed_lines(lines)
        return reader.finish()
    for part in capture_parts(path):
        with open_regular(part) as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                reader.feed(chunk)
        reader.finish()
    return reader.finish()


# --------------------------------------------------------------------------- the light summary (Sources)


_TAGGED = re.compile(r"<([A-Za-z][\w-]*)[^>]*>.*?</\1>", re.DOTALL)


def first_prompt(messages: Sequence[Message]) -> str:
    """The first prompt a person wrote among ``messages`` (a request's): the first user message's text with what
    agents put around it (``<system-reminder>``, ``<session_context>``, ``<environment_context>`` blocks, Codex's
    ``# AGENTS.md instructions``) left out, on one line; "" when none."""
    for msg in messages[:40]:
        if msg.get("role") != "user" or msg.get("attachment"):
            continue
        content = msg.get("content")
        text = _TAGGED.sub("", content).strip() if isinstance(content, str) else ""
        if text and not text.startswith(("<", "# AGENTS.md instructions", "[Request interrupted")):
            return " ".join(text.split())
    return ""


@dataclass
class CaptureSummary:
    """What Sources shows of a capture, gathered by a light pass (:func:`light_summary`): each exchange line parsed,
    a request body only for the first call (its title and model) and the calls that name no model elsewhere."""

    started: str = ""
    cwd: str = ""
    agent: str = ""
    session_id: str = ""
    calls: int = 0
    last_prompt: int | None = None
    largest: int = 0
    model: str = ""
    title: str = ""
    last_activity: str = ""
    titled: bool = False  # the first call with tools (else the first call) gave the title


_SCANS: OrderedDict[str, tuple[dict[str, Tail], CaptureSummary]] = OrderedDict()  # by first part, newest last
_SCANS_LOCK = threading.Lock()
SCANS_KEPT = 32


def _summary_line(s: CaptureSummary, obj: dict[str, Any]) -> None:
    kind = obj.get("type")
    if kind == "capture":
        s.session_id = s.session_id or str(obj.get("id") or "")
        s.started = s.started or str(obj.get("started") or "")
        s.cwd = s.cwd or (obj["cwd"] if isinstance(obj.get("cwd"), str) else "")
        s.agent = s.agent or (obj["agent"] if isinstance(obj.get("agent"), str) else "")
        return
    if kind != "exchange":
        return
    family, path = str(obj.get("family") or ""), str(obj.get("path") or "")
    response: dict[str, Any] = obj["response"] if isinstance(obj.get("response"), dict) else {}
    status = response.get("status")
    if (family not in GENERATION or "count_tokens" in path or ":countTokens" in path
            or obj.get("outcome") != "complete" or not isinstance(status, int) or not 200 <= status < 300):
        return
    s.calls += 1
    s.last_activity = str(obj.get("started") or s.last_activity)
    prompt = call_usage(family, response.get("usage"))["prompt"]
    if prompt is not None:
        s.last_prompt = prompt
        s.largest = max(s.largest, prompt)
    if family == "gemini":
        answer = response.get("message")
        s.model = _gemini_model(path) or (str(answer.get("modelVersion") or "") if isinstance(answer, dict) else "")
    if s.titled and family == "gemini":
        return
    body = _json((obj.get("request") or {}).get("body"))
    if not isinstance(body, dict):
        return
    if family != "gemini":
        s.model = str(body.get("model") or s.model)
    if not s.titled:
        _, tools, inputs, _, _ = request_parts(family, body, IdMaker(), "")
        title = first_prompt(inputs)
        s.title = s.title or title
        s.titled = bool(tools) and bool(title)


def light_summary(path: Path) -> CaptureSummary:
    """The summary of the capture ``path`` (every part of it), resumable: parts read before in this process that
    only grew are read from where that pass stopped (a part rewritten in place: the whole capture read again)."""
    from engine.capture.files import capture_parts

    parts = capture_parts(Path(path))
    key = str(parts[0])
    with _SCANS_LOCK:
        kept = _SCANS.pop(key, None)
    scans, summary = kept if kept is not None else ({}, CaptureSummary())
    try:
        _scan_parts(parts, scans, summary)
    except _Rewritten:
        scans, summary = {}, CaptureSummary()
        _scan_parts(parts, scans, summary)
    with _SCANS_LOCK:
        _SCANS[key] = (scans, summary)
        while len(_SCANS) > SCANS_KEPT:
            _SCANS.popitem(last=False)
    return replace(summary)


class _Rewritten(Exception):
    pass


def _scan_parts(parts: Sequence[Path], scans: dict[str, Tail], summary: CaptureSummary) -> None:
    """Take the lines appended to each part since the last scan (each part's :class:`engine.sources.tail.Tail`; a
    line being written waits for its newline); _Rewritten when a part was replaced, truncated or rewritten."""
    for part in parts:
        tail = scans.get(str(part))
        if tail is None:
            tail = scans[str(part)] = Tail(part)
        with open_regular(part) as fh:
            for block, reset in appended_blocks(tail, fh, name=part.name):
                if reset is not None:
                    raise _Rewritten
                for _, obj in json_lines([line + b"\n" for line in block[:-1].split(b"\n")] if block else [], []):
                    _summary_line(summary, obj)
