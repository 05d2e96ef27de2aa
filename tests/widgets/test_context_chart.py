from __future__ import annotations

import math
import time
from dataclasses import asdict

import numpy as np
import pytest
from PySide6.QtCore import QPointF

from engine.model.events import CompactionEvent
from engine.model.records import CompactionRecord
from engine.model.snapshot import ContextSnapshot
from engine.model.timeline import TimelineCall
from engine.workbench.rows import SubagentMark
from widgets.context_chart import ContextChart
from widgets.theme import DARK, LIGHT, REGION_ORDER


def comp(line: dict) -> CompactionRecord:
    """A compaction record from its line (``result`` "summarized" unless given), as the service hands it."""
    return CompactionRecord.from_json({"result": "summarized", **line})


def set_calls(chart, records, compactions=()) -> None:
    """``chart.set_timeline`` with these record lines as the service hands them (typed: TimelineCall)."""
    chart.set_timeline([TimelineCall.from_json(r) for r in records], [comp(c) for c in compactions])



def snap(**kw) -> ContextSnapshot:
    data = dict(
        window=100_000, max_tokens=10_000, system=1_000, summary=2_000, history_user=3_000,
        history_assistant=4_000, history_tool=5_000, tools=500, threshold_tokens=80_000,
        estimator="heuristic", accuracy="calibrated", draft=250, model="gpt-4o-mini",
    )
    data.update(kw)
    return ContextSnapshot(**data)


def record(i: int, **kw) -> dict:
    d = snap(
        history_user=1_000 + 10 * i, history_assistant=2_000 + 20 * i, history_tool=3_000 + 30 * i,
        provider_prompt_tokens=9_000 + 55 * i, raw_prompt_tokens=12_000 + 80 * i,
        ts=f"2025-11-21T10:{i // 60:02d}:{i % 60:02d}+00:00", call_index=i, **kw,
    ).to_json()
    return d


@pytest.fixture
def chart(qtbot):
    c = ContextChart(pal=LIGHT)
    qtbot.addWidget(c)
    c.resize(420, 640)
    c.show()
    qtbot.waitExposed(c)
    return c


def test_bar_stacks_regions_in_order_and_adds_up_to_the_window(chart):
    s = snap()
    chart.set_snapshot(s)
    chart.flush()
    seg = chart.bar_segments()
    assert list(seg) == list(REGION_ORDER)
    expected = {
        "system": 1_000, "summary": 2_000, "history_user": 3_000, "history_assistant": 4_000,
        "history_tool": 5_000, "tools": 500, "draft": 250, "reserve": 10_000,
    }
    expected["free"] = 100_000 - sum(expected.values())
    x = 0.0
    for key in REGION_ORDER:
        start, width = seg[key]
        assert start == pytest.approx(x)
        assert width == pytest.approx(expected[key])
        x += width
    assert x == pytest.approx(100_000)
    assert chart.legend_text("history_tool") == "5,000 · 5.0%"
    assert chart.legend_text("free") == f"{expected['free']:,} · {expected['free'] / 1000:.1f}%"
    assert chart.legend_text("threshold") == "80,000 · 80.0%"
    assert chart.legend_text("limit") == "100,000 · 100.0%"
    assert "calibrated" in chart.header_text()
    assert chart._bar.threshold_line.value() == 80_000
    assert chart._bar.limit_line.value() == 100_000


def test_draft_override_and_overflow(chart):
    chart.set_snapshot(snap())
    chart.set_draft_tokens(1_234)
    chart.flush()
    assert chart.bar_segments()["draft"][1] == 1_234
    assert "1,234 draft" in chart.header_text()
    # over the window: free is 0 and the header says by how much
    chart.set_snapshot(snap(history_tool=95_000))
    chart.flush()
    assert chart.bar_segments()["free"][1] == 0
    assert "over the window by" in chart.header_text()
    chart.set_snapshot(snap(history_tool=65_000))
    chart.flush()
    assert "over the compaction threshold" in chart.header_text()


def test_accuracy_label_follows_snapshot(chart):
    chart.set_snapshot(snap(accuracy="estimated"))
    chart.flush()
    assert "estimated" in chart.header_text()
    chart.set_snapshot(snap(accuracy="exact"))
    chart.flush()
    assert "exact" in chart.header_text()


def test_updates_are_drawn_at_once_and_reuse_plot_items(chart):
    # the chart does not throttle (the controller does): each setter draws what it is given
    items_before = list(chart._tl_plot.getPlotItem().items) + list(chart._bar.plot.getPlotItem().items)
    redraws = chart.redraws
    for i in range(50):
        chart.set_snapshot(snap(history_tool=5_000 + i))
        assert chart.bar_segments()["history_tool"][1] == 5_000 + i
    assert chart.redraws - redraws == 50
    assert chart.bar_segments()["history_tool"][1] == 5_049
    set_calls(chart, [record(i) for i in range(20)])
    chart.append_call(TimelineCall.from_json(record(20)))
    chart.flush()
    items_after = list(chart._tl_plot.getPlotItem().items) + list(chart._bar.plot.getPlotItem().items)
    assert [id(i) for i in items_after] == [id(i) for i in items_before]


