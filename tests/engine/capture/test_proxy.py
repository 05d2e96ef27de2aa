"""The recording proxy against a local aiohttp upstream (real HTTP on loopback): streaming passed through chunk by
chunk and unchanged, gzip and zstd request bodies (an encoding it cannot read refused), upstream errors and
status codes passed back, keep-alive, WebSocket refused, credentials kept out of the capture, and a proxy killed
mid-stream losing no finished exchange."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from aiohttp import web

from engine.capture.files import CaptureWriter
from engine.capture.proxy import ProxyError, RecordingProxy, Upstreams, join_url

REPO = Path(__file__).resolve().parents[3]
KEY = "sk-ant-PLANTED-0123456789abcdef"


class Upstream:
    """A local upstream: records what it received (raw bytes, headers), answers per path."""

    def __init__(self) -> None:
        self.received: list[tuple[str, str, bytes, dict[str, str]]] = []
        self.sent: list[bytes] = []
        self.gate: asyncio.Event | None = None  # a stream that waits half way for this
        self.runner: web.AppRunner | None = None
        self.port = 0
        self.connections: set[tuple[str, int]] = set()

    async def start(self) -> Upstream:
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self.runner = web.AppRunner(app, access_log=None, auto_decompress=False)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self.runner.addresses[0][1])
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        self.received.append((request.method, request.path_qs, raw, dict(request.headers)))
        if request.transport is not None:
            self.connections.add(request.transport.get_extra_info("peername"))
        path = request.path
        if path == "/v1/messages":
            return await self.anthropic_stream(request)
        if path == "/error":
            body = json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}).encode()
            self.sent.append(body)
            return web.Response(status=529, body=body, content_type="application/json", headers={"x-why": "busy"})
        if path == "/v1/chat/completions":
            body = json.dumps({"id": "c1", "object": "chat.completion", "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 12, "completion_tokens": 1, "total_tokens": 13}}).encode()
            self.sent.append(body)
            return web.Response(body=body, content_type="application/json")
        if path == "/gz":
            body = gzip.compress(b'{"usage": {"prompt_tokens": 5}}')
            self.sent.append(body)
            return web.Response(body=body, headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})
        if path == "/cut":  # a stream the upstream breaks off
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            await resp.write(b"event: message_start\ndata: {}\n\n")
            assert request.transport is not None
            request.transport.close()
            return resp
        body = b"plain " + raw
        self.sent.append(body)
        return web.Response(body=body, content_type="text/plain")

    async def anthropic_stream(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "request-id": "req_1"})
        await resp.prepare(request)
        events = [
            ("message_start", {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role":
                               "assistant", "model": "claude-x", "content": [], "usage": {
                                   "input_tokens": 10, "cache_read_input_tokens": 90, "output_tokens": 1}}}),
            ("content_block_start", {"type": "content_block_start", "index": 0,
                                     "content_block": {"type": "text", "text": ""}}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": {"type": "text_delta", "text": "Hel"}}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": {"type": "text_delta", "text": "lo é"}}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("content_block_start", {"type": "content_block_start", "index": 1, "content_block": {
                "type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}}),
            ("content_block_delta", {"type": "content_block_delta", "index": 1,
                                     "delta": {"type": "input_json_delta", "partial_json": '{"comm'}}),
            ("content_block_delta", {"type": "content_block_delta", "index": 1,
                                     "delta": {"type": "input_json_delta", "partial_json": 'and": "ls"}'}}),
            ("content_block_stop", {"type": "content_block_stop", "index": 1}),
            ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
                               "usage": {"output_tokens": 7}}),
            ("message_stop", {"type": "message_stop"}),
        ]
        sent = b""
        for n, (name, data) in enumerate(events):
            piece = f"event: {name}\r\ndata: {json.dumps(data, ensure_ascii=False)}\r\n\r\n".encode()
            if n == 3:  # an event split inside a UTF-8 character and a line end
                cut = piece.index("é".encode()) + 1
                for part in (piece[:cut], piece[cut:]):
                    await resp.write(part)
                    sent += part
                    await asyncio.sleep(0.01)
                continue
            await resp.write(piece)
            sent += piece
            if n == 5 and self.gate is not None:
                await self.gate.wait()
            await asyncio.sleep(0.005)
        self.sent.append(sent)
        await resp.write_eof()
        return resp


@pytest_asyncio.fixture
async def upstream() -> AsyncIterator[Upstream]:
    up = await Upstream().start()
    yield up
    await up.stop()


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def exchanges(path: Path) -> list[dict[str, Any]]:
    return [x for x in lines(path) if x["type"] == "exchange"]


async def proxy_for(up: Upstream, tmp_path: Path, **kwargs: Any) -> tuple[RecordingProxy, CaptureWriter]:
    writer = CaptureWriter(tmp_path / "cap.jsonl", **kwargs)
    proxy = await RecordingProxy(writer, Upstreams(override=up.url)).start()
    return proxy, writer


@pytest.mark.asyncio
async def test_a_stream_passes_chunk_by_chunk_unchanged_and_is_reassembled(upstream: Upstream,
                                                                             tmp_path: Path) -> None:
    proxy, writer = await proxy_for(upstream, tmp_path)
    upstream.gate = asyncio.Event()
    body = json.dumps({"model": "claude-x", "stream": True, "max_tokens": 100, "system": "Be brief.",
                       "messages": [{"role": "user", "content": "hi"}]}).encode()
    try:
        async with aiohttp.ClientSession(auto_decompress=False) as client:
            async with client.post(proxy.url + "/v1/messages", data=body,
                                   headers={"x-api-key": KEY, "Content-Type": "application/json",
                                            "anthropic-version": "2023-06-01"}) as resp:
                assert resp.status == 200 and resp.headers["request-id"] == "req_1"
                got = b""
                # the first events arrive while the upstream still waits: nothing is held back
                while b"tool_use" not in got:
                    got += await asyncio.wait_for(resp.content.readany(), 5)
                assert not upstream.sent  # the upstream has not finished yet
                upstream.gate.set()
                got += await resp.read()
    finally:
        await proxy.stop()
        writer.close()
    assert got == upstream.sent[0]
    assert upstream.received[0][2] == body  # forwarded byte for byte
    (ex,) = exchanges(tmp_path / "cap.jsonl")
    assert ex["request"]["body"] == body.decode() and ex["family"] == "anthropic"
    assert ex["response"]["sha256"] == hashlib.sha256(got).hexdigest() and ex["response"]["bytes"] == len(got)
    assert ex["response"]["body"].encode() == got
    msg = ex["response"]["message"]
    assert msg["content"][0] == {"type": "text", "text": "Hello é"}
    assert msg["content"][1]["input"] == {"command": "ls"} and msg["stop_reason"] == "tool_use"
    assert ex["response"]["usage"] == {"input_tokens": 10, "cache_read_input_tokens": 90, "output_tokens": 7}
    assert ex["outcome"] == "complete" and ex["timings"]["chunks"] >= 11
    assert ["x-api-key", "[redacted]"] in ex["request"]["headers"]
    assert KEY not in (tmp_path / "cap.jsonl").read_text()


@pytest.mark.asyncio
async def test_a_client_that_goes_away_mid_stream_is_recorded_as_such(upstream: Upstream, tmp_path: Path) -> None:
    proxy, writer = await proxy_for(upstream, tmp_path)
    upstream.gate = asyncio.Event()
    try:
        async with aiohttp.ClientSession() as client:
            resp = await client.post(proxy.url + "/v1/messages", data=b'{"stream": true}')
            assert b"message_start" in await resp.content.readany()
            resp.close()  # the client hangs up while the answer streams
        await asyncio.sleep(0.1)
        upstream.gate.set()
        for _ in range(100):
            if writer.exchanges:
                break
            await asyncio.sleep(0.05)
    finally:
        await proxy.stop()
        writer.close()
    (ex,) = exchanges(tmp_path / "cap.jsonl")
    assert ex["outcome"] == "client_disconnected"
    assert ex["response"]["message"]["id"] == "msg_1"  # what had passed is kept


@pytest.mark.asyncio
async def test_compressed_request_bodies_are_forwarded_as_sent_and_recorded_decoded(upstream: Upstream,
                                                                                    tmp_path: Path) -> None:
    import zstandard

    proxy, writer = await proxy_for(upstream, tmp_path)
    plain = json.dumps({"model": "gpt-x", "messages": [{"role": "user", "content": "x" * 5000}]}).encode()
    packed = gzip.compress(plain)
    zstd_packed = zstandard.ZstdCompressor().compress(plain[:3000]) + zstandard.ZstdCompressor().compress(plain[3000:])
    try:
        async with aiohttp.ClientSession() as client:
            async with client.post(proxy.url + "/v1/chat/completions", data=packed, headers={
                    "Content-Encoding": "gzip", "Content-Type": "application/json"}) as resp:
                assert resp.status == 200
                answer = await resp.json()
            async with client.post(proxy.url + "/v1/chat/completions", data=zstd_packed, headers={
                    "Content-Encoding": "zstd", "Content-Type": "application/json"}) as resp:  # two frames
                assert resp.status == 200
            async with client.post(proxy.url + "/v1/chat/completions", data=b"zz", headers={
                    "Content-Encoding": "zstd"}) as resp:
                assert resp.status == 400  # not zstd at all: said, nothing forwarded
                broken = await resp.json()
            async with client.post(proxy.url + "/v1/chat/completions", data=b"zz", headers={
                    "Content-Encoding": "br"}) as resp:
                assert resp.status == 415
                refusal = await resp.json()
    finally:
        await proxy.stop()
        writer.close()
    assert answer["usage"]["prompt_tokens"] == 12
    assert upstream.received[0][2] == packed and upstream.received[0][3]["Content-Encoding"] == "gzip"
    assert upstream.received[1][2] == zstd_packed and upstream.received[1][3]["Content-Encoding"] == "zstd"
    assert len(upstream.received) == 2  # the broken and the unreadable bodies never went upstream
    assert "zstd" in broken["error"]["message"]
    assert "br" in refusal["error"]["message"] and "uncompressed" in refusal["error"]["message"]
    first, second, third, fourth = exchanges(tmp_path / "cap.jsonl")
    assert first["request"]["body"] == plain.decode() and first["request"]["content_encoding"] == "gzip"
    assert first["response"]["usage"]["prompt_tokens"] == 12
    assert second["request"]["body"] == plain.decode() and second["request"]["content_encoding"] == "zstd"
    assert third["outcome"] == "refused" and third["response"]["status"] == 400
    assert fourth["outcome"] == "refused" and fourth["response"]["status"] == 415


@pytest.mark.asyncio
async def test_upstream_status_codes_and_errors_pass_back(upstream: Upstream, tmp_path: Path) -> None:
    proxy, writer = await proxy_for(upstream, tmp_path)
    try:
        async with aiohttp.ClientSession() as client:
            async with client.post(proxy.url + "/error", data=b"{}") as resp:
                assert resp.status == 529 and resp.headers["x-why"] == "busy"
                assert await resp.read() == upstream.sent[0]
            async with client.get(proxy.url + "/gz") as resp:  # an encoded answer: passed as it came
                assert resp.headers["Content-Encoding"] == "gzip"
                assert await resp.json() == {"usage": {"prompt_tokens": 5}}
            with pytest.raises(aiohttp.ClientPayloadError):
                async with client.post(proxy.url + "/cut", data=b"{}") as resp:
                    await resp.read()  # the upstream broke off: so does the answer (never a clean end)
    finally:
        await proxy.stop()
        writer.close()
    err, gz, cut = exchanges(tmp_path / "cap.jsonl")
    assert err["response"]["status"] == 529 and err["response"]["message"]["error"]["type"] == "overloaded_error"
    assert gz["response"]["message"] == {"usage": {"prompt_tokens": 5}}
    assert cut["outcome"] == "upstream_error" and cut["response"]["events"] == 1


@pytest.mark.asyncio
async def test_an_unreachable_upstream_is_a_502_naming_it(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    writer = CaptureWriter(tmp_path / "cap.jsonl")
    proxy = await RecordingProxy(writer, Upstreams(override=f"http://127.0.0.1:{dead}")).start()
    try:
        async with aiohttp.ClientSession() as client, client.post(proxy.url + "/v1/messages?key=" + KEY,
                                                                  data=b"{}") as resp:
            assert resp.status == 502
            text = await resp.text()
    finally:
        await proxy.stop()
        writer.close()
    assert f"127.0.0.1:{dead}" in text and KEY not in text
    (ex,) = exchanges(tmp_path / "cap.jsonl")
    assert ex["outcome"] == "upstream_unreachable" and ex["path"] == "/v1/messages?key=[redacted]"


@pytest.mark.asyncio
async def test_keep_alive_on_both_sides(upstream: Upstream, tmp_path: Path) -> None:
    proxy, writer = await proxy_for(upstream, tmp_path)
    try:
        created: list[int] = []

        async def on_create(*_: Any) -> None:
            created.append(1)

        trace = aiohttp.TraceConfig()
        trace.on_connection_create_end.append(on_create)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1), trace_configs=[trace]) as client:
            for i in range(5):
                async with client.post(proxy.url + "/echo", data=f"n{i}".encode()) as resp:
                    assert await resp.read() == f"plain n{i}".encode()
    finally:
        await proxy.stop()
        writer.close()
    assert len(created) == 1  # one client connection for the five
    assert len(upstream.connections) == 1  # and one upstream
    assert [x["seq"] for x in exchanges(tmp_path / "cap.jsonl")] == [1, 2, 3, 4, 5]


@pytest.mark.asyncio
async def test_websocket_upgrades_are_refused_with_a_message(upstream: Upstream, tmp_path: Path) -> None:
    proxy, writer = await proxy_for(upstream, tmp_path)
    try:
        async with aiohttp.ClientSession() as client:
            with pytest.raises(aiohttp.WSServerHandshakeError) as err:
                await client.ws_connect(proxy.url + "/v1/responses")
            assert err.value.status == 501
    finally:
        await proxy.stop()
        writer.close()
    (ex,) = exchanges(tmp_path / "cap.jsonl")
    assert "WebSocket" in ex["response"]["error"] and not upstream.received


@pytest.mark.asyncio
async def test_listens_on_loopback_only_and_refuses_a_loop(upstream: Upstream, tmp_path: Path) -> None:
    with pytest.raises(ProxyError, match="loopback"):
        RecordingProxy(None, host="0.0.0.0")
    proxy = await RecordingProxy(None).start()
    proxy.upstreams = Upstreams(override=proxy.url)
    try:
        async with aiohttp.ClientSession() as client, client.post(proxy.url + "/v1/messages", data=b"{}") as resp:
            assert resp.status == 508
    finally:
        await proxy.stop()


def test_credentials_in_every_place_reach_no_file(tmp_path: Path) -> None:
    async def main() -> None:
        up = await Upstream().start()
        writer = CaptureWriter(tmp_path / "cap.jsonl")
        proxy = await RecordingProxy(writer, Upstreams(override=up.url)).start()
        try:
            async with aiohttp.ClientSession() as client:
                headers = {"Authorization": f"Bearer {KEY}", "x-api-key": KEY, "x-goog-api-key": KEY,
                           "Cookie": f"session={KEY}", "api-key": KEY}
                async with client.post(proxy.url + f"/v1beta/models/m:generateContent?key={KEY}&alt=sse",
                                       data=json.dumps({"note": f"the key is {KEY}"}).encode(),
                                       headers=headers) as resp:
                    assert KEY in await resp.text()  # the client gets its answer unchanged (the upstream echoes)
        finally:
            await proxy.stop()
            writer.close()
            await up.stop()
        assert up.received[0][3]["x-goog-api-key"] == KEY  # forwarded to the upstream, as it must be
        assert f"key={KEY}" in up.received[0][1]

    asyncio.run(main())
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert files
    for path in files:
        assert KEY.encode() not in path.read_bytes(), path
    (ex,) = exchanges(tmp_path / "cap.jsonl")
    assert ex["request"]["body"] == json.dumps({"note": "the key is [redacted]"})


def test_capture_file_is_readable_by_the_user_only_and_rolls_over(tmp_path: Path) -> None:
    writer = CaptureWriter(tmp_path / "caps" / "c.jsonl", max_bytes=2000)
    for i in range(10):
        writer.append({"type": "exchange", "seq": i + 1, "pad": "x" * 500})
    writer.close()
    assert stat.S_IMODE((tmp_path / "caps").stat().st_mode) == 0o700
    parts = sorted((tmp_path / "caps").iterdir())
    assert len(parts) >= 3 and len(writer.paths) == len(parts)
    seqs = []
    for path in writer.paths:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert path.stat().st_size <= 2000
        head, *rest = lines(path)
        assert head["type"] == "capture" and head["id"] == "c"
        seqs += [r["seq"] for r in rest]
    assert seqs == list(range(1, 11))
    assert lines(writer.paths[1])[0]["previous"] == "c.jsonl"


def test_join_url_does_not_repeat_the_base_path() -> None:
    assert join_url("https://api.openai.com/v1", "/v1/responses") == "https://api.openai.com/v1/responses"
    assert join_url("https://api.openai.com/v1", "/responses?x=1") == "https://api.openai.com/v1/responses?x=1"
    assert join_url("http://h:1", "/v1/messages") == "http://h:1/v1/messages"
    assert Upstreams().url_for("gemini", "/v1beta/models/m:streamGenerateContent?alt=sse") == (
        "https://generativelanguage.googleapis.com/v1beta/models/m:streamGenerateContent?alt=sse")
    assert Upstreams().url_for("anthropic", "/v1/messages").startswith("https://api.anthropic.com/")


KILL_SCRIPT = """
import asyncio, sys
from engine.capture.files import CaptureWriter
from engine.capture.proxy import RecordingProxy, Upstreams
async def main():
    proxy = await RecordingProxy(CaptureWriter(__import__('pathlib').Path(sys.argv[1])),
                                 Upstreams(override=sys.argv[2])).start()
    print(proxy.port, flush=True)
    await asyncio.Event().wait()
