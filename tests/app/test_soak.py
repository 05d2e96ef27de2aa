"""Soak: stream turn after turn into a 2,000-message session in the running window.

The chart repaints on every snapshot (the next request is recomputed while the answer streams) and
gets a new timeline column per call; the chat streams into a virtualised list of 2,000+ rows. The
process must neither crash nor grow without bound: the resident memory after the last turns stays
within a fixed margin of what it was after the first ones.
"""

from __future__ import annotations

import gc
import json
import os
from pathlib import Path
from typing import Any

import pytest

from app.controller import Controller
from app.main_window import MainWindow
from engine.model import messages as m
from engine.store.config import Settings
from tests import fakeserver as fs
from tests.app.conftest import run

N_MESSAGES = 2_000
WARM_UP_TURNS = 3
TURNS = int(os.environ.get("SOAK_TURNS", "10"))
CHUNKS = 80


def rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / (1024 * 1024)


def build_long_session(controller: Controller) -> str:
    session = controller.store.create("2,000 messages")
    batch = []
    for i in range(N_MESSAGES // 4):
        cid = f"call_{i}"
        batch += [
            m.user(f"Step {i}: look at module_{i}.py and tell me what `run_{i}()` returns."),
            m.assistant(None, [m.tool_call(cid, "read_file", json.dumps({"path": f"module_{i}.py"}))]),
            m.tool_result(cid, f"def run_{i}():\n    return {i} * 2  # doubled\n" * 3, name="read_file"),
            m.assistant(f"`run_{i}()` returns **{i * 2}**: it doubles `{i}`.\n\n- file: `module_{i}.py`"),
        ]
    session.extend(batch)
    session.close()
    return session.id


@pytest.mark.slow
def test_streaming_into_a_2000_message_session(
    qtbot: Any, fake_settings: Settings, workspace: Path, server: fs.FakeLLMServer
) -> None:
    settings = fake_settings.replace(context_window=2_000_000, max_tokens=512)
    controller = Controller(settings, workspace=workspace)
    window = MainWindow(controller)
    qtbot.addWidget(window)
    window.resize(1400, 900)
    window.show()
    qtbot.waitExposed(window)
    chart = window.ensure_chart()
    sid = build_long_session(controller)
    with qtbot.waitSignal(controller.session_loaded, timeout=30_000):
        controller.open_session(sid)
    assert window.chat.row_count() == N_MESSAGES
    redraws_before = chart.redraws
    snapshots = 0

    def count(_: Any) -> None:
        nonlocal snapshots
        snapshots += 1

    controller.snapshot_changed.connect(count)
    words = [f"word{j} " for j in range(CHUNKS)]
    baseline = 0.0
    for turn in range(TURNS):
        server.queue(fs.stream(*[fs.text(w) for w in words], finish_reason="stop", delay=0.002))
        assert controller.send(f"turn {turn}: tell me more")
        qtbot.waitUntil(lambda: controller.task("turn") is None, timeout=30_000)
        window.chat.scroll_to_bottom()
        qtbot.wait(10)
        if turn == WARM_UP_TURNS - 1:
            gc.collect()
            baseline = rss_mb()
    gc.collect()
    grown = rss_mb() - baseline
    assert window.chat.row_count() == N_MESSAGES + 2 * TURNS
    last = window.chat.item(window.chat.message_ids()[-1])
    assert last.msg["content"] == "".join(words) and not last.streaming
    assert chart.column_count() == TURNS
    assert snapshots >= TURNS * 2, "the next-request bar was recomputed while the turns streamed"
    assert chart.redraws - redraws_before >= TURNS * 2
    assert grown < 40, f"resident memory grew by {grown:.1f} MB over {TURNS - WARM_UP_TURNS} turns"
    window.close()
    run(qtbot, controller.shutdown())