def test_timeline_columns_and_provider_line(chart):
    recs = [record(i) for i in range(30)]
    recs[5]["provider_prompt_tokens"] = None  # a call without a usage report
    set_calls(chart, recs)
    chart.flush()
    assert chart.column_count() == 30
    tops = chart.column_tops()
    for i in (0, 7, 29):
        r = recs[i]
        assert tops[i] == r["system"] + r["summary"] + r["history"] + r["tools"]
    prov = chart.provider_series()
    assert math.isnan(prov[5])
    assert prov[7] == recs[7]["provider_prompt_tokens"]
    x, y = chart._provider_curve.getData()
    assert len(x) == 30 and y[7] == recs[7]["provider_prompt_tokens"]
    # stacked: each region's bars start where the previous region ends
    hist_user = chart._tl_bars["history_user"].opts
    assert hist_user["y0"][3] == recs[3]["system"] + recs[3]["summary"]
    tip = chart.column_tooltip(7)
    assert "Call 8" in tip and f"{recs[7]['provider_prompt_tokens']:,}" in tip
    assert "Reported by provider: —" in chart.column_tooltip(5)
    assert "30 calls" in chart.timeline_header_text()


def test_compaction_markers_are_placed_by_time_and_have_tooltips(chart):
    recs = [record(i) for i in range(10)]
    ev = asdict(CompactionEvent(
        trigger="manual", tokens_before=40_000, tokens_after=9_000, messages_compacted=12, messages_kept=3,
        duration_ms=1500, result="summarized", summary="## Goal\nShip it", ts="2025-11-21T10:00:04.500+00:00",
    ))
    set_calls(chart, recs, [ev])
    chart.flush()
    assert chart.compaction_count() == 1
    assert chart.compaction_x(0) == 5.5  # after the 5th call (x = 1..10)
    tip = chart.compaction_tooltip(0)
    assert "manual" in tip and "40,000 → 9,000" in tip and "-78%" in tip and "Ship it" in tip
    x, y = chart._compaction_marks.markers.getData()
    assert list(x) == [5.5] and list(y) == [40_000]
    # an event without time goes after the last call
    chart.add_compaction(comp({"trigger": "auto", "tokens_before": 1, "tokens_after": 1}))
    chart.flush()
    assert chart.compaction_x(1) == 10.5
    assert "2 compactions" in chart.timeline_header_text()


def test_clicks_and_hover_hit_columns_and_markers(chart, qtbot):
    set_calls(chart, [record(i) for i in range(10)], [{"trigger": "auto", "calls_before": 5,
                                                        "tokens_before": 30_000, "tokens_after": 10_000}])
    chart.flush()
    vb = chart._tl_plot.getPlotItem().getViewBox()
    vb.autoRange()
    scene_col = vb.mapViewToScene(QPointF(3.0, 1_000))
    scene_marker = vb.mapViewToScene(QPointF(5.5, 30_000))
    assert chart._hit(scene_col) == ("call", 2)
    assert chart._hit(scene_marker) == ("compaction", 0)
    clicked = []
    chart.call_clicked.connect(clicked.append)

    class Ev:
        def __init__(self, p):
            self._p = p

        def scenePos(self):
            return self._p

    chart._on_timeline_mouse_clicked(Ev(scene_col))
    assert clicked == [2]
    with qtbot.waitSignal(chart.compaction_clicked) as blocker:
        chart._on_timeline_mouse_clicked(Ev(scene_marker))
    assert blocker.args[0].tokens_before == 30_000
    chart._tips.show_at(scene_col)  # shows a tooltip; must not raise


def test_one_update_with_1000_columns_is_fast(chart):
    set_calls(chart, [record(i) for i in range(1000)])
    chart.set_snapshot(snap())
    chart.flush()
    times = []
    for i in range(30):
        chart.set_snapshot(snap(history_tool=5_000 + i))
        chart.append_call(TimelineCall.from_json(record(1000 + i)))
        t = time.perf_counter()
        chart.flush()
        times.append(time.perf_counter() - t)
    assert np.median(times) < 0.005, times


def test_palette_switch_recolours_without_new_items(chart):
    chart.set_snapshot(snap())
    chart.flush()
    n = len(chart._bar.plot.getPlotItem().items)
    chart.set_palette(DARK)
    assert len(chart._bar.plot.getPlotItem().items) == n
    assert chart._bar.item._brushes[0].color().name() == DARK.regions["system"]
    img = chart.grab().toImage()
    assert img.width() > 0