asyncio.run(main())
"""


def test_killing_the_proxy_mid_stream_loses_no_finished_exchange(tmp_path: Path) -> None:
    cap = tmp_path / "cap.jsonl"

    async def main() -> None:
        up = await Upstream().start()
        proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, str(cap), up.url], cwd=REPO,
                                stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)})
        try:
            assert proc.stdout is not None
            port = int(await asyncio.to_thread(proc.stdout.readline))
            url = f"http://127.0.0.1:{port}"
            async with aiohttp.ClientSession() as client:
                for i in range(3):
                    async with client.post(url + "/v1/messages", data=json.dumps({"n": i}).encode()) as resp:
                        await resp.read()
                up.gate = asyncio.Event()
                async with client.post(url + "/v1/messages", data=b'{"n": 3}') as resp:
                    first = await resp.content.readany()
                    assert b"message_start" in first
                    proc.send_signal(signal.SIGKILL)  # mid-stream
                    with pytest.raises(aiohttp.ClientPayloadError):
                        await resp.read()
        finally:
            proc.kill()
            proc.wait()
            if up.gate is not None:
                up.gate.set()
            await up.stop()

    started = time.monotonic()
    asyncio.run(main())
    assert time.monotonic() - started < 30
    done = exchanges(cap)
    assert [json.loads(x["request"]["body"])["n"] for x in done] == [0, 1, 2]  # every finished one, whole
    assert all(x["outcome"] == "complete" for x in done)
    assert cap.read_bytes().endswith(b"\n")


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "zstd"])
def test_a_body_not_valid_in_its_encoding_is_recorded_as_not_decoded(encoding: str) -> None:
    from engine.capture.proxy import _ResponseRecorder

    recorder = _ResponseRecorder("openai-chat", "application/json", encoding, 1024)
    recorder.feed(b"this is no " + encoding.encode() + b" body at all")
    recorder.feed(b"more")  # passed on as is, not decoded again
    assert recorder.undecoded and recorder.problem.startswith(f"the {encoding} body could not be decoded: ")
    assert recorder.kept == [] and recorder.chunks == 2


def test_a_failing_listener_is_said_and_logged_and_never_stops_the_proxy(caplog: pytest.LogCaptureFixture) -> None:
    def listener(rec: dict[str, Any]) -> None:
        raise RuntimeError("the window is gone")

    proxy = RecordingProxy(None, on_exchange=listener)
    with caplog.at_level("WARNING", logger="engine.capture.proxy"):
        proxy._record_now({"seq": 1})
        proxy._record_now({"seq": 2})
    assert proxy.exchanges == 2
    assert proxy.problems == ["exchange listener failed: RuntimeError: the window is gone"] * 2
    assert [r.exc_info is not None and r.exc_info[0] for r in caplog.records] == [RuntimeError, RuntimeError]
