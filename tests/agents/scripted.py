"""Scripted API servers on 127.0.0.1 for the real agents (real HTTP, real SSE).

- :class:`AnthropicServer`: the Anthropic Messages API (``POST /v1/messages``, streamed), as Claude Code
  calls it: text, ``tool_use`` blocks, and an answer to the summarisation request of a compaction.
- :class:`ResponsesServer`: the OpenAI Responses API (``POST /v1/responses``, streamed), as Codex calls it:
  text and ``function_call`` items.

Both answer from a *script*: a function of the request body returning a :class:`Reply` (text, or tool
calls). Both log every request as it was sent and the usage they answered (:attr:`ScriptedServer.log`):
that log is the ground truth the readers are checked against.

The usage is the server's own count of what was sent: :func:`count_tokens` (characters / 4 of the
request's JSON, the system prompt, the tool definitions and the messages each counted apart), and a cache
like a provider's: the longest prefix (in tokens) this model was sent before is read from the cache, the
rest is written to it.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def count_tokens(value: Any) -> int:
    """The servers' token count of a JSON value: characters of its compact JSON / 4 (at least 1)."""
    if value is None:
        return 0
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return max(1, len(text) // 4)


@dataclass
class ToolCall:
    name: str
    arguments: dict[str, Any]
    id: str = ""
    namespace: str = ""  # a Responses function call of a tool namespace (Codex's ``collaboration.spawn_agent``)
    input: str | None = None  # a Responses ``custom_tool_call`` with this raw input (Codex's code-mode ``exec``)


@dataclass
class Reply:
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    output_tokens: int | None = None  # counted from the text and calls when None
    extra_prompt_tokens: int = 0  # answered as if the prompt were this much longer (read from the cache):
    # how a test fills the window to make an agent compact by itself
    # server-side work billed beside the top-level usage (Anthropic: ``usage.iterations``), answered as given
    iterations: list[dict[str, Any]] | None = None
    # why the prompt cache missed (Anthropic: ``diagnostics.cache_miss_reason``), answered as given
    cache_miss: dict[str, Any] | None = None


Script = Callable[[dict[str, Any]], Reply]


@dataclass
class Logged:
    """One request as the agent sent it, and what the server answered."""

    path: str
    body: dict[str, Any]
    usage: dict[str, Any]
    reply: Reply
    ts: float
    kind: str  # what the script took it for: "main", "summary", "side"
    system_tokens: int = 0
    tools_tokens: int = 0
    messages_tokens: int = 0
    response_id: str = ""  # the id the server gave its answer, where it gives one (the Chat Completions server)


class ScriptedServer:
    """Base: a threaded HTTP server with a request log; subclasses speak one API."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.log: list[Logged] = []
        self._lock = threading.Lock()
        self._cache: dict[str, str] = {}  # model -> the last prompt's serialised prefix (for cache figures)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -------------------------------------------------------------- lifecycle
    def start(self) -> ScriptedServer:
        handler = _handler(self)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name=type(self).__name__, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def calls(self, kind: str | None = None) -> list[Logged]:
        with self._lock:
            return [e for e in self.log if kind is None or e.kind == kind]

    # -------------------------------------------------------------- cache figures
    def cached_prefix(self, model: str, serial: str) -> int:
        """Tokens of ``serial`` (this request's prompt as text) that the last request of ``model`` shared."""
        with self._lock:
            prev = self._cache.get(model, "")
            self._cache[model] = serial
        n = 0
        limit = min(len(prev), len(serial))
        while n < limit and prev[n] == serial[n]:
            n += 1
        return n // 4

    def prompt_figures(self, model: str, system: Any, tools: Any, messages: Any, *,
                       cache: bool = True) -> tuple[int, int]:
        """The server's count of a request's prompt (system prompt, tools and messages) and the part of it a
        cache holds from this model's previous request (none, and the cache left as it is, without ``cache``)."""
        total = count_tokens(system) + count_tokens(tools) + count_tokens(messages)
        if not cache:
            return total, 0
        serial = json.dumps([system, tools, messages], ensure_ascii=False, separators=(",", ":"))
        return total, min(total, self.cached_prefix(model, serial))

    def record(self, entry: Logged) -> None:
        with self._lock:
            self.log.append(entry)

    # -------------------------------------------------------------- per API
    def handle(self, handler: BaseHTTPRequestHandler, path: str, body: dict[str, Any]) -> None:
        raise NotImplementedError


def _handler(server: ScriptedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def do_HEAD(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self) -> None:
            data = b'{"data": [], "object": "list"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if not length and "chunked" in (self.headers.get("Transfer-Encoding") or ""):
                raw = _read_chunked(self)
            if (self.headers.get("Content-Encoding") or "") == "zstd":
                raise_text = "zstd request bodies are not supported by the scripted server"
                self._json(415, {"error": {"message": raise_text}})
                return
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                self._json(400, {"error": {"message": "the body is not JSON"}})
                return
            server.handle(self, self.path.split("?")[0], body)

        def _json(self, status: int, obj: Any) -> None:
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def _read_chunked(handler: BaseHTTPRequestHandler) -> bytes:
    out = b""
    while True:
        size = int(handler.rfile.readline().strip() or b"0", 16)
        if size == 0:
            handler.rfile.readline()
            return out
        out += handler.rfile.read(size)
        handler.rfile.readline()


def output_tokens(reply: Reply) -> int:
    """The server's count of an answer: the script's figure, else its text and calls (5 tokens a call besides)."""
    return reply.output_tokens or max(1, count_tokens(reply.text) + sum(
        count_tokens(c.arguments if c.input is None else c.input) + 5 for c in reply.tool_calls))


def send_json(handler: BaseHTTPRequestHandler, status: int, obj: Any) -> None:
    data = json.dumps(obj).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def start_sse(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Cache-Control", "no-cache")
    handler.send_header("Connection", "close")
    handler.end_headers()
    handler.close_connection = True


def sse(handler: BaseHTTPRequestHandler, event: str, data: dict[str, Any]) -> None:
    handler.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
    handler.wfile.flush()


# ============================================================================ Anthropic Messages API

SUMMARY_MARKERS = ("detailed summary of the conversation", "summary of the conversation so far",
                   "create a detailed summary", "Your task is to create a detailed summary")


def anthropic_text(block_list: Any) -> str:
    if isinstance(block_list, str):
        return block_list
    out = []
    for b in block_list if isinstance(block_list, list) else []:
        if isinstance(b, dict) and isinstance(b.get("text"), str):
            out.append(b["text"])
        elif isinstance(b, dict) and b.get("type") == "tool_result":
            out.append(anthropic_text(b.get("content")))
    return "\n".join(out)


def last_user_text(body: dict[str, Any]) -> str:
    """The text of the last user message that is not only tool results (Anthropic or Responses shape)."""
    msgs = body.get("messages") if isinstance(body.get("messages"), list) else body.get("input")
    for msg in reversed(msgs if isinstance(msgs, list) else []):
        if not isinstance(msg, dict) or msg.get("role") != "user":
            continue
        content = msg.get("content")
        if isinstance(content, list) and content and all(
                isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
            continue
        return anthropic_text(content) if not isinstance(content, list) or any(
            isinstance(b, dict) and "text" in b for b in content) else ""
    return ""


def is_summary_request(body: dict[str, Any]) -> bool:
    text = last_user_text(body)
    return any(marker.lower() in text.lower() for marker in SUMMARY_MARKERS)


def one_hour_cache(body: dict[str, Any]) -> bool:
    """Whether a Messages request asks for its cache to live an hour (a ``cache_control`` with ``ttl`` ``1h``): the
    API then gives its cache write under ``usage.cache_creation.ephemeral_1h_input_tokens``, else under
    ``ephemeral_5m_input_tokens``."""
    found: list[bool] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            control = value.get("cache_control")
            if isinstance(control, dict):
                found.append(control.get("ttl") == "1h")
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk([body.get("system"), body.get("tools"), body.get("messages")])
    return any(found)


class AnthropicServer(ScriptedServer):
    """``POST /v1/messages`` (streamed or not) and ``POST /v1/messages/count_tokens``."""

    def handle(self, handler: BaseHTTPRequestHandler, path: str, body: dict[str, Any]) -> None:
        if path.endswith("/count_tokens"):
            send_json(handler, 200, {"input_tokens": count_tokens(body)})
            return
        if not path.endswith("/v1/messages"):
            send_json(handler, 404, {"type": "error", "error": {"type": "not_found_error", "message": path}})
            return
        model = str(body.get("model") or "")
        system, tools, messages = body.get("system"), body.get("tools"), body.get("messages")
        kind = "summary" if is_summary_request(body) else ("main" if tools else "side")
        reply = self.script(body) if kind != "summary" else Reply(text=SUMMARY_TEXT)
        total, cached = self.prompt_figures(model, system, tools, messages)
        usage = {"input_tokens": max(1, total - cached) if cached == 0 else min(total - cached, 3),
                 "cache_creation_input_tokens": 0, "cache_read_input_tokens": cached}
        usage["cache_creation_input_tokens"] = write = total - cached - usage["input_tokens"]
        hour = one_hour_cache(body)  # the write's breakdown by time to live, as the API gives it
        usage["cache_creation"] = {"ephemeral_5m_input_tokens": 0 if hour else write,
                                   "ephemeral_1h_input_tokens": write if hour else 0}
        usage["cache_read_input_tokens"] += reply.extra_prompt_tokens
        out_tokens = output_tokens(reply)
        usage["output_tokens"] = out_tokens
        if reply.iterations is not None:
            usage["iterations"] = reply.iterations
        self.record(Logged(path, body, dict(usage), reply, time.time(), kind, count_tokens(system),
                           count_tokens(tools), count_tokens(messages)))
        msg_id = "msg_" + uuid.uuid4().hex[:24]
        diagnostics = {"diagnostics": {"cache_miss_reason": reply.cache_miss}} if reply.cache_miss else {}
        content: list[dict[str, Any]] = []
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        for call in reply.tool_calls:
            content.append({"type": "tool_use", "id": call.id or "toolu_" + uuid.uuid4().hex[:20],
                            "name": call.name, "input": call.arguments})
        stop = "tool_use" if reply.tool_calls else "end_turn"
        if not body.get("stream"):
            send_json(handler, 200, {"id": msg_id, "type": "message", "role": "assistant", "model": model,
                                     "content": content, "stop_reason": stop, "stop_sequence": None,
                                     "usage": usage, **diagnostics})
            return
        start_sse(handler)
        start_usage = dict(usage, output_tokens=1)
        sse(handler, "message_start", {"type": "message_start", "message": {
            "id": msg_id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": start_usage, **diagnostics}})
        for i, block in enumerate(content):
            if block["type"] == "text":
                sse(handler, "content_block_start", {"type": "content_block_start", "index": i,
                                                     "content_block": {"type": "text", "text": ""}})
                sse(handler, "content_block_delta", {"type": "content_block_delta", "index": i,
                                                     "delta": {"type": "text_delta", "text": block["text"]}})
            else:
                sse(handler, "content_block_start", {"type": "content_block_start", "index": i, "content_block": {
                    "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}})
                sse(handler, "content_block_delta", {"type": "content_block_delta", "index": i, "delta": {
                    "type": "input_json_delta", "partial_json": json.dumps(block["input"])}})
            sse(handler, "content_block_stop", {"type": "content_block_stop", "index": i})
        sse(handler, "message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                       "usage": usage})
        sse(handler, "message_stop", {"type": "message_stop"})


SUMMARY_TEXT = ("<summary>\n1. Primary Request and Intent: the user asked to run shell commands and report.\n"
                "2. Key Technical Concepts: shell, files.\n3. Files and Code Sections: none.\n"
                "4. Pending Tasks: none.\n5. Current Work: the commands ran and their output was reported.\n"
                "</summary>")


# ============================================================================ OpenAI Responses API


def responses_parts(body: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
    """A Responses request's instructions, tool definitions, input items (those that are not tool definitions)
    and system prompt. Tools are ``tools``, or the ``additional_tools`` input items' tools (Codex in code mode
    sends its tools so, as the first input item); the system prompt is ``instructions``, else the first
    ``developer`` message (Codex sends it so)."""
    instructions, tools, items = body.get("instructions"), body.get("tools"), body.get("input")
    listed = items if isinstance(items, list) else []
    extra = [i for i in listed if isinstance(i, dict) and i.get("type") == "additional_tools"]
    if extra:
        tools = [t for i in extra for t in i.get("tools") or []]
        items = [i for i in listed if not (isinstance(i, dict) and i.get("type") == "additional_tools")]
    system = instructions
    first = next((i for i in listed if isinstance(i, dict) and i.get("type", "message") == "message"), None)
    if system is None and first is not None and first.get("role") == "developer":
        system = first.get("content")
    return instructions, tools, items, system


def responses_output(reply: Reply) -> list[dict[str, Any]]:
    """The output items of a scripted answer: its text, then its calls (function, namespaced or custom)."""
    output: list[dict[str, Any]] = []
    if reply.text:
        output.append({"type": "message", "id": "msg_" + uuid.uuid4().hex[:20], "role": "assistant",
                       "status": "completed",
                       "content": [{"type": "output_text", "text": reply.text, "annotations": []}]})
    for call in reply.tool_calls:
        call_id = call.id or "call_" + uuid.uuid4().hex[:20]
        if call.input is not None:
            output.append({"type": "custom_tool_call", "id": "ctc_" + uuid.uuid4().hex[:20], "status": "completed",
                           "call_id": call_id, "name": call.name, "input": call.input})
            continue
        item = {"type": "function_call", "id": "fc_" + uuid.uuid4().hex[:20], "status": "completed",
                "call_id": call_id, "name": call.name, "arguments": json.dumps(call.arguments)}
        output.append(item | ({"namespace": call.namespace} if call.namespace else {}))
    return output


class ResponsesServer(ScriptedServer):
    """``POST /v1/responses`` (streamed): text, ``function_call`` and ``custom_tool_call`` items, usage in
    ``response.completed``."""

    def handle(self, handler: BaseHTTPRequestHandler, path: str, body: dict[str, Any]) -> None:
        if not path.endswith("/responses"):
            send_json(handler, 404, {"error": {"message": f"no route {path}"}})
            return
        model = str(body.get("model") or "")
        instructions, tools, items, system = responses_parts(body)
        kind = "summary" if is_summary_request(body) else ("main" if tools else "side")
        reply = self.script(body) if kind != "summary" else Reply(text=SUMMARY_TEXT)
        total, cached = self.prompt_figures(model, instructions, tools, items)
        out_tokens = output_tokens(reply)
        total += reply.extra_prompt_tokens
        cached += reply.extra_prompt_tokens
        usage = {"input_tokens": total, "input_tokens_details": {"cached_tokens": cached},
                 "output_tokens": out_tokens, "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": total + out_tokens}
        self.record(Logged(path, body, json.loads(json.dumps(usage)), reply, time.time(), kind,
                           count_tokens(system), count_tokens(tools), count_tokens(items)))
        resp_id = "resp_" + uuid.uuid4().hex[:24]
        output = responses_output(reply)
        base = {"id": resp_id, "object": "response", "created_at": int(time.time()), "model": model,
                "status": "in_progress", "output": []}
        start_sse(handler)
        seq = iter(range(1_000_000))
        sse(handler, "response.created", {"type": "response.created", "sequence_number": next(seq), "response": base})
        for i, item in enumerate(output):
            sse(handler, "response.output_item.added", {"type": "response.output_item.added",
                                                        "sequence_number": next(seq), "output_index": i,
                                                        "item": dict(item, status="in_progress")})
            if item["type"] == "message":
                sse(handler, "response.output_text.delta", {
                    "type": "response.output_text.delta", "sequence_number": next(seq), "item_id": item["id"],
                    "output_index": i, "content_index": 0, "delta": reply.text})
            sse(handler, "response.output_item.done", {"type": "response.output_item.done",
                                                       "sequence_number": next(seq), "output_index": i, "item": item})
        done = dict(base, status="completed", output=output, usage=usage)
        sse(handler, "response.completed", {"type": "response.completed", "sequence_number": next(seq),
                                            "response": done})
