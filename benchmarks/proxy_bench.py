"""The recording proxy (issue 31) measured as it runs for real: three processes — a local aiohttp upstream, the
proxy (``python -m app.cli proxy --port 0``, writing its capture) and the client (this process) — on loopback.

- added latency per streamed chunk: the upstream writes 400 Server-Sent Events 5 ms apart, each carrying the
  monotonic time it was written; the client notes when each arrives, directly and through the proxy. Figure:
  p95 through the proxy − p95 direct (target ≤ 2 ms), and the p50s;
- time to first byte added: 60 streamed requests each way, median and p95 of (first byte through the proxy) −
  the same direct (target ≤ 5 ms);
- 100 MB: one streamed answer of 100 MB (Anthropic text deltas, reassembled by the proxy as it passes); the
  proxy's resident memory (``VmRSS``) sampled every 20 ms, its peak over its idle level after a warm-up
  exchange (target ≤ 50 MB), and the bytes received checked against the upstream's hash;
- 20 concurrent streams: 20 streams of 300 events at once; every byte of each arrives (the upstream's hash),
  and the capture holds 20 complete exchanges with the same hashes (target: 0 lost).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.engine_bench import MB, Figure

REPO = Path(__file__).resolve().parent.parent

UPSTREAM = """
import asyncio, hashlib, json, sys, time
from aiohttp import web

async def stream(request):
    n = int(request.query.get("n", "100")); gap = float(request.query.get("gap_ms", "5")) / 1000
    pad = "x" * int(request.query.get("pad", "200"))
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    await request.read()
    sha = hashlib.sha256()
    for i in range(n):
        data = json.dumps({"type": "content_block_delta", "index": 0, "i": i, "t": time.monotonic_ns(),
                           "delta": {"type": "text_delta", "text": pad}})
        piece = f"event: content_block_delta\\ndata: {data}\\n\\n".encode()
        sha.update(piece)
        await resp.write(piece)
        if gap:
            await asyncio.sleep(gap)
    app["hashes"][request.query.get("id", "")] = sha.hexdigest()
    await resp.write_eof()
    return resp

async def big(request):
    size = int(float(request.query.get("mb", "100")) * 2**20)
    await request.read()
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    sha = hashlib.sha256()
    head = ('event: message_start\\ndata: {"type":"message_start","message":{"id":"msg_big","type":"message",'
            '"role":"assistant","model":"m","content":[],"usage":{"input_tokens":5,"output_tokens":1}}}\\n\\n'
            'event: content_block_start\\ndata: {"type":"content_block_start","index":0,'
            '"content_block":{"type":"text","text":""}}\\n\\n').encode()
    event = ('event: content_block_delta\\ndata: {"type":"content_block_delta","index":0,'
             '"delta":{"type":"text_delta","text":"' + "y" * 900 + '"}}\\n\\n').encode()
    block = event * 64
    tail = ('event: message_delta\\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},'
            '"usage":{"output_tokens":123}}\\n\\nevent: message_stop\\ndata: {"type":"message_stop"}\\n\\n').encode()
    sent = 0
    for piece in [head]:
        sha.update(piece); await resp.write(piece); sent += len(piece)
    while sent < size:
        sha.update(block); await resp.write(block); sent += len(block)
    sha.update(tail); await resp.write(tail)
    app["hashes"]["big"] = sha.hexdigest()
    await resp.write_eof()
    return resp

async def hashes(request):
    return web.json_response(app["hashes"])

app = web.Application()
app["hashes"] = {}
app.router.add_post("/v1/messages", stream)
app.router.add_post("/big/v1/messages", big)
app.router.add_get("/hashes", hashes)

