"""A scriptable OpenAI-compatible chat server on 127.0.0.1 for tests (real HTTP, real SSE).

It serves ``POST /v1/chat/completions`` (and ``/chat/completions``) from a queue of scripted
responses. Every response is a JSON-serialisable dict, so the same script works in-process and
as a subprocess. Build them with the helpers below:

- :func:`text_reply` — a streamed text answer (split into chunks), optional reasoning;
- :func:`tool_call_reply` — a streamed tool call with the arguments split across chunks;
- :func:`stream` — full control: a list of events made with :func:`text`, :func:`reasoning`,
  :func:`tool_call_delta`, :func:`raw` (bytes sent as they are, for malformed SSE), plus
  ``finish_reason``, ``usage``, ``delay`` (seconds between events), ``reset_after`` (after N events
  the connection is reset with a TCP RST), ``hang_after`` (after N events the server sends nothing
  more and waits until the client disconnects — for cancellation tests);
- :func:`error` and the shortcuts :func:`context_length_exceeded`, :func:`rate_limited` (429 with
  ``Retry-After``), :func:`server_error` (500), :func:`unauthorized` (401), :func:`bad_request` (400).

Any response may carry ``"when": {"tools": bool, "contains": "text"}``: the server answers a request
with the first queued response whose condition matches it (``tools`` = the request has tools;
``contains`` = the request's messages contain the text), else with the server's ``default``
response, else with a 500 saying the script ran out. Without ``when`` a response matches anything.

``max_prompt_chars``: when set, any request whose messages + tools (as JSON) are longer than this
gets a 400 ``context_length_exceeded`` and consumes nothing from the queue — a provider's window.
With ``stream_overflow="empty"`` a *streamed* request over it gets :func:`empty_stream` instead (as
llama.cpp's server does), and only the same request unstreamed gets the 400.

Usage chunks are sent only when the request asks for them (``stream_options.include_usage``);
``usage="auto"`` (the default in the helpers) counts prompt and completion as characters // 4.
Non-streaming requests get the same script assembled into one ``chat.completion`` object.

In-process::

    with FakeLLMServer() as server:
        server.queue(text_reply("hello"))
        ... litellm.acompletion(model="openai/fake", api_base=server.base_url, api_key="sk-test") ...
        assert server.requests[0].body["stream"] is True

As a subprocess (for CLI tests)::

    python -m tests.fakeserver --port-file PORT_FILE --script SCRIPT.json [--log REQUESTS.jsonl]

``SCRIPT.json`` is a list of responses, or ``{"responses": [...], "default": {...}, "stream_overflow": "empty",
"max_prompt_chars": N}``. The port is written to ``PORT_FILE`` once the server listens; each
request received is appended to ``REQUESTS.jsonl``; SIGTERM / SIGINT stop it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import signal
import socket
import struct
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

Response = dict[str, Any]

# ---------------------------------------------------------------------- script helpers


def text(content: str) -> dict[str, Any]:
    """A content delta."""
    return {"text": content}


def reasoning(content: str) -> dict[str, Any]:
    """A reasoning delta (``reasoning_content``, as DeepSeek / vLLM / LM Studio send it)."""
    return {"reasoning": content}


def tool_call_delta(
    index: int, *, id: str | None = None, name: str | None = None, arguments: str = ""
) -> dict[str, Any]:
    """One tool-call delta; ``id`` and ``name`` usually come with the first delta of an index only."""
    return {"tool_call": {"index": index, "id": id, "name": name, "arguments": arguments}}


def raw(data: str) -> dict[str, Any]:
    """Bytes sent as they are in the SSE body (e.g. ``"data: {not json\\n\\n"``)."""
    return {"raw": data}


def stream(
    *events: dict[str, Any],
    finish_reason: str | None = None,
    usage: dict[str, int] | str | None = "auto",
    delay: float = 0.0,
    reset_after: int | None = None,
    hang_after: int | None = None,
    done: bool = True,
    when: dict[str, Any] | None = None,
) -> Response:
    """A streamed response made of ``events``; see the module docstring for the options."""
    resp: Response = {
        "kind": "stream",
        "events": list(events),
        "finish_reason": finish_reason,
        "usage": usage,
        "delay": delay,
        "reset_after": reset_after,
        "hang_after": hang_after,
        "done": done,
    }
    if when is not None:
        resp["when"] = when
    return resp


def _split(s: str, parts: int) -> list[str]:
    if parts <= 1 or len(s) <= 1:
        return [s]
    size = max(1, -(-len(s) // parts))
    return [s[i : i + size] for i in range(0, len(s), size)]


def empty_stream(when: dict[str, Any] | None = None) -> Response:
    """HTTP 200 and an SSE stream that ends with no chunk at all (no finish reason, no usage, no
    ``[DONE]``): what llama.cpp's server sends for an overflowing streamed request. Unstreamed, the
    same script is a completion with no content and no finish reason."""
    resp = stream(finish_reason=None, usage=None, done=False, when=when)
    resp["silent"] = True
    return resp


def text_reply(
    content: str,
    *,
    chunks: int = 3,
    reasoning_text: str | None = None,
    usage: dict[str, int] | str | None = "auto",
    delay: float = 0.0,
    when: dict[str, Any] | None = None,
) -> Response:
    """A streamed text answer: optional reasoning first, then ``content`` in ``chunks`` pieces."""
    events = [reasoning(p) for p in _split(reasoning_text, chunks)] if reasoning_text else []
    events += [text(p) for p in _split(content, chunks)]
    return stream(*events, finish_reason="stop", usage=usage, delay=delay, when=when)


def tool_call_reply(
    name: str,
    arguments: dict[str, Any] | str,
    *,
    call_id: str | None = "call_1",
    index: int = 0,
    chunks: int = 3,
    preface: str | None = None,
    usage: dict[str, int] | str | None = "auto",
    when: dict[str, Any] | None = None,
) -> Response:
    """A streamed single tool call whose JSON arguments are split over ``chunks`` deltas."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    events: list[dict[str, Any]] = [text(preface)] if preface else []
    pieces = _split(args, chunks)
    events.append(tool_call_delta(index, id=call_id, name=name, arguments=""))
    events += [tool_call_delta(index, arguments=p) for p in pieces]
    return stream(*events, finish_reason="tool_calls", usage=usage, when=when)


