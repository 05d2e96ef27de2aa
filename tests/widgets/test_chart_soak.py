"""Soak tests: thousands of live-chart repaints and a long streamed conversation.

PySide6 6.12.0 on Python 3.11 crashed pyqtgraph after a few hundred repaints (``none_dealloc`` in
``AxisItem.generateDrawSpecs``); these tests repaint the chart thousands of times, with axis ranges
that keep changing so that the axes are regenerated, and stream into a 2,000-message chat, checking
that nothing crashes and that memory stays bounded: the process RSS and the number of live Python
objects are measured after a warm-up and at the end (tracemalloc would slow the loop fivefold).
"""

from __future__ import annotations

import gc
import os

import pytest
from PySide6.QtCore import QEvent, QObject
from PySide6.QtGui import QGuiApplication

from engine.model.records import CompactionRecord
from engine.model.snapshot import ContextSnapshot
from engine.model.timeline import TimelineCall
from widgets.chat_view import ChatView
from widgets.chat_view.layout import LAYOUT_CACHE
from widgets.context_chart import ContextChart

pytestmark = pytest.mark.slow

def comp(line: dict) -> CompactionRecord:
    """A compaction record from its line (``result`` "summarized" unless given), as the service hands it."""
    return CompactionRecord.from_json({"result": "summarized", **line})


def set_calls(chart, records, compactions=()) -> None:
    """``chart.set_timeline`` with these record lines as the service hands them (typed: TimelineCall)."""
    chart.set_timeline([TimelineCall.from_json(r) for r in records], [comp(c) for c in compactions])



