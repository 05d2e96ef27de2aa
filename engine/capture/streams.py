"""A response as the client received it, reassembled while it streams: Server-Sent Events parsed chunk by
chunk (``\\n``, ``\\r\\n`` or ``\\r`` line ends, events split anywhere) and folded, per API family, into the
final message the provider would have answered unstreamed, with its usage.

Families: ``anthropic`` (Messages: ``message_start`` … ``content_block_*`` … ``message_delta``),
``openai-chat`` (Chat Completions chunks, ``data: [DONE]``), ``openai-responses`` (Responses API events,
``response.completed`` carrying the whole response), ``gemini`` (``streamGenerateContent?alt=sse``: each event
a ``GenerateContentResponse`` whose parts add up). Memory is bounded: text beyond ``limit`` characters is
not kept (the message says ``truncated``)."""

from __future__ import annotations

import codecs
import json
from typing import Any

Family = str  # "anthropic" | "openai-chat" | "openai-responses" | "gemini" | "other"
FAMILIES = ("anthropic", "openai-chat", "openai-responses", "gemini", "other")
TEXT_LIMIT = 2 * 2**20  # characters of reassembled text kept per message part (an answer is rarely 1/10 of it)


def family_of(path: str, headers: dict[str, str] | None = None) -> Family:
    """The API family of a request path (``/v1/messages``, ``…/chat/completions``, ``…/responses``,
    ``/v1beta/models/M:streamGenerateContent``); headers decide a path that says nothing."""
    p = path.split("?", 1)[0].rstrip("/")
    if ":generateContent" in p or ":streamGenerateContent" in p or ":countTokens" in p or "/v1beta/" in p + "/":
        return "gemini"
    if p.endswith("/messages") or p.endswith("/messages/count_tokens"):
        return "anthropic"
    if p.endswith("/chat/completions") or p.endswith("/completions"):
        return "openai-chat"
    if p.endswith("/responses") or "/responses/" in p:
        return "openai-responses"
    low = {k.lower(): v for k, v in (headers or {}).items()}
    if "anthropic-version" in low or "x-api-key" in low:
        return "anthropic"
    if "x-goog-api-key" in low:
        return "gemini"
    return "other"