def error(
    status: int,
    message: str,
    *,
    code: str | None = None,
    type: str | None = None,
    headers: dict[str, str] | None = None,
    when: dict[str, Any] | None = None,
) -> Response:
    """An HTTP error with an OpenAI-style body ``{"error": {"message", "type", "code"}}``."""
    resp: Response = {
        "kind": "error",
        "status": status,
        "body": {"error": {"message": message, "type": type or "invalid_request_error", "param": None,
                           "code": code}},
        "headers": headers or {},
    }
    if when is not None:
        resp["when"] = when
    return resp


def context_length_exceeded(limit: int = 8192, got: int = 9000) -> Response:
    return error(
        400,
        f"This model's maximum context length is {limit} tokens. However, your messages resulted in "
        f"{got} tokens. Please reduce the length of the messages.",
        code="context_length_exceeded",
    )


def rate_limited(retry_after: float = 1) -> Response:
    return error(
        429, "Rate limit reached for requests. Please try again later.", code="rate_limit_exceeded",
        type="requests", headers={"Retry-After": f"{retry_after:g}"},
    )


def server_error(message: str = "The server had an error while processing your request.") -> Response:
    return error(500, message, type="server_error", code="internal_error")


def unauthorized() -> Response:
    return error(401, "Incorrect API key provided.", code="invalid_api_key")


def bad_request(message: str = "Invalid value for 'messages'.") -> Response:
    return error(400, message, code="invalid_value")


