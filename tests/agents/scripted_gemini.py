"""A scripted Gemini API server on 127.0.0.1 for the real Gemini CLI (real HTTP, real SSE).

:class:`GeminiServer` answers ``POST /v1beta/models/MODEL:streamGenerateContent?alt=sse`` (streamed),
``…:generateContent`` (not streamed: Gemini CLI's utility calls, such as the summarisation of a chat
compression) and ``…:countTokens``, from a *script* as the other servers of :mod:`tests.agents.scripted` do.
Every request is logged as it was sent with the usage answered (:attr:`ScriptedServer.log`), ``countTokens``
and any other path too (their ``kind`` is ``"count"`` / ``"other"``).

The usage is the server's own count of the request: :func:`count_tokens` of its ``systemInstruction``,
``tools`` and ``contents`` counted apart, and a cache like a provider's (the longest prefix this model was
sent before is "cached"): ``promptTokenCount`` is the whole prompt, ``cachedContentTokenCount`` the cached
part of it, ``candidatesTokenCount`` the output.
"""

from __future__ import annotations

import json
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.agents.scripted import (
    Logged,
    Reply,
    Script,
    ScriptedServer,
    count_tokens,
    output_tokens,
    send_json,
    start_sse,
)

SUMMARY_TEXT = ("<state_snapshot>\n<overall_goal>Run shell commands and report.</overall_goal>\n"
                "<key_knowledge>The commands printed step0, step1 and step2.</key_knowledge>\n</state_snapshot>")
SUMMARY_MARKER = "state_snapshot"  # in the system instruction and last user text of a compression's requests


def gemini_text(content: Any) -> str:
    """The text parts of a Gemini ``Content`` (or of a list of parts), joined."""
    parts = content.get("parts") if isinstance(content, dict) else content
    return "\n".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)) \
        if isinstance(parts, list) else ""


def last_user_text(body: dict[str, Any]) -> str:
    """The text of the last ``user`` content that is not only function responses."""
    contents = body.get("contents")
    for content in reversed(contents if isinstance(contents, list) else []):
        if isinstance(content, dict) and content.get("role") == "user":
            text = gemini_text(content)
            if text:
                return text
    return ""


def is_compression_request(body: dict[str, Any]) -> bool:
    return SUMMARY_MARKER in gemini_text(body.get("systemInstruction")) or SUMMARY_MARKER in last_user_text(body)


class GeminiServer(ScriptedServer):
    """The Gemini API (``v1beta``) as Gemini CLI calls it; ``summary`` answers a compression's requests."""

    def __init__(self, script: Script, summary: str = SUMMARY_TEXT) -> None:
        super().__init__(script)
        self.summary = summary

    def handle(self, handler: BaseHTTPRequestHandler, path: str, body: dict[str, Any]) -> None:
        name, _, method = path.rpartition("/")[2].partition(":")
        if method == "countTokens":
            tokens = count_tokens(body.get("contents")) + count_tokens(
                dict_of(body.get("generateContentRequest")).get("contents"))
            self.record(Logged(path, body, {"totalTokens": tokens}, Reply(), time.time(), "count"))
            send_json(handler, 200, {"totalTokens": tokens})
            return
        if method not in ("streamGenerateContent", "generateContent"):
            self.record(Logged(path, body, {}, Reply(), time.time(), "other"))
            send_json(handler, 404, {"error": {"code": 404, "message": f"no route {path}", "status": "NOT_FOUND"}})
            return
        model = name
        system, tools, contents = body.get("systemInstruction"), body.get("tools"), body.get("contents")
        kind = "summary" if is_compression_request(body) else ("main" if tools else "side")
        reply = Reply(text=self.summary) if kind == "summary" else self.script(body)
        total, cached = self.prompt_figures(model, system, tools, contents)
        total += reply.extra_prompt_tokens
        cached += reply.extra_prompt_tokens
        out_tokens = output_tokens(reply)
        usage = {"promptTokenCount": total, "candidatesTokenCount": out_tokens, "totalTokenCount": total + out_tokens,
                 "cachedContentTokenCount": cached}
        self.record(Logged(path, body, dict(usage), reply, time.time(), kind, count_tokens(system),
                           count_tokens(tools), count_tokens(contents)))
        parts: list[dict[str, Any]] = []
        if reply.text:
            parts.append({"text": reply.text})
        for call in reply.tool_calls:
            fn: dict[str, Any] = {"name": call.name, "args": call.arguments}
            if call.id:
                fn["id"] = call.id
            parts.append({"functionCall": fn})
        response = {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP",
                                    "index": 0}],
                    "usageMetadata": usage, "modelVersion": model, "responseId": f"resp-{len(self.log)}"}
        if method == "generateContent":
            send_json(handler, 200, response)
            return
        start_sse(handler)
        handler.wfile.write(f"data: {json.dumps(response)}\r\n\r\n".encode())
        handler.wfile.flush()


def dict_of(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
