"""GUI benchmarks (offscreen Qt): chart update, chat append, memory, cold start."""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("QT_API", "pyside6")
os.environ.setdefault("QT_LOGGING_RULES", "qt.qpa.*=false")

from benchmarks.engine_bench import Figure, best_of, make_history

REPO = Path(__file__).resolve().parent.parent


def _app() -> Any:
    from PySide6.QtWidgets import QApplication

    return QApplication.instance() or QApplication([])


def _snapshots(n: int) -> list[dict[str, Any]]:
    from engine.context.snapshots import build_snapshot
    from engine.context.tokens import estimate_message_tokens
    from engine.model.snapshot import WindowInfo

    out = []
    history = make_history(400)
    for i in range(n):
        part = history[: 4 + (i % 396)]
        snap = build_snapshot(window=WindowInfo(128_000, 4096, "model"), system_tokens=600, summary_tokens=0,
                              tools_tokens=400, history=part,
                              history_counts=[estimate_message_tokens(m) for m in part],
                              estimator_name="heuristic", threshold_ratio=0.8, provider_prompt_tokens=None,
                              call_index=i)
        data = snap.to_json()
        data.pop("message_tokens")
        data["provider_prompt_tokens"] = int(snap.prompt * 0.97)
        out.append(data)
    return out


def bench_chart(columns: int = 1_000) -> list[Figure]:
    from engine.model.snapshot import ContextSnapshot
    from engine.model.timeline import TimelineCall
    from widgets.context_chart import ContextChart

    app = _app()
    chart = ContextChart()
    chart.resize(1000, 600)
    chart.show()
    snaps = _snapshots(columns + 200)
    calls = [TimelineCall.from_json(s) for s in snaps]  # the columns as the service hands them
    chart.set_timeline(calls[:columns])
    app.processEvents()
    extra = iter(zip(snaps[columns:], calls[columns:], strict=True))

    def update() -> None:
        snap, call = next(extra)
        chart.set_snapshot(ContextSnapshot.from_json(snap))  # each setter draws at once (no throttle)
        chart.append_call(call)

    def update_and_paint() -> None:
        update()
        chart.repaint()

    t_update = best_of(update, repeat=5, number=10)
    t_paint = best_of(update_and_paint, repeat=5, number=10)
    chart.close()
    return [
        Figure(f"chart update: bar + {columns}-column timeline", t_update * 1e3, "ms", "< 5 ms", t_update < 0.005),
        Figure("  same, including the repaint", t_paint * 1e3, "ms", "report", None),
    ]


def _rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bench_chat(n: int = 10_000) -> list[Figure]:
    """The chat view on the path the app takes: every figure includes layout and paint.

    ``append`` is what the main window does for a new message while the user is at the bottom:
    append, scroll to the bottom, then one turn of the event loop, which paints what changed: the
    new row is laid out (markdown), the pixels above it move up and the exposed rows are painted.
    ``full repaint`` forces a paint of the whole viewport (a theme change, a resize).
    """
    from engine.context.tokens import estimate_message_tokens
    from engine.model.messages import new_message
    from widgets.chat_view import ChatView

    app = _app()
    history = make_history(n)
    rss0 = _rss_mb()
    view = ChatView()
    view.resize(900, 800)
    view.show()
    t0 = time.perf_counter()
    view.set_messages(history, {m["id"]: estimate_message_tokens(m) for m in history})
    view.viewport().repaint()
    app.processEvents()
    t_load = time.perf_counter() - t0
    rss1 = _rss_mb()

    def append() -> None:
        msg = new_message("assistant", "A new answer with **markdown** and `code`.\n\n- one\n- two")
        view.append_message(msg, estimate_message_tokens(msg))
        view.scroll_to_bottom()
        app.processEvents()

    t_append = best_of(append, repeat=5, number=20)
    layouts = view.layouter().layouts_built
    t_full = best_of(view.viewport().repaint, repeat=5, number=20)

    def thirty_then_repaint() -> None:
        for _ in range(30):
            msg = new_message("user", "a new message")
            view.append_message(msg, estimate_message_tokens(msg))
        app.processEvents()

    t_burst = best_of(thirty_then_repaint, repeat=3, number=1)
    answer = new_message("assistant", "")
    view.append_message(answer)

    def delta() -> None:
        view.stream_delta(answer["id"], "more words of a streamed answer, with `code` and **bold**. ")
        view.scroll_to_bottom()
        app.processEvents()

    t_delta = best_of(delta, repeat=5, number=20)  # the answer grows to 100 deltas (~6 kB)
    view.close()
    return [
        Figure(f"chat: show a {n}-message session (+ paint)", t_load * 1e3, "ms", "< 3000 ms",
               t_load < 3.0),
        Figure(f"chat: append 1 to {n} (scroll + layout + paint)", t_append * 1e3, "ms", "< 5 ms",
               t_append < 0.005),
        Figure(f"  rows laid out after loading {n} and 100 appends", float(layouts), "rows", "< 500",
               layouts < 500),
        Figure("  full repaint of the viewport (900×800)", t_full * 1e3, "ms", "report", None),
        Figure(f"chat: 30 appends to {n}, then the paint", t_burst * 1e3, "ms", "< 250 ms", t_burst < 0.25),
        Figure("chat: a streamed delta + a paint (answer up to 6 kB)", t_delta * 1e3, "ms", "report", None),
        Figure(f"memory of the chat holding {n} messages", rss1 - rss0, "MB", "report", None),
    ]