async def main():
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(runner.addresses[0][1], flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


class _Procs:
    """The upstream and the proxy, started as processes; stopped with the context."""

    def __init__(self, tmp: Path) -> None:
        env = dict(os.environ, PYTHONPATH=str(REPO), CTXBENCH_DATA_DIR=str(tmp / "data"),
                   LITELLM_LOCAL_MODEL_COST_MAP="True")
        self.upstream = subprocess.Popen([sys.executable, "-c", UPSTREAM], stdout=subprocess.PIPE, env=env)
        assert self.upstream.stdout is not None
        self.upstream_url = f"http://127.0.0.1:{int(self.upstream.stdout.readline())}"
        self.capture = tmp / "bench-capture.jsonl"
        self.proxy = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "proxy", "--port", "0", "--upstream", self.upstream_url,
             "--capture", str(self.capture), "--max-mb", "4096"],
            cwd=REPO, stdout=subprocess.PIPE, env=env)
        assert self.proxy.stdout is not None
        self.proxy_url = json.loads(self.proxy.stdout.readline())["url"]
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.proxy.stdout is not None
        for _ in self.proxy.stdout:
            pass

    def rss(self) -> int:
        for line in Path(f"/proc/{self.proxy.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def __enter__(self) -> _Procs:
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in (self.proxy, self.upstream):
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _stream_latencies(base: str, n: int, gap_ms: float, rid: str) -> tuple[list[float], float, str]:
    """Per event: arrival − the upstream's write time (ms); the time to the first byte (ms); the body's hash."""
    import aiohttp

    latencies: list[float] = []
    sha = hashlib.sha256()
    buf = b""
    async with aiohttp.ClientSession(auto_decompress=False) as client:
        t0 = time.perf_counter()
        async with client.post(f"{base}/v1/messages?n={n}&gap_ms={gap_ms}&id={rid}", data=b"{}") as resp:
            first = -1.0
            async for chunk in resp.content.iter_any():
                now = time.monotonic_ns()
                if first < 0:
                    first = (time.perf_counter() - t0) * 1000
                sha.update(chunk)
                buf += chunk
                while b"\n\n" in buf:
                    event, buf = buf.split(b"\n\n", 1)
                    data = event.split(b"data: ", 1)[1]
                    latencies.append((now - json.loads(data)["t"]) / 1e6)
    return latencies, first, sha.hexdigest()


def bench_chunk_latency(procs: _Procs, events: int = 400, gap_ms: float = 5) -> list[Figure]:
    direct, _, _ = asyncio.run(_stream_latencies(procs.upstream_url, events, gap_ms, "lat-d"))
    proxied, _, _ = asyncio.run(_stream_latencies(procs.proxy_url, events, gap_ms, "lat-p"))
    added95 = _pct(proxied, 0.95) - _pct(direct, 0.95)
    added50 = statistics.median(proxied) - statistics.median(direct)
    return [Figure(f"proxy: added latency per streamed chunk, p95 ({events} events)", added95, "ms", "<= 2 ms",
                   added95 <= 2.0),
            Figure("proxy: added latency per streamed chunk, p50", added50, "ms", "(reported)", None),
            Figure("proxy: chunk latency direct, p95", _pct(direct, 0.95), "ms", "(reported)", None)]


def bench_ttfb(procs: _Procs, rounds: int = 60) -> list[Figure]:
    added = []
    for i in range(rounds):  # alternate, so that load on the machine falls on both alike
        _, direct, _ = asyncio.run(_stream_latencies(procs.upstream_url, 1, 0, f"t-d{i}"))
        _, proxied, _ = asyncio.run(_stream_latencies(procs.proxy_url, 1, 0, f"t-p{i}"))
        added.append(proxied - direct)
    median = statistics.median(added)
    return [Figure(f"proxy: time to first byte added, median of {rounds}", median, "ms", "<= 5 ms", median <= 5.0),
            Figure("proxy: time to first byte added, p95", _pct(added, 0.95), "ms", "(reported)", None)]


async def _big(base: str, mb: float) -> tuple[int, str]:
    import aiohttp

    sha = hashlib.sha256()
    size = 0
    async with aiohttp.ClientSession(auto_decompress=False) as client, client.post(
            f"{base}/big/v1/messages?mb={mb}", data=b"{}") as resp:
        async for chunk in resp.content.iter_chunked(1 << 16):
            sha.update(chunk)
            size += len(chunk)
    return size, sha.hexdigest()


def _upstream_hashes(procs: _Procs) -> dict[str, str]:
    import urllib.request

    with urllib.request.urlopen(procs.upstream_url + "/hashes", timeout=10) as resp:
        return dict(json.loads(resp.read()))


def bench_big(procs: _Procs, mb: float = 100) -> list[Figure]:
    asyncio.run(_big(procs.proxy_url, 1))  # warm-up: the proxy's buffers and the capture's first write
    time.sleep(0.3)
    idle = procs.rss()
    peak = [idle]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], procs.rss())
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    t0 = time.perf_counter()
    size, sha = asyncio.run(_big(procs.proxy_url, mb))
    seconds = time.perf_counter() - t0
    time.sleep(0.5)  # the capture line of the answer is written after its last byte
    done.set()
    sampler.join()
    growth = (peak[0] - idle) / MB
    whole = sha == _upstream_hashes(procs).get("big")
    return [Figure(f"proxy: {mb:.0f} MB streamed answer, RSS growth over idle", growth, "MB", "<= 50 MB",
                   growth <= 50 and whole),
            Figure(f"proxy: {mb:.0f} MB answer passed whole (hash equal)", float(whole), "bool", "1", whole),
            Figure(f"proxy: {mb:.0f} MB answer throughput", size / MB / seconds, "MB/s", "(reported)", None)]


async def _concurrent(base: str, n: int, events: int) -> list[str]:
    results = await asyncio.gather(*(_stream_latencies(base, events, 1, f"c{i}") for i in range(n)))
    return [sha for _, _, sha in results]


def bench_concurrent(procs: _Procs, streams: int = 20, events: int = 300) -> list[Figure]:
    got = asyncio.run(_concurrent(procs.proxy_url, streams, events))
    sent = _upstream_hashes(procs)
    time.sleep(0.5)
    recorded = {}
    for line in procs.capture.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec.get("type") == "exchange" and "id=c" in str(rec.get("path")):
            recorded[str(rec["path"]).rsplit("id=", 1)[1]] = (rec["outcome"], rec["response"]["sha256"])
    lost = sum(1 for i in range(streams) if got[i] != sent.get(f"c{i}"))
    unrecorded = sum(1 for i in range(streams) if recorded.get(f"c{i}") != ("complete", sent.get(f"c{i}")))
    return [Figure(f"proxy: {streams} concurrent streams, streams not passed whole", float(lost), "streams", "0",
                   lost == 0),
            Figure(f"proxy: {streams} concurrent streams, exchanges not in the capture", float(unrecorded), "streams",
                   "0", unrecorded == 0)]


def run(events: int = 400, rounds: int = 60, mb: float = 100, streams: int = 20) -> list[Figure]:
    with tempfile.TemporaryDirectory(prefix="ctxbench-proxy-") as tmp, _Procs(Path(tmp)) as procs:
        figures = bench_chunk_latency(procs, events)
        figures += bench_ttfb(procs, rounds)
        figures += bench_big(procs, mb)
        figures += bench_concurrent(procs, streams)
        return figures


def bench_all() -> list[Figure]:
    return run()


ALL: dict[str, Callable[[], list[Figure]]] = {"proxy": bench_all}


def main(argv: list[str]) -> int:
    figures = run()
    for fig in figures:
        print(fig.line(), flush=True)
    return int(any(f.ok is False for f in figures))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