def rss_mb() -> float:
    with open(f"/proc/{os.getpid()}/statm") as fh:
        pages = int(fh.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


class PaintCounter(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Paint:
            self.count += 1
        return False


def snapshot(i: int, tool: int) -> ContextSnapshot:
    return ContextSnapshot(
        window=128_000, max_tokens=4_096, system=1_000, summary=100 * (i % 3),
        history_user=1_000 + i % 50 * 100, history_assistant=2_000, history_tool=tool, tools=500,
        threshold_tokens=102_400, estimator="heuristic",
        accuracy="calibrated", provider_prompt_tokens=20_000 + i % 17 * 100, raw_prompt_tokens=25_000,
        draft=i % 40, ts=f"2025-11-21T10:{i // 60 % 60:02d}:{i % 60:02d}+00:00", call_index=i,
    )


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="RSS is read from /proc")
def test_chart_survives_5000_repaints_with_1000_columns(qtbot):
    chart = ContextChart()
    qtbot.addWidget(chart)
    chart.resize(420, 640)
    chart.show()
    qtbot.waitExposed(chart)
    counter = PaintCounter()
    chart._tl_plot.viewport().installEventFilter(counter)
    chart._bar.plot.viewport().installEventFilter(counter)
    marker = {"trigger": "auto", "calls_before": 501, "tokens_before": 40_000, "tokens_after": 10_000}
    set_calls(chart, [snapshot(i, 10_000 + i * 40).to_json() for i in range(1000)], [marker])
    chart.flush()
    rss_start = objects_start = 0.0
    for k in range(5_000):
        # the next request swings over and under the window: both axes keep changing range
        chart.set_snapshot(snapshot(k, 30_000 + (k % 9) * 14_000))
        if k % 50 == 0:
            chart.append_call(TimelineCall.from_json(snapshot(1000 + k, 30_000).to_json()))
        chart.flush()
        # paint both plots now, as the event loop would (pyqtgraph updates ranges and axes
        # while preparing the paint: this is where PySide6 6.12 crashed)
        chart._bar.plot.viewport().repaint()
        chart._tl_plot.viewport().repaint()
        if k % 10 == 0:
            QGuiApplication.processEvents()
        if k == 1_000:
            gc.collect()
            rss_start = rss_mb()
            objects_start = len(gc.get_objects())
    gc.collect()
    rss_growth = rss_mb() - rss_start
    objects_growth = len(gc.get_objects()) - objects_start
    assert chart.redraws >= 5_000
    assert counter.count >= 2 * 5_000  # both plots really painted every time
    assert chart.column_count() == 1_100
    assert objects_growth < 5_000, f"{objects_growth} more live Python objects"
    assert rss_growth < 60, f"RSS grew by {rss_growth:.1f} MB"


def cached(i: int) -> dict:
    """A call with cache figures; every 37th re-writes its prefix, so the ★ markers keep changing."""
    rec = snapshot(i, 10_000 + i * 40).to_json()
    prompt = rec["provider_prompt_tokens"]
    write = prompt // 2 if i % 37 == 0 else 300 + i % 7 * 50
    rec.update(cache_read_tokens=prompt - write - 5, cache_write_tokens=write)
    return rec


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="RSS is read from /proc")
def test_cache_view_survives_2000_repaints(qtbot):
    chart = ContextChart()
    qtbot.addWidget(chart)
    chart.resize(420, 640)
    chart.show()
    qtbot.waitExposed(chart)
    made = list(range(800))
    set_calls(chart, [cached(i) for i in made])
    chart.set_cache_view(True)
    items = [id(item) for item in chart._tl_plot.getPlotItem().items]
    rss_start = objects_start = 0.0
    for k in range(2_000):
        if k % 10 == 0:  # a new call: the stacks, the hit rate, its axis and the markers change
            made.append(800 + k)
            chart.append_call(TimelineCall.from_json(cached(800 + k)))
        if k % 500 == 250:  # and back and forth between the two views
            chart.set_cache_view(not chart.cache_view())
        chart.flush()
        chart._tl_plot.viewport().repaint()
        if k % 10 == 0:
            QGuiApplication.processEvents()
        if k == 500:
            gc.collect()
            rss_start = rss_mb()
            objects_start = len(gc.get_objects())
    gc.collect()
    assert chart.column_count() == 1_000 and chart.cache_view()
    assert [id(item) for item in chart._tl_plot.getPlotItem().items] == items
    assert chart.rewrite_calls() == [col for col, i in enumerate(made) if i % 37 == 0]
    assert len(gc.get_objects()) - objects_start < 5_000
    assert rss_mb() - rss_start < 60


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="RSS is read from /proc")
def test_streaming_into_a_2000_message_chat(qtbot):
    view = ChatView()
    qtbot.addWidget(view)
    view.resize(760, 800)
    view.show()
    qtbot.waitExposed(view)
    roles = ["user", "assistant", "tool"]
    msgs = [{"id": f"m{i}", "role": roles[i % 3], "content": f"message {i} " + "lorem ipsum " * (i % 30),
             "tool_call_id": f"c{i}"} for i in range(2_000)]
    view.set_messages(msgs)
    QGuiApplication.processEvents()
    rss_start = objects_start = 0.0
    for turn in range(40):
        view.append_message({"id": f"u{turn}", "role": "user", "content": f"question {turn}"})
        key = f"a{turn}"
        for k in range(50):
            view.stream_delta(key, f"token{k} ")
            if k % 5 == 4:
                view.flush()
                view.viewport().repaint()
        view.end_stream(key)
        view.update_message({"id": key, "role": "assistant",
                             "content": " ".join(f"token{k}" for k in range(50))}, tokens=60)
        if turn == 5:
            view.layouter().invalidate()  # the bounded layout cache is not a leak: measure without it
            gc.collect()
            rss_start = rss_mb()
            objects_start = len(gc.get_objects())
    assert len(view.layouter()._cache) <= LAYOUT_CACHE
    view.layouter().invalidate()
    gc.collect()
    rss_growth = rss_mb() - rss_start
    objects_growth = len(gc.get_objects()) - objects_start
    assert view.row_count() == 2_080
    assert view.is_at_bottom() and view.visible_keys()[-1] == "a39"
    assert view.item("a39").msg["content"].endswith("token49")
    assert view.paints >= 40 * 10
    # scroll through the whole conversation: every row gets laid out and painted once
    sb = view.verticalScrollBar()
    sb.setValue(0)
    while sb.value() < sb.maximum():
        sb.setValue(sb.value() + sb.pageStep())
        view.viewport().repaint()
    assert view.is_at_bottom()
    assert len(view.layouter()._cache) <= LAYOUT_CACHE
    # 68 new rows (and their message dicts) are expected; a leak per delta or per paint is not
    assert objects_growth < 1_000, f"{objects_growth} more live Python objects"
    assert rss_growth < 60, f"RSS grew by {rss_growth:.1f} MB"