def test_empty_chart(chart):
    chart.clear()
    chart.flush()
    assert chart.header_text() == "No request yet"
    assert chart.column_count() == 0
    assert chart.timeline_header_text() == "No calls yet"
    chart.set_snapshot(snap())  # a new session: the next request's column alone, said to be that
    assert chart.timeline_header_text().startswith("No calls yet · ")
    assert "the pale column: the next request, estimated" in chart.timeline_header_text()
    chart.set_snapshot(None)
    assert chart.timeline_header_text() == "No calls yet"


def test_real_trajectory_shows_every_call_against_the_provider(chart, tmp_path):
    from engine.context.conversation import Session
    from engine.importer import import_transcript
    from tests.conftest import trajectory_files

    files = trajectory_files()
    if not files:
        pytest.skip("no trajectories in ../shared/data/trajectories")
    path = files[0]
    report = import_transcript(path, session_dir=tmp_path / "s")
    session = Session.load(tmp_path / "s")
    events = session.read_events()
    snapshots = [e for e in events if e.get("type") == "context"]
    set_calls(chart, snapshots, [e for e in events if e.get("type") == "compaction"])
    chart.set_snapshot(ContextSnapshot.from_json(snapshots[-1]))  # the next request, as the app builds it
    chart.flush()
    assert chart.column_count() == report.snapshots == len(snapshots) > 10
    prov = chart.provider_series()
    assert int((~np.isnan(prov)).sum()) == report.reported_calls > 0
    # the estimate (calibrated on the previous call) stays close to what the provider counted
    tops = chart.column_tops()
    both = ~np.isnan(prov)
    rel = np.abs(tops[both] - prov[both]) / prov[both]
    assert np.median(rel[1:]) < 0.05
    assert "reported" in chart.timeline_header_text()
    assert not chart.grab().isNull()


def test_an_imported_claude_code_session_with_its_compaction(chart, tmp_path):
    from engine.context.conversation import Session
    from engine.ingest import import_source
    from tests.conftest import SHARED
    from widgets.theme import format_tokens

    path = SHARED / "data" / "sessions" / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
    report = import_source(path, session_dir=tmp_path / "s")
    session = Session.load(tmp_path / "s")
    events = session.read_events()
    snapshots = [e for e in events if e.get("type") == "context"]
    set_calls(chart, snapshots, [e for e in events if e.get("type") == "compaction"])
    chart.set_snapshot(ContextSnapshot.from_json(snapshots[-1]))  # the next request, as the app builds it
    chart.flush()
    assert chart.column_count() == report.calls == 152 and chart.compaction_count() == 1
    prov = chart.provider_series()
    assert int((~np.isnan(prov)).sum()) == report.reported_calls == 152
    assert f"{format_tokens(167094)} → {format_tokens(33960)} prompt tokens" in chart.compaction_tooltip(0)
    tip = chart.column_tooltip(1)
    first = snapshots[1]
    assert f"read {format_tokens(first['cache_read_tokens'])}" in tip
    assert f"written {format_tokens(first['cache_write_tokens'])}" in tip
    assert "System prompt + tools (inferred)" in tip
    tops = chart.column_tops()
    rel = np.abs(tops[1:] - prov[1:]) / prov[1:]
    assert np.median(rel) < 0.01
    session.close()


class _Click:
    def __init__(self, pos, button=None, mods=None):
        from PySide6.QtCore import Qt

        self._pos = pos
        self._button = button or Qt.MouseButton.LeftButton
        self._mods = mods or Qt.KeyboardModifier.NoModifier

    def scenePos(self):
        return self._pos

    def button(self):
        return self._button

    def modifiers(self):
        return self._mods


def test_picking_two_calls_asks_for_their_diff(chart, qtbot):
    from PySide6.QtCore import Qt

    set_calls(chart, [record(i) for i in range(20)])
    chart.flush()
    vb = chart._tl_plot.getPlotItem().getViewBox()
    vb.autoRange()
    col = lambda i: vb.mapViewToScene(QPointF(i + 1, 1_000))  # noqa: E731
    chart._on_timeline_mouse_clicked(_Click(col(4)))
    assert chart.selected_call() == 4
    assert list(chart._selection._bar.opts["x"]) == [5.0]
    with qtbot.waitSignal(chart.diff_requested) as blocker:
        chart._on_timeline_mouse_clicked(_Click(col(9), mods=Qt.KeyboardModifier.ControlModifier))
    assert blocker.args == [5, 10]
    assert chart.selected_call() == 4  # the pick stays for another comparison
    menu = chart.call_menu(9)
    texts = [a.text() for a in menu.actions()]
    assert texts[0] == "Diff with previous call (9 → 10)" and texts[1] == "Diff from call 5 (picked) → 10"
    with qtbot.waitSignal(chart.diff_requested) as blocker:
        menu.actions()[0].trigger()
    assert blocker.args == [9, 10]
    assert not chart.call_menu(0).actions()[0].isEnabled()  # no call before the first
    chart.call_menu(12).actions()[-1].trigger()
    assert chart.selected_call() == 12
    set_calls(chart, [record(i) for i in range(3)])
    assert chart.selected_call() is None  # another session: nothing picked


