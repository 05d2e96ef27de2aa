"""A scripted OpenAI Chat Completions server (``POST /v1/chat/completions``, streamed SSE) for the agents that
speak it through an OpenAI-compatible provider (OpenCode's ``@ai-sdk/openai-compatible``).

Built on :class:`tests.agents.scripted.ScriptedServer`: it answers from a script (a :class:`Reply`: text or
tool calls), logs every request as sent and the usage it answered (the ground truth). The usage is the last
chunk's ``usage``: ``prompt_tokens`` (the whole prompt, counted by :func:`count_tokens` over the system
prompt, the tools and the other messages apart; plus :attr:`Reply.extra_prompt_tokens`),
``prompt_tokens_details.cached_tokens`` (the longest prefix shared with the model's last request, plus the
extra tokens) and ``completion_tokens``.
"""

from __future__ import annotations

import json
import time
import uuid
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.agents.scripted import Logged, Reply, ScriptedServer, count_tokens, output_tokens, send_json, start_sse

# the last user message of OpenCode's compaction request (its ``compaction`` agent's prompt); Kilo 7.7.9 compacting a
# second time asks to combine the summary before with the conversation since ("construct a new summary …")
SUMMARY_MARKERS = ("summary for another agent", "summarize the conversation", "create a new anchored summary",
                   "provide a detailed prompt for continuing", "update the anchored summary",
                   "construct a new summary that combines both")
CHAT_SUMMARY = ("## Goal\nRun shell commands and report their output.\n\n## Progress\nThe commands ran: "
                "step0, step1 and step2 were printed.\n\n## Next Steps\nNone.")


def chat_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    out = []
    for part in content if isinstance(content, list) else []:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            out.append(part["text"])
    return "\n".join(out)


def split_chat(body: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    """(system messages, the other messages) of a chat request."""
    raw = body.get("messages")
    msgs: list[Any] = raw if isinstance(raw, list) else []
    system = [m for m in msgs if isinstance(m, dict) and m.get("role") == "system"]
    return system, [m for m in msgs if not (isinstance(m, dict) and m.get("role") == "system")]


def last_chat_user_text(body: dict[str, Any]) -> str:
    for msg in reversed(split_chat(body)[1]):
        if isinstance(msg, dict) and msg.get("role") == "user":
            return chat_text(msg.get("content"))
    return ""


def is_chat_summary_request(body: dict[str, Any]) -> bool:
    text = last_chat_user_text(body).lower()
    return any(marker in text for marker in SUMMARY_MARKERS)


def is_title_request(body: dict[str, Any]) -> bool:
    system, _ = split_chat(body)
    return any("title" in chat_text(m.get("content")).lower()[:400] for m in system) and not body.get("tools")


class ChatServer(ScriptedServer):
    """``POST /v1/chat/completions``, streamed (``stream: true``) or not."""

    def handle(self, handler: BaseHTTPRequestHandler, path: str, body: dict[str, Any]) -> None:
        if not path.endswith("/chat/completions"):
            send_json(handler, 404, {"error": {"message": f"no route {path}"}})
            return
        model = str(body.get("model") or "")
        system, messages = split_chat(body)
        tools = body.get("tools")
        if is_chat_summary_request(body):
            kind, reply = "summary", Reply(text=CHAT_SUMMARY)
        elif is_title_request(body):
            kind, reply = "title", Reply(text="Shell commands")
        else:
            kind, reply = ("main" if tools else "side"), self.script(body)
        total, cached = self.prompt_figures(model, system, tools, messages, cache=kind != "title")
        out_tokens = output_tokens(reply)
        total += reply.extra_prompt_tokens
        cached += reply.extra_prompt_tokens
        usage = {"prompt_tokens": total, "completion_tokens": out_tokens, "total_tokens": total + out_tokens,
                 "prompt_tokens_details": {"cached_tokens": cached}}
        cid = "chatcmpl-" + uuid.uuid4().hex[:24]
        self.record(Logged(path, body, json.loads(json.dumps(usage)), reply, time.time(), kind, count_tokens(system),
                           count_tokens(tools), count_tokens(messages), response_id=cid))
        calls: list[dict[str, Any]] = [{"id": c.id or "call_" + uuid.uuid4().hex[:20], "type": "function",
                  "function": {"name": c.name, "arguments": json.dumps(c.arguments)}} for c in reply.tool_calls]
        finish = "tool_calls" if calls else "stop"
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
            if calls:
                message["tool_calls"] = calls
            send_json(handler, 200, {"id": cid, "object": "chat.completion", "created": int(time.time()),
                                     "model": model, "choices": [{"index": 0, "message": message,
                                                                  "finish_reason": finish}], "usage": usage})
            return
        start_sse(handler)
        base = {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()), "model": model}

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> None:
            data = dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": finish_reason}])
            handler.wfile.write(f"data: {json.dumps(data)}\n\n".encode())
            handler.wfile.flush()

        chunk({"role": "assistant", "content": ""})
        if reply.text:
            chunk({"content": reply.text})
        for i, call in enumerate(calls):
            chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                   "function": {"name": call["function"]["name"], "arguments": ""}}]})
            chunk({"tool_calls": [{"index": i, "function": {"arguments": call["function"]["arguments"]}}]})
        chunk({}, finish)
        handler.wfile.write(f"data: {json.dumps(dict(base, choices=[], usage=usage))}\n\n".encode())
        handler.wfile.write(b"data: [DONE]\n\n")
        handler.wfile.flush()