# ---------------------------------------------------------------------- matching and sizes


def prompt_chars(body: dict[str, Any]) -> int:
    """The size the server compares with ``max_prompt_chars``: messages and tools as compact JSON."""
    size = len(json.dumps(body.get("messages") or [], separators=(",", ":"), ensure_ascii=False))
    if body.get("tools"):
        size += len(json.dumps(body["tools"], separators=(",", ":"), ensure_ascii=False))
    return size


def _matches(when: dict[str, Any] | None, body: dict[str, Any]) -> bool:
    if not when:
        return True
    if "tools" in when and bool(body.get("tools")) != bool(when["tools"]):
        return False
    if "contains" in when:
        blob = json.dumps(body.get("messages") or [], ensure_ascii=False)
        needle = json.dumps(when["contains"], ensure_ascii=False)[1:-1]
        if needle not in blob:
            return False
    return True


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None
    raw_body: bytes = b""
    response_kind: str = ""
    time: float = field(default_factory=time.time)

    def to_json(self) -> dict[str, Any]:
        return {
            "method": self.method, "path": self.path, "headers": self.headers, "body": self.body,
            "response_kind": self.response_kind, "time": self.time,
        }


# ---------------------------------------------------------------------- the server


class FakeLLMServer:
    """Threaded HTTP server on 127.0.0.1 (random port) answering from a queue of scripted responses."""

    def __init__(
        self,
        responses: list[Response] | None = None,
        *,
        default: Response | None = None,
        max_prompt_chars: int | None = None,
        stream_overflow: str = "error",
        host: str = "127.0.0.1",
        port: int = 0,
        log_path: Path | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._queue: list[Response] = list(responses or [])
        self.default = default
        self.max_prompt_chars = max_prompt_chars
        if stream_overflow not in ("error", "empty"):
            raise ValueError(f"stream_overflow must be 'error' or 'empty', got {stream_overflow!r}")
        self.stream_overflow = stream_overflow
        self.requests: list[RecordedRequest] = []
        self.disconnects = 0  # streams the client closed before the server finished them
        self.client_disconnected = threading.Event()
        self.log_path = log_path
        self._cond = threading.Condition(self._lock)
        self._host = host
        self._port = port
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    # lifecycle ---------------------------------------------------------

    def start(self) -> FakeLLMServer:
        handler = _make_handler(self)
        self._httpd = ThreadingHTTPServer((self._host, self._port), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fakeserver", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """The ``api_base`` to give litellm / the OpenAI SDK: ``http://127.0.0.1:<port>/v1``."""
        return f"http://{self._host}:{self.port}/v1"

    # script ------------------------------------------------------------

    def queue(self, *responses: Response) -> None:
        with self._lock:
            self._queue.extend(responses)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def wait_for_requests(self, n: int, timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.requests) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def _take(self, body: dict[str, Any]) -> Response:
        with self._lock:
            if self.max_prompt_chars is not None:
                size = prompt_chars(body)
                if size > self.max_prompt_chars:
                    if self.stream_overflow == "empty" and body.get("stream"):
                        return empty_stream()
                    return context_length_exceeded(self.max_prompt_chars, size)
            for i, resp in enumerate(self._queue):
                if _matches(resp.get("when"), body):
                    return self._queue.pop(i)
            if self.default is not None:
                return self.default
        return server_error("fake server: no scripted response left for this request")

    def _record(self, req: RecordedRequest) -> None:
        with self._cond:
            self.requests.append(req)
            self._cond.notify_all()
        if self.log_path is not None:
            with open(self.log_path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(req.to_json(), ensure_ascii=False) + "\n")

    def _note_disconnect(self) -> None:
        with self._lock:
            self.disconnects += 1
        self.client_disconnected.set()


def _chunk_obj(body: dict[str, Any], cid: str, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body.get("model") or "fake",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
    }


def _event_delta(event: dict[str, Any]) -> dict[str, Any]:
    if "text" in event:
        return {"role": "assistant", "content": event["text"]}
    if "reasoning" in event:
        return {"role": "assistant", "content": None, "reasoning_content": event["reasoning"]}
    call = event["tool_call"]
    tc: dict[str, Any] = {"index": call["index"], "function": {"arguments": call.get("arguments") or ""}}
    if call.get("id"):
        tc["id"] = call["id"]
        tc["type"] = "function"
    if call.get("name"):
        tc["function"]["name"] = call["name"]
    return {"role": "assistant", "content": None, "tool_calls": [tc]}


def _usage(resp: Response, body: dict[str, Any]) -> dict[str, int] | None:
    usage = resp.get("usage")
    if usage is None:
        return None
    if usage == "auto":
        out_chars = 0
        for ev in resp.get("events") or []:
            out_chars += len(ev.get("text") or ev.get("reasoning") or "")
            if "tool_call" in ev:
                call = ev["tool_call"]
                out_chars += len(call.get("arguments") or "") + len(call.get("name") or "")
        prompt = max(1, prompt_chars(body) // 4)
        completion = max(1, out_chars // 4)
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    usage = dict(usage)
    usage.setdefault("total_tokens", usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0))
    return usage


def _assemble(resp: Response, body: dict[str, Any], cid: str) -> dict[str, Any]:
    """A non-streaming ``chat.completion`` built from a stream script."""
    content = ""
    reasoning_text = ""
    calls: dict[int, dict[str, Any]] = {}
    for ev in resp.get("events") or []:
        if "text" in ev:
            content += ev["text"]
        elif "reasoning" in ev:
            reasoning_text += ev["reasoning"]
        elif "tool_call" in ev:
            c = ev["tool_call"]
            slot = calls.setdefault(c["index"], {"id": None, "type": "function",
                                                 "function": {"name": "", "arguments": ""}})
            slot["id"] = slot["id"] or c.get("id") or f"call_{uuid.uuid4().hex[:8]}"
            slot["function"]["name"] += c.get("name") or ""
            slot["function"]["arguments"] += c.get("arguments") or ""
    message: dict[str, Any] = {"role": "assistant", "content": content or None}
    if reasoning_text:
        message["reasoning_content"] = reasoning_text
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    finish = None if resp.get("silent") else resp.get("finish_reason") or ("tool_calls" if calls else "stop")
    out = {
        "id": cid, "object": "chat.completion", "created": int(time.time()),
        "model": body.get("model") or "fake",
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
    }
    usage = _usage(resp, body)
    if usage is not None:
        out["usage"] = usage
    return out


def _make_handler(server: FakeLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "FakeLLM/1.0"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self._json(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})
            else:
                self._json(404, {"error": {"message": f"no route {self.path}", "code": "not_found"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw_body = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw_body or b"{}")
            except json.JSONDecodeError:
                body = None
            headers = {k.lower(): v for k, v in self.headers.items()}
            record = RecordedRequest("POST", self.path, headers, body, raw_body)
            if not self.path.rstrip("/").endswith("/chat/completions"):
                record.response_kind = "error"
                server._record(record)
                self._json(404, {"error": {"message": f"no route {self.path}", "code": "not_found"}})
                return
            if not isinstance(body, dict):
                record.response_kind = "error"
                server._record(record)
                self._json(400, {"error": {"message": "request body is not a JSON object", "code": None}})
                return
            resp = server._take(body)
            record.response_kind = resp.get("kind", "?")
            server._record(record)
            if resp["kind"] == "error":
                self._json(resp["status"], resp["body"], resp.get("headers") or {})
            elif body.get("stream"):
                self._stream(resp, body)
            else:
                self._json(200, _assemble(resp, body, "chatcmpl-" + uuid.uuid4().hex[:12]))

        # -- writing

        def _json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(obj).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
            self.close_connection = True

        def _write_chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _sse(self, obj: Any) -> None:
            self._write_chunk(b"data: " + json.dumps(obj).encode("utf-8") + b"\n\n")

        def _reset(self) -> None:
            """Abort the connection with a TCP RST (SO_LINGER 0 + close)."""
            with contextlib.suppress(OSError):
                self.wfile.flush()
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.connection.close()
            self.close_connection = True

        def _wait_for_disconnect(self, limit: float = 60.0) -> None:
            sock = self.connection
            deadline = time.monotonic() + limit
            while time.monotonic() < deadline and not server._stopping.is_set():
                readable, _, _ = select.select([sock], [], [], 0.05)
                if readable:
                    try:
                        data = sock.recv(1024, socket.MSG_PEEK)
                    except OSError:
                        data = b""
                    if not data:
                        server._note_disconnect()
                        return
                    sock.recv(len(data))  # drain anything unexpected

        def _stream(self, resp: Response, body: dict[str, Any]) -> None:
            cid = "chatcmpl-" + uuid.uuid4().hex[:12]
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            events = resp.get("events") or []
            delay = float(resp.get("delay") or 0)
            try:
                for n, event in enumerate(events):
                    if resp.get("reset_after") is not None and n >= resp["reset_after"]:
                        self._reset()
                        return
                    if resp.get("hang_after") is not None and n >= resp["hang_after"]:
                        self._wait_for_disconnect()
                        return
                    if delay:
                        time.sleep(delay)
                    if "raw" in event:
                        self._write_chunk(event["raw"].encode("utf-8"))
                    else:
                        self._sse(_chunk_obj(body, cid, _event_delta(event), None))
                if resp.get("reset_after") is not None:
                    self._reset()
                    return
                if resp.get("hang_after") is not None:
                    self._wait_for_disconnect()
                    return
                if resp.get("silent"):
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                    return
                has_calls = any("tool_call" in e for e in events)
                finish = resp.get("finish_reason") or ("tool_calls" if has_calls else "stop")
                self._sse(_chunk_obj(body, cid, {}, finish))
                options = body.get("stream_options") or {}
                usage = _usage(resp, body)
                if usage is not None and options.get("include_usage"):
                    chunk = _chunk_obj(body, cid, {}, None)
                    chunk["choices"] = []
                    chunk["usage"] = usage
                    self._sse(chunk)
                if resp.get("done", True):
                    self._write_chunk(b"data: [DONE]\n\n")
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                server._note_disconnect()

    return Handler


# ---------------------------------------------------------------------- subprocess entry point


def load_script(path: Path) -> tuple[list[Response], Response | None, int | None, str]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if isinstance(data, list):
        return data, None, None, "error"
    if isinstance(data, dict):
        return (list(data.get("responses") or []), data.get("default"), data.get("max_prompt_chars"),
                str(data.get("stream_overflow") or "error"))
    raise ValueError(f"{path}: a script is a list of responses or an object with 'responses'")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fakeserver", description=__doc__.split("\n")[0])
    parser.add_argument("--port-file", required=True, type=Path, help="write the port here once listening")
    parser.add_argument("--script", type=Path, help="JSON script of responses")
    parser.add_argument("--log", type=Path, help="append each request received here (JSON lines)")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    responses, default, max_chars, overflow = load_script(args.script) if args.script else ([], None, None, "error")
    server = FakeLLMServer(responses, default=default, max_prompt_chars=max_chars, stream_overflow=overflow,
                           port=args.port, log_path=args.log)
    server.start()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    tmp = args.port_file.with_name(args.port_file.name + ".tmp")
    tmp.write_text(str(server.port), encoding="utf-8")
    os.replace(tmp, args.port_file)
    print(f"fakeserver listening on {server.base_url}", file=sys.stderr, flush=True)
    try:
        while not stop.wait(0.2):
            pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