def test_subagent_marks_sit_above_the_parent_call(chart, qtbot):
    recs = [record(i) for i in range(10)]
    set_calls(chart, recs)
    marks = [SubagentMark(id="a1", model="haiku", calls=3, peak_prompt_tokens=9_000, total_prompt_tokens=20_000,
                          session="subagents/a1", call_index=6),
             SubagentMark(id="lost", session="subagents/lost", call_index=None)]
    chart.set_subagents(marks)
    assert chart.subagent_count() == 1
    x, y = chart.subagent_positions()[0]
    top = max(chart.column_tops()[6], chart.provider_series()[6])
    assert x == 7.0 and y > top
    tip = chart.subagent_tooltip(0)
    assert tip.splitlines() == ["Subagent a1", "model haiku", "3 calls", "peak prompt 9,000 tokens",
                                "total prompt 20,000 tokens", "Click to open subagents/a1"]
    assert "subagent" in chart._tl_legend.text()
    vb = chart._tl_plot.getPlotItem().getViewBox()
    vb.autoRange()
    pos = vb.mapViewToScene(QPointF(x, y))
    assert chart._hit(pos) == ("subagent", 0)
    assert chart._hit(vb.mapViewToScene(QPointF(x, 1_000))) == ("call", 6)  # the column below is still a call
    with qtbot.waitSignal(chart.subagent_requested) as blocker:
        chart._on_timeline_mouse_clicked(_Click(pos))
    assert blocker.args == ["subagents/a1"]
    chart.clear()
    assert chart.subagent_count() == 0 and "subagent" not in chart._tl_legend.text()


def test_the_compaction_tooltip_says_what_compacting_cost(chart):
    set_calls(chart, [record(i) for i in range(5)], [
        {"trigger": "auto", "calls_before": 3, "tokens_before": 167_731, "tokens_after": 42_603, "result": "summarized",
         "source_format": "claude-code", "duration_ms": 0.0, "summary": "\n".join(f"line {k}" for k in range(20)),
         "cost": {"prompt_tokens": 169_910, "completion_tokens": 6, "cache_read_tokens": 167_093,
                  "cache_write_tokens": 2_814, "model": "claude-opus-4-6"}},
        {"trigger": "manual", "tokens_before": 5_000, "tokens_after": 1_000, "result": "summarized",
         "duration_ms": 1500, "messages_compacted": 4, "messages_kept": 1},
    ])
    tip = chart.compaction_tooltip(0)
    assert "Compaction (auto) · summarized · by claude-code" in tip
    assert ("Compacting cost: 169,910 prompt tokens (167,093 cache read, 2,814 cache write), 6 completion · "
            "claude-opus-4-6") in tip
    assert "line 3" in tip and "line 4" not in tip and tip.endswith("…")  # the summary's first lines
    own = chart.compaction_tooltip(1)
    assert "Compacting cost" not in own and "4 messages compacted · 1 kept · 1.5 s" in own


