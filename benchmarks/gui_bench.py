"""GUI benchmarks (offscreen Qt): chart update, chat append, memory, cold start."""

from __future__ import annotations

import os
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
    from engine.budget import WindowInfo, build_snapshot
    from engine.tokens import estimate_message_tokens

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
    from engine.budget import ContextSnapshot
    from widgets.context_chart import ContextChart

    app = _app()
    chart = ContextChart()
    chart.resize(1000, 600)
    chart.show()
    snaps = _snapshots(columns + 200)
    chart.set_timeline(snaps[:columns])
    chart.flush()
    app.processEvents()
    extra = iter(snaps[columns:])

    def update() -> None:
        snap = next(extra)
        chart.set_snapshot(ContextSnapshot.from_json(snap))
        chart.append_call(snap)
        chart.flush()

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
    from engine.messages import new_message
    from engine.tokens import estimate_message_tokens
    from widgets.chat_view import ChatView

    app = _app()
    history = make_history(n)
    rss0 = _rss_mb()
    view = ChatView()
    view.resize(900, 800)
    view.show()
    t0 = time.perf_counter()
    view.set_messages(history, {m["id"]: estimate_message_tokens(m) for m in history})
    view.flush()
    app.processEvents()
    t_load = time.perf_counter() - t0
    rss1 = _rss_mb()

    def append() -> None:
        msg = new_message("assistant", "A new answer with **markdown** and `code`.\n\n- one\n- two")
        view.append_message(msg, estimate_message_tokens(msg))
        view.flush()

    t_append = best_of(append, repeat=5, number=20)
    view.close()
    return [
        Figure(f"chat: show a {n}-message session", t_load * 1e3, "ms", "report", None),
        Figure(f"chat: append one message to {n}", t_append * 1e3, "ms", "< 5 ms", t_append < 0.005),
        Figure(f"memory of the chat holding {n} messages", rss1 - rss0, "MB", "report", None),
    ]


def bench_cold_start(runs: int = 3) -> list[Figure]:
    """Process start → main window shown (CTXBENCH_STARTUP_PROBE makes the app print and quit)."""
    env = dict(os.environ, CTXBENCH_STARTUP_PROBE="1", QT_QPA_PLATFORM="offscreen")
    times: list[float] = []
    litellm_loaded: list[str] = []
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "app.main"], env=env, capture_output=True, text=True,
                              timeout=120, cwd=REPO)
        wall = time.perf_counter() - t0
        shown = [ln for ln in proc.stdout.splitlines() if ln.startswith("window-shown")]
        if proc.returncode != 0 or not shown:
            return [Figure("cold start to visible window", float("nan"), "s", "< 1.5 s", False)]
        # "window-shown <seconds since interpreter start> litellm=<loaded?>"
        parts = shown[0].split()
        times.append(float(parts[1]))
        litellm_loaded.append(parts[2] if len(parts) > 2 else "")
        del wall
    best = min(times)
    return [
        Figure("cold start to visible window (best of 3)", best, "s", "< 1.5 s", best < 1.5),
        Figure("  litellm not imported before the window showed", float(all(x == "litellm=no" for x in
                                                                           litellm_loaded)), "bool", "1",
               all(x == "litellm=no" for x in litellm_loaded)),
    ]


ALL = {"chart": bench_chart, "chat": bench_chat, "startup": bench_cold_start}
