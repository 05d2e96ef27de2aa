"""Read-only source views (issue 13, items 1 and 3): follow latency in the service, and opening a
large Claude Code session with subagents.

- follow latency: a copy of a real Claude Code session (half of it at first) opened with
  ``Workbench.open_source``; then 30 of its next lines appended one at a time (every 0.25 s, each
  written in two pieces 0.1 s apart). For each line, the time from the line being complete in the
  file (its newline written and the file closed) to the service emitting the update
  (``ContextStateChanged`` for an incremental update, ``SessionLoaded`` for a reload). Target: p95
  < 1 s (the service polls every 0.25 s and re-imports the file, ~0.1-0.2 s for 1.5 MB);
- open: ``open_source`` of the 2.9 MB Claude Code session ``8463c716…`` with its subagents folder
  (3.1 MB in all) and of ``258c7280…`` → ``SessionLoaded`` emitted (first and best of three).
  Target < 1 s;
- memory: a copy of ``tool_heavy.jsonl`` followed through 12 cycles of "its second half appended in
  bursts of 5 lines, then the file truncated back to its first half" (each cycle the same states:
  incremental updates, then a reload); the Python heap the service keeps (``tracemalloc``) after
  cycle 4 and after cycle 12: growth < 256 KiB (nothing kept per refresh), and one view folder on
  disk;
- first paint: the same in the real window (offscreen, a child process): ``open_source`` → the
  window has drawn the chat, the chart and the inspector (``session_loaded`` handled, the chart and
  chat flushed, the window repainted). Target < 1 s.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.engine_bench import MB, Figure

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared" / "data" / "sessions" / "claude-code"
BIG = SHARED / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
OTHER = SHARED / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
LINES = 30
TARGET_S = 1.0


@contextmanager
def _dirs(tmp: Path) -> Iterator[None]:
    keys = ("CTXBENCH_DATA_DIR", "CTXBENCH_CONFIG_DIR")
    old = {k: os.environ.get(k) for k in keys}
    os.environ["CTXBENCH_DATA_DIR"] = str(tmp / "data")
    os.environ["CTXBENCH_CONFIG_DIR"] = str(tmp / "config")
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _service(tmp: Path, listener: Callable[[Any], None]) -> Any:
    from engine.store.config import Settings
    from engine.workbench.service import Workbench

    ws = tmp / "ws"
    ws.mkdir(exist_ok=True)
    return Workbench(Settings().replace(estimator="heuristic"), workspace=ws, listener=listener)


async def _latency(tmp: Path) -> list[float]:
    from engine.workbench import events as ev

    stamps: list[float] = []

    def on_event(e: Any) -> None:
        if isinstance(e, ev.ContextStateChanged | ev.SessionLoaded):
            stamps.append(time.perf_counter())

    wb = _service(tmp, on_event)
    lines = BIG.read_bytes().splitlines(keepends=True)
    start = len(lines) // 2
    live = tmp / "live.jsonl"
    live.write_bytes(b"".join(lines[:start]))
    await wb.open_source(live)
    delays: list[float] = []
    try:
        for line in lines[start:start + LINES]:
            seen = len(stamps)
            with open(live, "ab") as fh:
                fh.write(line[: len(line) // 2])
            await asyncio.sleep(0.1)
            with open(live, "ab") as fh:
                fh.write(line[len(line) // 2:])
            done = time.perf_counter()
            deadline = done + 5.0
            while time.perf_counter() < deadline and not any(s >= done for s in stamps[seen:]):
                await asyncio.sleep(0.002)
            after = [s for s in stamps[seen:] if s >= done]
            delays.append((after[0] if after else deadline) - done)
            await asyncio.sleep(0.15)
    finally:
        await wb.shutdown()
    return delays


async def _open(tmp: Path, path: Path) -> list[float]:
    from engine.workbench import events as ev

    loaded: list[float] = []
    wb = _service(tmp, lambda e: loaded.append(time.perf_counter()) if isinstance(e, ev.SessionLoaded) else None)
    out = []
    try:
        for _ in range(3):
            t0 = time.perf_counter()
            await wb.open_source(path)
            out.append(loaded[-1] - t0)
            await wb.new_session()
    finally:
        await wb.shutdown()
    return out


async def _memory(tmp: Path, cycles: int = 12) -> tuple[int, int, int]:
    import gc
    import tracemalloc

    from engine.workbench import events as ev
    from engine.workbench.source_views import views_root

    updates: list[int] = []
    wb = _service(tmp, lambda e: updates.append(1) if isinstance(e, ev.ContextStateChanged | ev.SessionLoaded)
                  else None)
    lines = (SHARED / "tool_heavy.jsonl").read_bytes().splitlines(keepends=True)
    half = len(lines) // 2
    live = tmp / "mem.jsonl"
    live.write_bytes(b"".join(lines[:half]))
    await wb.open_source(live)
    marks: list[int] = []

    async def wait_update(before: int) -> None:
        deadline = time.perf_counter() + 5
        while len(updates) == before and time.perf_counter() < deadline:
            await asyncio.sleep(0.01)

    tracemalloc.start()
    try:
        for cycle in range(cycles):
            for at in range(half, len(lines), 5):
                before = len(updates)
                with open(live, "ab") as fh:
                    fh.write(b"".join(lines[at:at + 5]))
                await wait_update(before)
            before = len(updates)
            with open(live, "r+b") as fh:
                fh.truncate(0)
                fh.write(b"".join(lines[:half]))
            await wait_update(before)
            await asyncio.sleep(0.3)
            if cycle in (3, cycles - 1):
                gc.collect()
                marks.append(tracemalloc.get_traced_memory()[0])
        folders = len(list(views_root().iterdir()))
    finally:
        tracemalloc.stop()
        await wb.shutdown()
    return marks[0], marks[1], folders


def _size(path: Path) -> float:
    folder = path.with_suffix("")
    extra = sum(f.stat().st_size for f in folder.rglob("*.jsonl")) if folder.is_dir() else 0
    return (path.stat().st_size + extra) / MB


def bench_all() -> list[Figure]:
    if not BIG.exists():
        return [Figure(f"source view: {BIG.name} is not on this machine", 0, "", "", None)]
    figs: list[Figure] = []
    with tempfile.TemporaryDirectory() as tmp, _dirs(Path(tmp)):
        delays = asyncio.run(_latency(Path(tmp)))
        q = statistics.quantiles(delays, n=20)
        figs.append(Figure(f"source view: follow latency p50 ({len(delays)} lines)", statistics.median(delays) * 1000,
                           "ms", "reported", None))
        figs.append(Figure("source view: follow latency p95", q[18] * 1000, "ms", f"< {TARGET_S * 1000:.0f} ms",
                           q[18] < TARGET_S))
        for path in (BIG, OTHER):
            if not path.exists():
                continue
            times = asyncio.run(_open(Path(tmp), path))
            label = f"{path.name[:8]}… ({_size(path):.1f} MiB with subagents)"
            figs.append(Figure(f"source view: open {label}, first", times[0] * 1000, "ms",
                               f"< {TARGET_S * 1000:.0f} ms", times[0] < TARGET_S))
            figs.append(Figure(f"source view: open {label}, best of 3", min(times) * 1000, "ms", "reported", None))
        if (SHARED / "tool_heavy.jsonl").exists():
            early, late, folders = asyncio.run(_memory(Path(tmp)))
            growth = (late - early) / 1024
            figs.append(Figure("source view: heap growth over 8 follow cycles", growth, "KiB", "< 256 KiB",
                               growth < 256))
            figs.append(Figure("source view: view folders on disk while following", folders, "", "== 1",
                               folders == 1))
    figs.append(_first_paint())
    return figs


def _first_paint() -> Figure:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", QT_API="pyside6", LITELLM_LOCAL_MODEL_COST_MAP="True")
    proc = subprocess.run([sys.executable, "-c", "from benchmarks.source_view_bench import _paint_child; "
                           "_paint_child()"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    value = next((float(ln.split()[1]) for ln in proc.stdout.splitlines() if ln.startswith("paint ")), None)
    if value is None:
        return Figure(f"source view: first paint failed ({proc.stderr.strip()[-80:]})", 0, "", "", False)
    return Figure(f"source view: open {BIG.name[:8]}… → first paint in the window", value * 1000, "ms",
                  f"< {TARGET_S * 1000:.0f} ms", value < TARGET_S)


def _paint_child() -> None:
    import qasync
    from PySide6.QtWidgets import QApplication

    from app.controller import Controller
    from app.main_window import MainWindow
    from engine.store.config import Settings

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["CTXBENCH_DATA_DIR"] = str(Path(tmp) / "data")
        os.environ["CTXBENCH_CONFIG_DIR"] = str(Path(tmp) / "config")
        app = QApplication.instance() or QApplication([])
        if isinstance(app, QApplication):
            app.setQuitOnLastWindowClosed(False)
        loop = qasync.QEventLoop(app)
        asyncio.set_event_loop(loop)
        controller = Controller(Settings().replace(estimator="heuristic"), workspace=Path(tmp))
        window = MainWindow(controller)
        window.resize(1400, 900)
        window.show()

        async def run() -> None:
            for _ in range(10):
                await asyncio.sleep(0.05)
            window.ensure_chart()
            done = asyncio.get_running_loop().create_future()

            def on_loaded(_view: object) -> None:
                if not done.done():
                    done.set_result(time.perf_counter())

            controller.session_loaded.connect(on_loaded)
            t0 = time.perf_counter()
            controller.open_source(str(BIG))
            await done
            window.chart.flush()
            window.chat.flush()
            window.repaint()
            app.processEvents()
            print(f"paint {time.perf_counter() - t0:.4f}", flush=True)
            await controller.shutdown()

        loop.run_until_complete(run())
        window.close()
        loop.close()


ALL: dict[str, Callable[[], list[Figure]]] = {"source-view": bench_all}
