"""``ctxbench follow`` measured as a separate process, the way a status line runs it (issue 13).

- latency: a real Claude Code session's lines appended one at a time (every 0.25 s, each written in two
  pieces); for each line that starts a provider call, the time from the line being complete in the
  file (its newline written and flushed) to its ``call`` line read from the follower's stdout. Target:
  p95 < 1 s (the follower polls every 0.2 s);
- memory: two hours of following fast-forwarded — 36,000 lines an hour (a real session's lines
  repeated, each repetition with fresh message ids, so every response is a new call) appended as fast
  as possible; the follower's resident memory (``VmRSS``) once it has printed the first 1,000 lines'
  calls, after the first hour and after the second. Targets: < 5 MB over the first hour and < 3 MB
  over the second (the allocator's arenas move in steps of about 2 MB; a leak of 100 bytes a line
  would be 3.4 MB an hour); and the Python heap the follower keeps, traced in this process over the
  second hour: < 64 KiB (flat: nothing kept per line or per call).
"""

from __future__ import annotations

import gc
import json
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.engine_bench import MB, Figure

REPO = Path(__file__).resolve().parent.parent
SESSION = REPO.parent / "shared" / "data" / "sessions" / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
HOUR_LINES = 36_000
LATENCY_CALLS = 40


class _Follower:
    def __init__(self, path: Path, *args: str) -> None:
        env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True")
        self.proc = subprocess.Popen([sys.executable, "-m", "app.cli", "follow", str(path), *args], cwd=REPO,
                                     env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.lines: queue.Queue[tuple[float, dict[str, Any]]] = queue.Queue()
        self.count = 0  # calls printed
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            obj = json.loads(raw)
            self.count += obj["type"] == "call"
            self.lines.put((time.perf_counter(), obj))

    def rss(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def _starts_call(line: bytes, seen: set[tuple[str, str]]) -> bool:
    obj = json.loads(line)
    if obj.get("type") != "assistant" or not isinstance(obj.get("message"), dict):
        return False
    key = (str(obj["message"].get("id")), str(obj.get("requestId")))
    if key in seen:
        return False
    seen.add(key)
    return True


def bench_latency(tmp: Path) -> list[Figure]:
    lines = SESSION.read_bytes().splitlines(keepends=True)
    target = tmp / "latency.jsonl"
    target.touch()
    follower = _Follower(target, "--new-only")
    time.sleep(1.0)  # started and polling
    seen: set[tuple[str, str]] = set()
    delays: list[float] = []
    try:
        with open(target, "ab") as fh:
            for line in lines:
                if len(delays) >= LATENCY_CALLS:
                    break
                starts = _starts_call(line, seen)
                fh.write(line[: len(line) // 2])
                fh.flush()
                time.sleep(0.01)
                fh.write(line[len(line) // 2:])
                fh.flush()
                done = time.perf_counter()
                if starts:
                    printed, obj = follower.lines.get(timeout=10)
                    while obj["type"] != "call":  # a call_update of the previous response, printed late
                        printed, obj = follower.lines.get(timeout=10)
                    delays.append(printed - done)
                time.sleep(0.25 if starts else 0.005)
                while not follower.lines.empty():  # call_update lines of a response's later lines
                    follower.lines.get()
    finally:
        follower.stop()
    delays.sort()
    p50 = statistics.median(delays)
    p95 = delays[min(len(delays) - 1, int(0.95 * len(delays)))]
    return [
        Figure(f"follow: line complete -> call printed, p50 ({len(delays)} calls)", p50, "s", "--", None),
        Figure("follow: line complete -> call printed, p95", p95, "s", "< 1 s", p95 < 1.0),
    ]


def _hour_of_lines() -> list[bytes]:
    base = [json.loads(x) for x in SESSION.read_bytes().splitlines() if x.strip()]
    out: list[bytes] = []
    rep = 0
    while len(out) < HOUR_LINES:
        for obj in base:
            if obj.get("type") == "assistant" and isinstance(obj.get("message"), dict):
                obj = {**obj, "requestId": f"{obj.get('requestId')}-{rep}",
                       "message": {**obj["message"], "id": f"{obj['message'].get('id')}-{rep}"}}
            out.append((json.dumps(obj, separators=(",", ":")) + "\n").encode())
            if len(out) == HOUR_LINES:
                break
        rep += 1
    return out


def _wait_for(follower: _Follower, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while follower.count < count and time.monotonic() < deadline:
        time.sleep(0.05)
    if follower.count < count:
        raise RuntimeError(f"the follower printed {follower.count} of {count} calls in {timeout:.0f} s")


def _append(target: Path, lines: list[bytes]) -> None:
    with open(target, "ab") as fh:
        for i in range(0, len(lines), 500):  # as fast as possible, in writes of 500 lines
            fh.writelines(lines[i:i + 500])
            fh.flush()


def bench_memory(tmp: Path) -> list[Figure]:
    """Two fast-forwarded hours: the first grows the allocator's arenas once, the second must not grow."""
    lines = _hour_of_lines()
    warm = 1_000
    per_hour = _calls_in(lines)
    target = tmp / "hours.jsonl"
    target.touch()
    follower = _Follower(target)
    rss: list[int] = []
    try:
        _append(target, lines[:warm])
        _wait_for(follower, _calls_in(lines[:warm]), 30)
        time.sleep(0.5)
        rss.append(follower.rss())
        t0 = time.perf_counter()
        _append(target, lines[warm:])
        _wait_for(follower, per_hour, 300)
        took = time.perf_counter() - t0
        time.sleep(0.5)
        rss.append(follower.rss())
        _append(target, lines)  # the second hour (the same lines again: new calls, the ids follow the file)
        _wait_for(follower, 2 * per_hour, 300)
        time.sleep(0.5)
        rss.append(follower.rss())
    finally:
        follower.stop()
    size = target.stat().st_size
    first, second = (rss[1] - rss[0]) / MB, (rss[2] - rss[1]) / MB
    return [
        Figure(f"follow: an hour ({len(lines):,} lines, {size / 2 / MB:.0f} MB, {per_hour:,} calls) caught up in",
               took, "s", "--", None),
        Figure("follow: resident memory after 1,000 lines", rss[0] / MB, "MB", "--", None),
        Figure("follow: resident memory after one hour", rss[1] / MB, "MB", "--", None),
        Figure("follow: resident memory after two hours", rss[2] / MB, "MB", "--", None),
        Figure("follow: memory growth over the first hour", first, "MB", "< 5 MB", first < 5),
        Figure("follow: memory growth over the second hour", second, "MB", "< 3 MB", second < 3),
    ]


def bench_heap(tmp: Path) -> list[Figure]:
    """The same two hours in this process, the Python heap traced: what the follower keeps, not the allocator."""
    from engine.sources.follow import Follower

    lines = _hour_of_lines()
    target = tmp / "heap.jsonl"
    target.touch()
    follower = Follower(target)
    tracemalloc.start()
    try:
        traced = []
        for _ in range(2):
            with open(target, "ab") as fh:
                for i in range(0, len(lines), 500):
                    fh.writelines(lines[i:i + 500])
                    fh.flush()
                    follower.poll()
            gc.collect()
            traced.append(tracemalloc.get_traced_memory()[0])
    finally:
        tracemalloc.stop()
        target.unlink()
    growth = (traced[1] - traced[0]) / 1024
    return [Figure("follow: Python heap growth over the second hour (traced)", growth, "KiB", "< 64 KiB (flat)",
                   growth < 64)]


def _calls_in(lines: list[bytes]) -> int:
    """The calls in these lines (as the follower counts them)."""
    from engine.sources.follow import ClaudeCodeParser
    from engine.sources.model import ProviderCall

    parser = ClaudeCodeParser()
    count = 0
    for raw in lines:
        parser.feed(raw)
        count += sum(isinstance(item, ProviderCall) for item in parser.take().new)
    return count


def bench_all() -> list[Figure]:
    if not SESSION.is_file():
        return [Figure(f"no session at {SESSION}", float("nan"), "", "", False)]
    with tempfile.TemporaryDirectory(prefix="ctxbench-follow-") as name:
        tmp = Path(name)
        return bench_latency(tmp) + bench_memory(tmp) + bench_heap(tmp)


ALL: dict[str, Callable[[], list[Figure]]] = {"follow": bench_all}

if __name__ == "__main__":
    for fig in bench_all():
        print(fig.line(), flush=True)
