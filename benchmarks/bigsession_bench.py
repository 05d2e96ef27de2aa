"""Following large sessions (issue 20): 3, 30 and 100 MB Claude Code sessions made by
``benchmarks/bigsession.py`` (a real session copied with fresh ids and its chain continued: nothing
collapses), kept in ``/tmp/ctxbench-bigsession`` and reused across runs.

``python -m benchmarks big-reader``: the reader alone, each size in a fresh process —

- the whole read (``read_claude_code``): time and peak memory (the process's max RSS minus its RSS
  before the read);
- at 100 MB, ``engine.ingest.import_source`` (what ``ctxbench import`` does), time and peak memory:
  the issue's "import no slower than before" (compare with the same benchmark on the code before);
- the incremental reader (``ClaudeCodeReader(path).feed``): its first read of the file, then the cost of
  appending batches of 20 lines (p50/p95 per batch, CPU per line) — the new follow path's reading
  cost — beside the old path's: ``read_claude_code(path, lines=all_lines)`` per batch (what the window
  did on every change), measured in the same process.

``python -m benchmarks big-follow``: through the Qt-free service (``engine.workbench``), each size in a
fresh process on a plain asyncio loop —

- open: ``open_source`` → ``SessionLoaded`` (after a warm-up open of a small file, so the service's
  modules are imported); targets ≤ 1 s at 30 MB, ≤ 3 s at 100 MB;
- follow: real lines (the ones the generator would write next) appended one at a time at 20 lines/s
  for :data:`FOLLOW_S` seconds, each write followed by ``file_changed`` (what the window's file
  watcher does); write → update latency per line that makes a message or a call: from the write of
  the line to the first event showing a message or call with its timestamp (``MessageAdded``,
  ``CallRecorded``, or a ``SessionLoaded`` holding it); p50/p95, target p95 ≤ 200 ms;
- CPU of the process while following (``time.process_time`` delta / wall, all threads), target
  ≤ 10 % of a core at 100 MB (reported at the other sizes);
- RSS while following: sampled every 0.5 s; growth from the first 5 s to the end, target < 16 MB
  ("flat").

The machine is shared: run one of them at a time (``big-follow`` takes a few minutes with the old
path, most of it at 100 MB).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.engine_bench import MB, Figure

REPO = Path(__file__).resolve().parent.parent
SIZES_MB = (3, 30, 100)
BATCH = 20  # lines per appended batch (one second at 20 lines/s)
BATCHES = 40  # incremental batches measured
OLD_BATCHES = {3: 5, 30: 3, 100: 2}  # whole re-reads measured (each costs a whole read)
RATE = 20.0  # lines per second while following
FOLLOW_S = 20.0
CATCH_UP_S = 60.0  # after the last write, how long the service may take to show everything
SEED = 0


def _ts(text: str) -> str:
    """A line's timestamp as the messages and calls carry it."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).isoformat(timespec="milliseconds")