def bench_cold_start(runs: int = 3) -> list[Figure]:
    """Process start → main window shown (CTXBENCH_STARTUP_PROBE makes the app print and quit)."""
    env = dict(os.environ, CTXBENCH_STARTUP_PROBE="1", QT_QPA_PLATFORM="offscreen")
    times: list[float] = []
    litellm_loaded: list[bool] = []
    pattern = re.compile(r"window shown after ([0-9.]+) s \(litellm imported: (True|False)\)")
    for _ in range(runs):
        proc = subprocess.run([sys.executable, "-m", "app.main"], env=env, capture_output=True, text=True,
                              timeout=120, cwd=REPO)
        found = pattern.search(proc.stderr)
        if proc.returncode != 0 or not found:
            return [Figure("cold start to visible window", float("nan"), "s", "< 1.5 s", False)]
        times.append(float(found.group(1)))
        litellm_loaded.append(found.group(2) == "True")
    best = min(times)
    lazy = not any(litellm_loaded)
    return [
        Figure(f"cold start to visible window (best of {runs})", best, "s", "< 1.5 s", best < 1.5),
        Figure(f"  median of {runs}", sorted(times)[len(times) // 2], "s", "report", None),
        Figure("  litellm imported after the window showed", float(lazy), "bool", "1", lazy),
    ]


def bench_app_memory(n: int = 10_000) -> list[Figure]:
    """RSS of the whole app (main window + controller) holding a session of ``n`` messages."""
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    code = (
        "import sys; from benchmarks.gui_bench import _app_memory_child; _app_memory_child(int(sys.argv[1]))"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(n)], env=env, capture_output=True, text=True,
                          timeout=600, cwd=REPO)
    found = re.search(r"rss-empty ([0-9.]+) rss-loaded ([0-9.]+)", proc.stdout)
    if proc.returncode != 0 or not found:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return [Figure(f"app memory with a {n}-message session ({tail[0][:40]})", float("nan"), "MB", "report",
                       False)]
    empty, loaded = float(found.group(1)), float(found.group(2))
    return [
        Figure("app memory, empty session (RSS)", empty, "MB", "report", None),
        Figure(f"app memory holding a {n}-message session (RSS)", loaded, "MB", "report", None),
    ]


def _app_memory_child(n: int) -> None:
    import tempfile

    from engine.context.conversation import SessionStore
    from engine.store.fsutil import append_lines

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["CTXBENCH_DATA_DIR"] = str(Path(tmp) / "data")
        os.environ["CTXBENCH_CONFIG_DIR"] = str(Path(tmp) / "config")
        store = SessionStore()
        big = store.create("big")
        append_lines(big.history_path, make_history(n))
        big.close()
        empty = store.create("empty")
        empty.close()
        import asyncio

        import qasync

        from app.controller import Controller
        from app.main_window import MainWindow

        app = _app()
        loop = qasync.QEventLoop(app)
        asyncio.set_event_loop(loop)
        controller = Controller(store=store)
        window = MainWindow(controller)
        window.resize(1400, 900)
        window.show()

        async def run() -> None:
            controller.start()
            controller.open_session(empty.id)
            for _ in range(20):
                await asyncio.sleep(0.05)
            from engine.llm import client as llm

            await asyncio.to_thread(llm._lib)  # the app imports litellm after showing: count it in both
            rss_empty = _rss_mb()
            controller.open_session(big.id)
            for _ in range(60):
                await asyncio.sleep(0.05)
            print(f"rss-empty {rss_empty:.1f} rss-loaded {_rss_mb():.1f}", flush=True)

        loop.run_until_complete(run())
        loop.run_until_complete(controller.shutdown())
        window.close()
        loop.close()


ALL = {"chart": bench_chart, "chat": bench_chat, "startup": bench_cold_start, "memory": bench_app_memory}