def test_a_timeline_without_provider_figures_draws_without_warnings(chart, qtbot):
    """SWE-agent trajectories report no prompt tokens: the provider line has no point, and drawing
    it (and the cache view's hit rate) must not ask numpy for the bounds of nothing."""
    import warnings

    recs = [{**record(i), "provider_prompt_tokens": None} for i in range(12)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        set_calls(chart, recs)
        chart.flush()
        chart.repaint()
        qtbot.wait(50)
        chart.grab()
    assert chart.column_count() == 12
    assert np.isnan(chart.provider_series()).all()


def test_the_call_tooltip_says_what_the_call_cost(chart):
    set_calls(chart, [{**record(0), "cost_usd": 0.0123, "cost_problem": ""},
                        {**record(1), "cost_usd": None, "cost_problem": "no price for 'x'"},
                        {**record(2), "agent_cost_usd": 0.5, "cost_usd": 0.4}, record(3)])
    assert "Cost: $0.0123 (litellm's prices)" in chart.column_tooltip(0)
    assert "Cost: unknown (no price for 'x')" in chart.column_tooltip(1)
    tip = chart.column_tooltip(2)
    assert "Cost: $0.4000" in tip and "The agent's own cost: $0.5000" in tip
    assert "Cost" not in chart.column_tooltip(3)  # not priced: nothing said


def _small_session(window: int = 1_000_000, calls: int = 8) -> list[dict]:
    """A 13k-token session against a 1M window (its threshold at 80 %)."""
    return [snap(window=window, threshold_tokens=int(0.8 * window), max_tokens=4_000, system=2_000, summary=0,
                 history_user=500 + 100 * i, history_assistant=1_000 + 200 * i, history_tool=2_000 + 500 * i,
                 tools=1_500, provider_prompt_tokens=7_000 + 800 * i, raw_prompt_tokens=7_100 + 800 * i,
                 call_index=i).to_json() for i in range(calls)]


def test_a_small_session_in_a_huge_window_is_fitted_to_its_data_with_a_way_back(chart):
    recs = _small_session()
    set_calls(chart, recs)
    nxt = snap(window=1_000_000, threshold_tokens=800_000, max_tokens=4_000, system=2_000, summary=0,
               history_user=1_300, history_assistant=2_600, history_tool=6_000, tools=1_500, draft=0)
    chart.set_snapshot(nxt)
    peak = max(chart.column_tops().max(), np.nanmax(chart.provider_series()))
    assert peak < 20_000
    # by itself: fitted to the calls, the lines above the scale named
    assert chart.fit_to_data() and chart.fit_button.isChecked() and chart.fit_button.isEnabled()
    lo, hi = chart.timeline_y_range()
    assert lo == 0 and peak < hi < 1.2 * peak  # the columns fill the plot: no flat line
    assert chart.offscale_text() == "window 1M ↑ · threshold 800k ↑"
    assert chart._offscale_label.isVisible()
    (_, right), _ = chart._bar.plot.getPlotItem().getViewBox().viewRange()
    assert nxt.used < right < 2 * nxt.used and chart._bar.offscale.isVisible()  # the bar on its own scale too
    # the way back: the whole window, and the choice is kept as calls come
    chart.fit_button.click()
    assert not chart.fit_to_data() and chart.timeline_y_range()[1] >= 1_000_000
    assert chart.offscale_text() == "" and not chart._offscale_label.isVisible()
    assert chart._bar.plot.getPlotItem().getViewBox().viewRange()[0][1] >= 1_000_000
    chart.append_call(TimelineCall.from_json(_small_session(calls=9)[-1]))
    assert not chart.fit_to_data() and not chart.fit_button.isChecked()
    chart.fit_button.click()
    assert chart.fit_to_data() and chart.timeline_y_range()[1] < 30_000


def test_a_session_that_fills_its_window_is_drawn_against_the_whole_window(chart):
    set_calls(chart, _small_session(window=20_000))
    assert not chart.fit_to_data() and chart.timeline_y_range()[1] >= 20_000  # the window line in sight
    assert chart.offscale_text() == ""
    chart.set_fit_to_data(True)  # asked for: the window is above the calls, so the scale fits them
    assert chart.fit_to_data() and chart.timeline_y_range()[1] < 20_000
    chart.set_fit_to_data(None)
    chart.clear()
    assert not chart.fit_to_data() and not chart.fit_button.isEnabled()  # nothing drawn: nothing to fit


def test_the_window_and_threshold_lines_run_across_the_chart(chart):
    from widgets.chart_text import FAR

    recs = [record(i) for i in range(3)]
    set_calls(chart, recs)
    chart.set_snapshot(snap(threshold_tokens=90_000))  # the next request's threshold differs from the calls'
    for name in ("window", "threshold"):
        assert chart.line_span(name) == (-FAR, FAR)  # from the left edge on past the next request's column
    x, y = chart._threshold_curve.getData()
    assert y[0] == 80_000 and y[-1] == 90_000 and x[-2] == 3.5  # the next request's from after the last call
    points = list(zip(x, y, strict=True))
    assert (0.5, 80_000) in points and (3.5, 80_000) in points  # every column covered (between: one segment)
    assert points[points.index((0.5, 80_000)) + 1] == (3.5, 80_000)
    chart.clear()
    chart.set_snapshot(snap())  # no call yet: the next request's lines, still across
    assert chart.line_span("threshold") == (-FAR, FAR)


def test_the_legend_and_the_tooltips_say_which_regions_are_exact_and_which_estimated(chart):
    chart.set_snapshot(snap(accuracy="calibrated"))
    assert chart.legend_accuracy("history_tool") == "cal." and chart.legend_accuracy("reserve") == "set"
    assert "scaled to the provider's count" in chart._bar.legend._names["history_tool"].toolTip()
    chart.set_snapshot(snap(accuracy="exact", estimator="exact"))
    assert chart.legend_accuracy("history_user") == "exact"
    chart.set_snapshot(snap(accuracy="estimated", prefix_source="inferred"))
    assert chart.legend_accuracy("system") == "inferred" and chart.legend_accuracy("summary") == "est."
    assert "inferred" in chart._bar.legend._names["system"].toolTip()
    recs = [record(i) for i in range(2)]
    recs[1]["prefix_source"] = "file"  # an import's call: its system prompt and tools counted as sent
    set_calls(chart, recs)
    assert "History · tool results: 3,000 (calibrated)" in chart.column_tooltip(0)
    tip = chart.column_tooltip(1)
    assert "System prompt: 1,000 (estimated)" in tip and "Tool definitions: 500 (estimated)" in tip
    assert "History · user: 1,010 (calibrated)" in tip
    chart.set_snapshot(None)
    assert chart.legend_accuracy("system") == ""


def test_a_call_tooltip_stays_while_the_pointer_rests_on_the_column(chart, qtbot):
    """Qt asks the view for its tooltip (a ToolTip event) when the pointer rests; the chart answers it with the
    column's tooltip instead of letting the scene hide the one shown on the move (it vanished after ~1 s)."""
    from PySide6.QtCore import QEvent, QPoint
    from PySide6.QtGui import QHelpEvent
    from PySide6.QtWidgets import QApplication, QToolTip

    set_calls(chart, [record(i) for i in range(4)])
    chart.flush()
    plot = chart._tl_plot
    vb = plot.getPlotItem().getViewBox()
    scene_pos = vb.mapViewToScene(QPointF(2.0, 100.0))  # on call 2's column
    view_pos = plot.mapFromScene(scene_pos)
    chart._tips.show_at(scene_pos)
    qtbot.waitUntil(QToolTip.isVisible, timeout=3_000)
    assert QToolTip.text() == chart.column_tooltip(1)
    QApplication.sendEvent(plot.viewport(), QHelpEvent(QEvent.Type.ToolTip, view_pos, plot.mapToGlobal(view_pos)))
    qtbot.wait(800)  # a hidden tooltip goes after 300 ms
    assert QToolTip.isVisible() and QToolTip.text() == chart.column_tooltip(1)
    outside = QPoint(2, 2)  # off every column: the rest there hides it
    QApplication.sendEvent(plot.viewport(), QHelpEvent(QEvent.Type.ToolTip, outside, plot.mapToGlobal(outside)))
    qtbot.waitUntil(lambda: not QToolTip.isVisible(), timeout=3_000)


def test_a_new_call_is_drawn_with_one_paint_of_the_timeline(chart, qtbot):
    """The x range that takes the new column in is set with the data, not in the paint (pyqtgraph's auto range,
    computed when the view is painted, asks for a second paint of the whole plot: two paints a call)."""
    from PySide6.QtCore import QEvent, QObject

    class Paints(QObject):
        count = 0

        def eventFilter(self, watched, event):
            if event.type() == QEvent.Type.Paint:
                self.count += 1
            return False

    set_calls(chart, [record(i) for i in range(200)])
    chart.set_snapshot(snap())
    qtbot.wait(50)
    paints = Paints()
    chart._tl_plot.viewport().installEventFilter(paints)
    for i in range(200, 205):
        before = paints.count
        chart.append_call(TimelineCall.from_json(record(i)))
        chart.set_snapshot(snap(history_tool=5_000 + i))
        qtbot.waitUntil(lambda before=before: paints.count > before, timeout=2_000)
        qtbot.wait(60)
        assert paints.count == before + 1
    x_lo, x_hi = chart._tl_plot.getPlotItem().getViewBox().viewRange()[0]
    assert x_lo < 1 and x_hi > 206  # every column and the next request's in view


def test_the_x_range_grows_in_steps_not_with_every_call(chart):
    """A long session's x range (so the axis, its ticks and labels) stays as it is for most new calls: it keeps room
    on the right and is set again only when the columns reach it. Every column and the next request's stay in view."""
    set_calls(chart, [record(i) for i in range(1000)])
    chart.set_snapshot(snap())
    vb = chart._tl_plot.getPlotItem().getViewBox()
    ranges = []
    for i in range(1000, 1040):
        chart.append_call(TimelineCall.from_json(record(i)))
        chart.set_snapshot(snap(history_tool=5_000 + i))
        lo, hi = vb.viewRange()[0]
        assert lo < 1 - 0.4 and hi > chart.column_count() + 1 + 0.4  # every column and the next request's
        ranges.append((lo, hi))
    assert len(set(ranges)) == 1  # 40 new calls, one range (before: a new range with each call)
    for i in range(1040, 1200):  # the columns reach the room on the right: a new range, with room again
        chart.append_call(TimelineCall.from_json(record(i)))
        lo, hi = vb.viewRange()[0]
        assert hi > chart.column_count() + 1 + 0.4 + 0.01 * chart.column_count()
        ranges.append((lo, hi))
    assert 2 <= len(set(ranges)) <= 4
    set_calls(chart, [record(i) for i in range(30)])  # fewer calls: the range fits them again
    lo, hi = vb.viewRange()[0]
    assert hi < 30 * 1.2


def test_x_range_keeps_its_range_while_it_holds_the_columns_with_room():
    from widgets.chart_parts import MIN_TIMELINE_SLOTS, X_PAD, X_ROOM, x_range

    assert x_range(3) == x_range(3, (0.0, 1000.0)) == (0.4, MIN_TIMELINE_SLOTS + 0.6)  # a few calls: fixed
    r = x_range(5000)
    assert r[0] == -1.0 and r[1] == pytest.approx(5001.4 + X_ROOM * 5000.8)
    for n in range(5000, 5250):
        assert x_range(n, r) == r  # (X_ROOM - X_PAD) of the span: some 300 calls on one range
    later = x_range(5400, r)
    assert later != r and later[1] > 5401.4 + X_PAD * 5400.8
    assert x_range(100, r) != r  # far too wide for 100 calls: set again
    lo, hi = x_range(50)  # a short session: the range fits its columns, no empty slots after the next request
    assert lo < 0.6 and hi == pytest.approx(51.4 + X_PAD * 50.8)
    assert x_range(51, (lo, hi)) != (lo, hi)


def test_a_next_request_alone_does_not_set_the_lines_again(chart, qtbot):
    """The window and threshold lines span the plot: set again, the whole plot is drawn again. A new next request
    with the same window and threshold (the follow's polls) leaves them as they are."""
    set_calls(chart, [record(i) for i in range(50)])
    chart.set_snapshot(snap())
    changes = []
    chart._window_curve.sigPlotChanged.connect(lambda *_: changes.append("window"))
    chart._threshold_curve.sigPlotChanged.connect(lambda *_: changes.append("threshold"))
    for i in range(5):
        chart.set_snapshot(snap(history_tool=6_000 + i))
    assert changes == []
    chart.set_snapshot(snap(threshold_tokens=90_000))  # the next request's threshold moves: drawn again
    assert changes == ["threshold"]
    assert chart._threshold_curve.getData()[1][-1] == 90_000


def test_the_calls_are_kept_drawn_while_only_the_next_request_changes(qtbot):
    """The columns, the lines through them and the left axis (the grid) are cached as drawn: a new next request
    (its faint column) repaints that column's part of the plot without drawing the thousands of bars again."""
    import pyqtgraph as pg

    painted = []
    real = pg.BarGraphItem.paint

    def counting(self, *args):
        painted.append(self)
        return real(self, *args)

    pg.BarGraphItem.paint = counting
    try:
        c = ContextChart(pal=LIGHT)
        qtbot.addWidget(c)
        c.resize(420, 640)
        c.show()
        qtbot.waitExposed(c)
        set_calls(c, [record(i) for i in range(300)])
        c.set_snapshot(snap())
        qtbot.waitUntil(lambda: c._ghost in painted, timeout=2_000)
        qtbot.wait(50)
        regions = {id(item) for bars in c._tl_bars.values() for item in bars.items}
        for i in range(3):
            painted.clear()
            c.set_snapshot(snap(history_tool=6_000 + 500 * i))
            qtbot.waitUntil(lambda: c._ghost in painted, timeout=2_000)
            assert not regions & set(map(id, painted))  # the ghost drawn, the 300 columns under it not
        painted.clear()
        c.append_call(TimelineCall.from_json(record(300)))  # a new call: the columns drawn again (all live: 301)
        live = {id(bars.live) for bars in c._tl_bars.values()}
        qtbot.waitUntil(lambda: live <= set(map(id, painted)), timeout=2_000)
    finally:
        pg.BarGraphItem.paint = real


def test_a_new_call_of_a_long_session_draws_the_last_calls_only(qtbot, monkeypatch):
    """From SPLIT_FROM calls, the columns before a cut are kept as drawn while calls come: a new call draws the
    columns after the cut (LIVE_MAX at most) and the last points of the lines, not the thousands before; once
    more than LIVE_MAX calls came, the cut moves to the last call and the frozen columns are drawn again, once."""
    import pyqtgraph as pg

    from widgets import chart_split

    monkeypatch.setattr(chart_split, "LIVE_MAX", 8)
    painted: list[object] = []
    real = pg.BarGraphItem.paint

    def counting(self, *args):
        painted.append(self)
        return real(self, *args)

    monkeypatch.setattr(pg.BarGraphItem, "paint", counting)
    c = ContextChart(pal=LIGHT)
    qtbot.addWidget(c)
    c.resize(420, 640)
    c.show()
    qtbot.waitExposed(c)
    n = chart_split.SPLIT_FROM + 100
    set_calls(c, [record(i % 300) for i in range(n)])
    frozen = {id(bars.frozen) for bars in c._tl_bars.values()}
    live = {id(bars.live) for bars in c._tl_bars.values()}
    assert c._cut.at == n - 1 and len(c._tl_bars["system"].frozen.opts["x"]) == n - 1
    qtbot.waitUntil(lambda: frozen <= set(map(id, painted)), timeout=2_000)
    qtbot.wait(100)  # (the first paints settled)
    vb = c._tl_plot.getPlotItem().getViewBox()
    kept = 0
    for i in range(7):  # the live part grows to LIVE_MAX calls: the frozen columns are not drawn again
        painted.clear()
        shown = vb.viewRange()
        c.append_call(TimelineCall.from_json(record(i)))
        qtbot.waitUntil(lambda: live <= set(map(id, painted)), timeout=2_000)
        if vb.viewRange() == shown:  # (unless the x range took its next step: the whole plot is drawn again)
            assert not frozen & set(map(id, painted))
            kept += 1
    assert kept >= 5
    assert c._cut.at == n - 1 and len(c._tl_bars["system"].live.opts["x"]) == 8
    painted.clear()
    c.append_call(TimelineCall.from_json(record(8)))  # one more: the cut moves to the last call
    qtbot.waitUntil(lambda: frozen <= set(map(id, painted)), timeout=2_000)
    assert c._cut.at == n + 7 and c.column_count() == n + 8
    assert len(c._tl_bars["system"].opts["x"]) == n + 8  # every column, once
    tops = np.sum([np.asarray(bars.opts["height"]) for bars in c._tl_bars.values()], axis=0)
    assert np.array_equal(tops, c.column_tops())
    x, y = c._provider_curve.getData()
    assert np.array_equal(y, c.provider_series()) and np.array_equal(x, np.arange(1, n + 9))


def test_the_chart_of_a_long_session_draws_as_it_did_whole(qtbot, monkeypatch):
    """The frozen and the live parts draw what one item each drew: the columns to the pixel; the lines but for the
    join, where the dotted estimate's pattern starts again (a few pixels)."""
    from PySide6.QtGui import QImage

    from widgets import chart_split

    def image(split_from: int) -> QImage:
        monkeypatch.setattr(chart_split, "SPLIT_FROM", split_from)
        c = ContextChart(pal=LIGHT)
        qtbot.addWidget(c)
        c.resize(700, 640)
        c.show()
        qtbot.waitExposed(c)
        set_calls(c, [record(i % 300) for i in range(900)])
        for i in range(40):
            c.append_call(TimelineCall.from_json(record(i)))
        c.set_snapshot(snap())
        qtbot.wait(50)
        return c._tl_plot.grab().toImage()

    whole, split = image(10**9), image(512)
    assert whole.size() == split.size()
    differ = sum(1 for y in range(whole.height()) for x in range(whole.width())
                 if whole.pixel(x, y) != split.pixel(x, y))
    assert differ <= 0.002 * whole.width() * whole.height()


def test_a_line_of_more_calls_than_pixels_is_drawn_by_its_extremes(qtbot):
    """The provider's and the raw estimate's lines over thousands of calls are drawn from their extremes per pixel
    (pyqtgraph's "peak" downsampling): far fewer segments, the same highs and lows; not with a gap in the line."""
    c = ContextChart(pal=LIGHT)
    qtbot.addWidget(c)
    c.resize(420, 640)
    c.show()
    qtbot.waitExposed(c)
    recs = [record(i % 400) for i in range(4000)]
    set_calls(c, recs)
    c.set_snapshot(snap())
    x, y = c._provider_curve.getData()
    assert len(x) < 2000
    series = c.provider_series()
    assert y.max() == series.max() and y.min() == series.min()
    assert len(c._raw_curve.getData()[0]) < 2000
    recs[10]["provider_prompt_tokens"] = None  # a gap: every point drawn (a group with a gap would be a gap)
    set_calls(c, recs)
    x, y = c._provider_curve.getData()
    assert len(x) == 4000 and np.isnan(y[10])
    assert len(c._raw_curve.getData()[0]) < 2000


def test_the_names_above_a_fitted_scale_are_not_set_again_while_they_stay(chart):
    """The fitted scale's "window 1M ↑" label (a rich-text item, laid out when set) is set when its names or colours
    change, not with each next request."""
    set_calls(chart, _small_session())
    nxt = dict(window=1_000_000, threshold_tokens=800_000, max_tokens=4_000, system=2_000, summary=0,
               history_user=1_300, history_assistant=2_600, tools=1_500, draft=0)
    chart.set_snapshot(snap(history_tool=6_000, **nxt))
    assert chart.fit_to_data() and "window 1M ↑" in chart.offscale_text()
    label = chart._offscale_label
    sets = []
    real = label.setHtml
    label.setHtml = lambda text: (sets.append(text), real(text))
    for i in range(5):
        chart.set_snapshot(snap(history_tool=6_100 + i, **nxt))
    assert sets == [] and label.isVisible()
    chart.set_palette(DARK)  # new colours: set again
    assert len(sets) == 1 and DARK.limit in sets[0]
    chart.set_fit_to_data(False)  # the whole window: no names, hidden
    assert not label.isVisible() and chart.offscale_text() == ""