def _rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _maxrss() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _child(args: list[str], timeout: float = 900) -> dict[str, Any]:
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True")
    proc = subprocess.run([sys.executable, "-m", "benchmarks.bigsession_bench", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError(f"child {args[0]} failed: {proc.stderr.strip()[-400:]}")


def _q(values: list[float], p: float) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[round(p * 100) - 1]


# ---------------------------------------------------------------------------------------------- reader

def _reader_child(mode: str, path: str, tail_path: str, size_mb: int) -> dict[str, Any]:
    from engine.sources.claude_code import ClaudeCodeReader, read_claude_code

    p = Path(path)
    base = _rss()  # the peak is the max RSS over the read, above the RSS before it
    if mode == "import":  # what ``ctxbench import`` does: read, write the session folder
        from engine.ingest import import_source
        from engine.store.config import Settings

        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            import_source(p, session_dir=Path(tmp) / "s", settings=Settings().replace(estimator="heuristic"))
            took = time.perf_counter() - t0
        return {"import_s": took, "peak": _maxrss() - base}
    if mode == "bulk":
        t0 = time.perf_counter()
        src = read_claude_code(p, subagents=False)
        took = time.perf_counter() - t0
        return {"read_s": took, "peak": _maxrss() - base, "calls": len(src.calls), "messages": len(src.messages)}
    tail = Path(tail_path).read_bytes().splitlines(keepends=True)
    reader = ClaudeCodeReader(p)
    t0 = time.perf_counter()
    with open(p, "rb") as fh:
        reader.feed_lines(fh)
    first = time.perf_counter() - t0
    peak = _maxrss() - base
    batches = [b"".join(tail[i:i + BATCH]) for i in range(0, BATCH * BATCHES, BATCH)]
    wall, cpu = [], 0.0
    for data in batches:
        c0, t0 = time.process_time(), time.perf_counter()
        reader.feed(data)
        wall.append(time.perf_counter() - t0)
        cpu += time.process_time() - c0
    out = {"first_s": first, "first_peak": peak, "batch_ms": [w * 1000 for w in wall],
           "cpu_per_line": cpu / (BATCH * BATCHES), "rebuilds": reader.rebuilds, "calls": len(reader.session.calls)}
    # the old path: every change re-read the whole log (its lines already in memory)
    lines = p.read_bytes().splitlines(keepends=True)
    old_wall, old_cpu = [], 0.0
    for k in range(OLD_BATCHES.get(size_mb, 2)):
        lines.extend(tail[k * BATCH:(k + 1) * BATCH])
        c0, t0 = time.process_time(), time.perf_counter()
        read_claude_code(p, lines=lines, subagents=False)
        old_wall.append(time.perf_counter() - t0)
        old_cpu += time.process_time() - c0
    out.update(old_batch_ms=[w * 1000 for w in old_wall], old_cpu_per_line=old_cpu / (BATCH * len(old_wall)))
    return out


def bench_reader() -> list[Figure]:
    from benchmarks.bigsession import cached_claude_session

    figs: list[Figure] = []
    for mb in SIZES_MB:
        path, _ = cached_claude_session(mb * MB, SEED)
        tail_file = path.with_suffix(".tail")
        size = path.stat().st_size
        bulk = _child(["reader", "bulk", str(path), str(tail_file), str(mb)])
        figs.append(Figure(f"big {mb} MB: whole read ({bulk['calls']} calls)", bulk["read_s"], "s",
                           "report", None))
        ratio = bulk["peak"] / size  # at 3 MB the interpreter's own heap growth dominates: reported
        figs.append(Figure("  peak memory of that read / file size", ratio, "x", "< 3x" if mb > 3 else "report",
                           ratio < 3 if mb > 3 else None))
        if mb == SIZES_MB[-1]:
            imp = _child(["reader", "import", str(path), str(tail_file), str(mb)])
            figs.append(Figure("  import_source of it (ctxbench import), in a fresh process", imp["import_s"], "s",
                               "report (no slower than before)", None))
            figs.append(Figure("  peak memory of the import / file size", imp["peak"] / size, "x", "report", None))
        if mb == SIZES_MB[0]:
            continue
        inc = _child(["reader", "incremental", str(path), str(tail_file), str(mb)])
        figs.append(Figure("  incremental reader: first read of the file", inc["first_s"], "s", "report", None))
        p50, p95 = _q(inc["batch_ms"], 0.5), _q(inc["batch_ms"], 0.95)
        figs.append(Figure(f"  +{BATCH} lines, incremental: p50 ({BATCHES} batches)", p50, "ms", "report", None))
        figs.append(Figure("  +20 lines, incremental: p95", p95, "ms", "< 200 ms", p95 < 200))
        figs.append(Figure("  +20 lines, incremental: CPU per line", inc["cpu_per_line"] * 1000, "ms",
                           "< 5 ms (10% at 20/s)", inc["cpu_per_line"] < 0.005))
        old = inc["old_batch_ms"]
        figs.append(Figure(f"  +20 lines, old path (whole re-read), median of {len(old)}", statistics.median(old),
                           "ms", "(before)", None))
        figs.append(Figure("  +20 lines, old path: CPU per line", inc["old_cpu_per_line"] * 1000, "ms", "(before)",
                           None))
        figs.append(Figure("  old / incremental, per batch", statistics.median(old) / max(p50, 1e-6), "x",
                           "report", None))
        figs.append(Figure("  rebuilds while following (none expected)", inc["rebuilds"], "", "== 0",
                           inc["rebuilds"] == 0))
    return figs


# ---------------------------------------------------------------------------------------------- service

async def _follow_run(path: Path, tail: list[bytes], expected: list[str], tmp: Path) -> dict[str, Any]:
    import asyncio

    from benchmarks.source_view_bench import _service
    from engine.workbench import events as ev

    seen: dict[str, float] = {}
    loaded: list[float] = []
    counts = {"loaded": 0, "added": 0, "calls": 0, "retracted": 0}

    def mark(ts: Any, now: float) -> None:
        if isinstance(ts, str) and ts not in seen:
            seen[ts] = now

    def on_event(e: Any) -> None:
        now = time.perf_counter()
        if isinstance(e, ev.SessionLoaded):
            loaded.append(now)
            counts["loaded"] += 1
            for m in e.view.messages:
                mark(m.get("ts"), now)
            for r in e.view.timeline:
                mark(r.snapshot.ts, now)
        elif isinstance(e, ev.MessageAdded):
            counts["added"] += 1
            mark(e.message.get("ts"), now)
        elif isinstance(e, ev.CallRecorded):
            counts["calls"] += 1
            mark(e.record.snapshot.ts, now)
        elif isinstance(e, ev.MessagesRetracted):
            counts["retracted"] += 1

    wb = _service(tmp, on_event)
    out: dict[str, Any] = {}
    try:
        warm = REPO.parent / "shared" / "data" / "sessions" / "claude-code" / "tool_heavy.jsonl"
        if warm.exists():
            await wb.open_source(warm)
        rss0 = _rss()
        t0 = time.perf_counter()
        await wb.open_source(path)
        out["open_s"] = (loaded[-1] - t0) if loaded and loaded[-1] >= t0 else float("nan")
        firsts = [t for t in loaded if t >= t0]
        out["first_s"] = (firsts[0] - t0) if firsts else float("nan")
        out["rss_open"] = _rss() - rss0
        await asyncio.sleep(1.0)
        counts.update(loaded=0, added=0, calls=0, retracted=0)  # what following does, from here
        line_ts: dict[str, int] = {}
        for i, raw in enumerate(tail):
            try:
                obj = json.loads(raw)
            except ValueError:
                continue
            if isinstance(obj, dict) and isinstance(obj.get("timestamp"), str):
                line_ts.setdefault(_ts(obj["timestamp"]), i)
        want = [t for t in expected if t in line_ts]
        n = int(FOLLOW_S * RATE)
        want = [t for t in want if line_ts[t] < n]
        written: list[float] = []
        rss: list[tuple[float, int]] = []
        start = time.perf_counter()
        c0 = time.process_time()
        next_rss = start
        with open(path, "ab") as fh:
            for i in range(n):
                due = start + i / RATE
                delay = due - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                fh.write(tail[i])
                fh.flush()
                written.append(time.perf_counter())
                wb.file_changed(str(path))
                if written[-1] >= next_rss:
                    rss.append((written[-1] - start, _rss()))
                    next_rss += 0.5
        wall = time.perf_counter() - start
        cpu = time.process_time() - c0
        deadline = time.perf_counter() + CATCH_UP_S
        while time.perf_counter() < deadline and not all(t in seen for t in want):
            await asyncio.sleep(0.02)
        end = time.perf_counter()
        lat = [(seen.get(t, end) - written[line_ts[t]]) * 1000 for t in want]
        early = [v for s, v in rss if s <= 5.0] or [rss[0][1]]
        out.update(lat_ms=lat, unseen=sum(1 for t in want if t not in seen), lines=n, cpu=cpu / wall,
                   wall=wall, rss_early=max(early), rss_end=rss[-1][1], rss_max=max(v for _, v in rss),
                   counts=counts, late_after_stop=sum(1 for t in want if seen.get(t, end) > start + wall))
    finally:
        await wb.shutdown()
    return out


def _follow_child(path: str, tail_path: str, expected_path: str) -> dict[str, Any]:
    import asyncio

    tail = Path(tail_path).read_bytes().splitlines(keepends=True)
    expected = json.loads(Path(expected_path).read_text())
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["CTXBENCH_DATA_DIR"] = str(Path(tmp) / "data")
        os.environ["CTXBENCH_CONFIG_DIR"] = str(Path(tmp) / "config")
        return asyncio.run(_follow_run(Path(path), tail, expected, Path(tmp)))


def _expected(path: Path, tail: list[bytes]) -> list[str]:
    """The timestamps of the messages and calls the appended lines make (the incremental reader)."""
    from engine.sources.claude_code import ClaudeCodeReader

    reader = ClaudeCodeReader(path)
    with open(path, "rb") as fh:
        reader.feed_lines(fh)
    m0, c0 = len(reader.session.messages), len(reader.session.calls)
    reader.feed(b"".join(tail[:int(FOLLOW_S * RATE)]))
    stamps = [m.get("ts") for m in reader.session.messages[m0:]] + [c.ts for c in reader.session.calls[c0:]]
    return sorted({t for t in stamps if isinstance(t, str)})


def bench_follow() -> list[Figure]:
    from benchmarks.bigsession import cached_claude_session

    figs: list[Figure] = []
    for mb in SIZES_MB:
        src, tail = cached_claude_session(mb * MB, SEED)
        with tempfile.TemporaryDirectory(prefix="ctxbench-bigfollow-") as tmp:
            live = Path(tmp) / src.name
            shutil.copyfile(src, live)
            exp = Path(tmp) / "expected.json"
            exp.write_text(json.dumps(_expected(live, tail)))
            r = _child(["follow", str(live), str(src.with_suffix(".tail")), str(exp)])
        open_target = {30: 1.0, 100: 3.0}.get(mb)
        figs.append(Figure(f"big {mb} MB: open_source → SessionLoaded", r["open_s"], "s",
                           f"<= {open_target:g} s" if open_target else "report",
                           (r["open_s"] <= open_target) if open_target else None))
        if r["first_s"] < r["open_s"]:
            figs.append(Figure("  first screen (the context since the last compaction, read from the end)",
                               r["first_s"], "s", "before the whole view", True))
        lat = r["lat_ms"]
        figs.append(Figure(f"  follow {RATE:g} lines/s, {FOLLOW_S:g} s: write→update p50 ({len(lat)} items)",
                           _q(lat, 0.5), "ms", "report", None))
        figs.append(Figure("  write→update p95", _q(lat, 0.95), "ms", "<= 200 ms", _q(lat, 0.95) <= 200))
        if r["unseen"]:
            figs.append(Figure(f"  items not shown {CATCH_UP_S:g} s after the last write", r["unseen"], "",
                               "== 0", False))
        cpu_ok = (r["cpu"] <= 0.10) if mb == 100 else None
        figs.append(Figure("  CPU while following (share of one core)", r["cpu"] * 100, "%",
                           "<= 10 %" if mb == 100 else "report", cpu_ok))
        growth = (r["rss_end"] - r["rss_early"]) / MB
        figs.append(Figure("  RSS growth over the open", r["rss_open"] / MB, "MB", "report", None))
        figs.append(Figure("  RSS while following, first 5 s", r["rss_early"] / MB, "MB", "report", None))
        figs.append(Figure("  RSS growth while following (first 5 s → end)", growth, "MB", "< 16 MB", growth < 16))
        c = r["counts"]
        figs.append(Figure(f"  events: {c['loaded']} reloads, {c['added']} added, {c['retracted']} retractions",
                           c["calls"], "calls", "report", None))
    return figs


ALL: dict[str, Callable[[], list[Figure]]] = {"big-reader": bench_reader, "big-follow": bench_follow}


if __name__ == "__main__":
    kind, *rest = sys.argv[1:]
    result = _reader_child(rest[0], rest[1], rest[2], int(rest[3])) if kind == "reader" else _follow_child(*rest)
    print(json.dumps(result), flush=True)