class SSEParser:
    """Server-Sent Events from bytes fed in any pieces: :meth:`feed` returns the events each piece completes as
    ``(event name, data)`` (data lines joined with ``\\n``; the name ``""`` when there was no ``event:``)."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""
        self._event = ""
        self._data: list[str] = []
        self.events = 0

    def feed(self, chunk: bytes) -> list[tuple[str, str]]:
        text = self._pending + self._decoder.decode(chunk)
        hold = text.endswith("\r")  # maybe the first half of \r\n
        if hold:
            text = text[:-1]
        lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        self._pending = lines.pop() + ("\r" if hold else "")
        return self._lines(lines)

    def close(self) -> list[tuple[str, str]]:
        rest = (self._pending + self._decoder.decode(b"", final=True)).rstrip("\r")
        self._pending = ""
        out = self._lines([rest, ""] if rest else [""])
        return out

    def _lines(self, lines: list[str]) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for line in lines:
            if not line:
                if self._data:
                    out.append((self._event, "\n".join(self._data)))
                    self.events += 1
                self._event, self._data = "", []
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "data":
                self._data.append(value)
            elif name == "event":
                self._event = value
        return out


class _Text:
    """Text added in pieces, kept up to a limit."""

    def __init__(self, limit: int) -> None:
        self.parts: list[str] = []
        self.size = 0
        self.limit = limit
        self.truncated = False

    def add(self, piece: str) -> None:
        if self.size >= self.limit:
            self.truncated = self.truncated or bool(piece)
            return
        room = self.limit - self.size
        if len(piece) > room:
            piece, self.truncated = piece[:room], True
        self.parts.append(piece)
        self.size += len(piece)

    def value(self) -> str:
        if len(self.parts) > 1:
            self.parts = ["".join(self.parts)]
        return self.parts[0] if self.parts else ""


class Assembler:
    """Fold one family's stream events into the final message (:meth:`result`)."""

    def __init__(self, family: Family, limit: int = TEXT_LIMIT) -> None:
        self.family = family
        self.limit = limit
        self.message: dict[str, Any] | None = None
        self.usage: dict[str, Any] | None = None
        self.errors: list[str] = []
        self.truncated = False
        self._texts: dict[tuple[int, str], _Text] = {}
        self._blocks: dict[int, dict[str, Any]] = {}
        self._choices: dict[int, dict[str, Any]] = {}
        self._tool_args: dict[tuple[int, int], _Text] = {}
        self._gemini_parts: list[dict[str, Any]] = []
        self._done = False
        self._other: list[Any] = []

    def _text(self, key: tuple[int, str]) -> _Text:
        found = self._texts.get(key)
        if found is None:
            found = self._texts[key] = _Text(self.limit)
        return found

    def add(self, event: str, data: str) -> None:
        if data.strip() == "[DONE]":
            self._done = True
            return
        try:
            obj = json.loads(data)
        except ValueError:
            self.errors.append(f"an event that is not JSON: {data[:80]!r}")
            return
        if not isinstance(obj, dict):
            return
        try:
            getattr(self, "_" + self.family.replace("-", "_"), self._generic)(event, obj)
        except (TypeError, ValueError, KeyError, AttributeError, IndexError) as exc:
            self.errors.append(f"an event of an unexpected shape ({type(exc).__name__}: {str(exc)[:80]})")

    # ------------------------------------------------------------------ Anthropic Messages
    def _anthropic(self, event: str, obj: dict[str, Any]) -> None:
        kind = obj.get("type") or event
        if kind == "message_start":
            self.message = dict(obj.get("message") or {})
            self.usage = dict(self.message.get("usage") or {})
        elif kind == "content_block_start":
            self._blocks[int(obj["index"])] = dict(obj.get("content_block") or {})
        elif kind == "content_block_delta":
            i, delta = int(obj["index"]), obj.get("delta") or {}
            dtype = delta.get("type")
            if dtype == "text_delta":
                self._text((i, "text")).add(str(delta.get("text") or ""))
            elif dtype == "input_json_delta":
                self._text((i, "input")).add(str(delta.get("partial_json") or ""))
            elif dtype == "thinking_delta":
                self._text((i, "thinking")).add(str(delta.get("thinking") or ""))
            elif dtype == "signature_delta":
                self._text((i, "signature")).add(str(delta.get("signature") or ""))
            elif dtype == "citations_delta":
                self._blocks.setdefault(i, {}).setdefault("citations", []).append(delta.get("citation"))
        elif kind == "message_delta":
            if self.message is None:
                self.message = {}
            for key, value in (obj.get("delta") or {}).items():
                self.message[key] = value
            if isinstance(obj.get("usage"), dict):
                self.usage = {**(self.usage or {}), **{k: v for k, v in obj["usage"].items() if v is not None}}
        elif kind == "error":
            self.errors.append(json.dumps(obj.get("error") or obj)[:500])

    def _anthropic_result(self) -> dict[str, Any]:
        msg = dict(self.message or {})
        content = []
        for i in sorted(self._blocks):
            block = dict(self._blocks[i])
            for field in ("text", "thinking", "signature"):
                if (i, field) in self._texts:
                    block[field] = block.get(field, "") + self._texts[(i, field)].value()
            if (i, "input") in self._texts:
                raw = self._texts[(i, "input")].value()
                try:
                    block["input"] = json.loads(raw) if raw.strip() else {}
                except ValueError:
                    block["input"] = raw  # cut or not JSON: kept as it came
            content.append(block)
        msg["content"] = content
        if self.usage is not None:
            msg["usage"] = self.usage
        return msg

    # ------------------------------------------------------------------ OpenAI Chat Completions
    def _openai_chat(self, event: str, obj: dict[str, Any]) -> None:
        if self.message is None:
            self.message = {k: obj.get(k) for k in ("id", "object", "created", "model", "system_fingerprint")
                            if k in obj}
            self.message["object"] = "chat.completion"
        if isinstance(obj.get("usage"), dict):
            self.usage = obj["usage"]
        if "error" in obj:
            self.errors.append(json.dumps(obj["error"])[:500])
        for choice in obj.get("choices") or []:
            i = int(choice.get("index") or 0)
            state = self._choices.setdefault(i, {"index": i, "message": {"role": "assistant"}, "finish_reason": None})
            if choice.get("finish_reason") is not None:
                state["finish_reason"] = choice["finish_reason"]
            delta = choice.get("delta") or {}
            if delta.get("role"):
                state["message"]["role"] = delta["role"]
            for field in ("content", "reasoning_content", "reasoning", "refusal"):
                if isinstance(delta.get(field), str):
                    self._text((i, field)).add(delta[field])
            for call in delta.get("tool_calls") or []:
                j = int(call.get("index") or 0)
                calls = state["message"].setdefault("tool_calls", {})
                entry = calls.setdefault(j, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}})
                if call.get("id"):
                    entry["id"] = call["id"]
                fn = call.get("function") or {}
                if fn.get("name"):
                    entry["function"]["name"] += fn["name"]
                if isinstance(fn.get("arguments"), str):
                    key = (i, j)
                    if key not in self._tool_args:
                        self._tool_args[key] = _Text(self.limit)
                    self._tool_args[key].add(fn["arguments"])

    def _openai_chat_result(self) -> dict[str, Any]:
        msg = dict(self.message or {"object": "chat.completion"})
        choices = []
        for i in sorted(self._choices):
            state = self._choices[i]
            message = dict(state["message"])
            for field in ("content", "reasoning_content", "reasoning", "refusal"):
                if (i, field) in self._texts:
                    message[field] = self._texts[(i, field)].value()
            message.setdefault("content", None)
            if "tool_calls" in message:
                calls = []
                for j in sorted(message["tool_calls"]):
                    entry = message["tool_calls"][j]
                    args = self._tool_args.get((i, j))
                    entry["function"]["arguments"] = args.value() if args is not None else ""
                    calls.append(entry)
                message["tool_calls"] = calls
            choices.append({"index": i, "message": message, "finish_reason": state["finish_reason"]})
        msg["choices"] = choices
        if self.usage is not None:
            msg["usage"] = self.usage
        return msg

    # ------------------------------------------------------------------ OpenAI Responses
    def _openai_responses(self, event: str, obj: dict[str, Any]) -> None:
        kind = str(obj.get("type") or event)
        if kind in ("response.created", "response.in_progress") and isinstance(obj.get("response"), dict):
            self.message = obj["response"]
        elif kind in ("response.completed", "response.incomplete", "response.failed") and isinstance(
                obj.get("response"), dict):
            self.message = obj["response"]
            self._done = True
            if isinstance(self.message.get("usage"), dict):
                self.usage = self.message["usage"]
            if kind == "response.failed" and self.message.get("error"):
                self.errors.append(json.dumps(self.message["error"])[:500])
        elif kind == "response.output_item.done" and isinstance(obj.get("item"), dict):
            self._blocks[int(obj.get("output_index") or len(self._blocks))] = obj["item"]
        elif kind == "response.output_text.delta":
            self._text((int(obj.get("output_index") or 0), "text")).add(str(obj.get("delta") or ""))
        elif kind == "error":
            self.errors.append(json.dumps(obj)[:500])

    def _openai_responses_result(self) -> dict[str, Any]:
        msg = dict(self.message or {"object": "response"})
        if not msg.get("output") and self._blocks:  # no response.completed (cut): the items that finished
            msg["output"] = [self._blocks[i] for i in sorted(self._blocks)]
        if self.usage is not None:
            msg["usage"] = self.usage
        return msg

    # ------------------------------------------------------------------ Gemini
    def _gemini(self, event: str, obj: dict[str, Any]) -> None:
        if "error" in obj:
            self.errors.append(json.dumps(obj["error"])[:500])
        if self.message is None:
            self.message = {}
        for key in ("modelVersion", "responseId", "createTime", "promptFeedback"):
            if key in obj:
                self.message[key] = obj[key]
        if isinstance(obj.get("usageMetadata"), dict):
            self.usage = obj["usageMetadata"]
        for cand in obj.get("candidates") or []:
            if int(cand.get("index") or 0) != 0:
                continue
            for key, value in cand.items():
                if key != "content":
                    self.message.setdefault("candidate", {})[key] = value
            content = cand.get("content") or {}
            if content.get("role"):
                self.message.setdefault("candidate", {})["role"] = content["role"]
            for part in content.get("parts") or []:
                if isinstance(part, dict):
                    self._gemini_part(part)

    def _gemini_part(self, part: dict[str, Any]) -> None:
        last = self._gemini_parts[-1] if self._gemini_parts else None
        text = part.get("text")
        if isinstance(text, str) and set(part) <= {"text", "thought", "thoughtSignature"}:
            same = last is not None and "_text" in last and bool(last.get("thought")) == bool(part.get("thought"))
            if not same:
                last = {"_text": _Text(self.limit)}
                if part.get("thought"):
                    last["thought"] = True
                self._gemini_parts.append(last)
            assert last is not None
            last["_text"].add(text)
            if part.get("thoughtSignature"):
                last["thoughtSignature"] = part["thoughtSignature"]
            return
        self._gemini_parts.append(dict(part))

    def _gemini_result(self) -> dict[str, Any]:
        meta = dict(self.message or {})
        cand = dict(meta.pop("candidate", {}))
        role = cand.pop("role", "model")
        parts = []
        for part in self._gemini_parts:
            if "_text" in part:
                text = part["_text"]
                self.truncated = self.truncated or text.truncated
                parts.append({"text": text.value(), **{k: v for k, v in part.items() if k != "_text"}})
            else:
                parts.append(part)
        out: dict[str, Any] = {"candidates": [{"content": {"role": role, "parts": parts}, **cand, "index": 0}]}
        out.update(meta)
        if self.usage is not None:
            out["usageMetadata"] = self.usage
        return out

    # ------------------------------------------------------------------ anything else
    def _generic(self, event: str, obj: dict[str, Any]) -> None:
        if len(self._other) < 1000:
            self._other.append(obj)
        if isinstance(obj.get("usage"), dict):
            self.usage = obj["usage"]

    def result(self) -> dict[str, Any]:
        """The final message (the shape the family answers unstreamed), ``usage`` included where it came."""
        builder = getattr(self, "_" + self.family.replace("-", "_") + "_result", None)
        msg = builder() if builder is not None else {"events": self._other}
        if any(t.truncated for t in self._texts.values()) or any(t.truncated for t in self._tool_args.values()):
            self.truncated = True
        return msg


def usage_of(family: Family, message: Any) -> dict[str, Any] | None:
    """The provider's own usage object of a final message (streamed and reassembled, or answered whole)."""
    if not isinstance(message, dict):
        return None
    key = "usageMetadata" if family == "gemini" else "usage"
    usage = message.get(key)
    if isinstance(usage, dict):
        return usage
    if family == "openai-responses" and isinstance(message.get("response"), dict):
        inner = message["response"].get("usage")
        return inner if isinstance(inner, dict) else None
    return None
