"""The Usage view: stacked bars per day and model (items made once), sortable tables, the date range."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import pytest
from PySide6.QtCore import Qt

from widgets.formatting import format_usd
from widgets.theme import DARK
from widgets.usage_view import MAX_MODELS, OTHER, PATH_ROLE, UsageView, usd_text


def _report(**kw: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "since": None, "until": None, "updating": False, "problem": "", "index": None,
        "by_day_model": [
            {"day": "2026-03-01", "model": "opus", "calls": 2, "cost_usd": 3.0, "unpriced_calls": 0, "tokens": 1000},
            {"day": "2026-03-01", "model": "mini", "calls": 1, "cost_usd": 0.5, "unpriced_calls": 0, "tokens": 4000},
            {"day": "2026-03-03", "model": "mini", "calls": 1, "cost_usd": 1.0, "unpriced_calls": 0, "tokens": 500},
            {"day": "2026-03-03", "model": "local", "calls": 1, "cost_usd": None, "unpriced_calls": 1, "tokens": 10},
        ],
        "models": [{"model": "opus", "price_key": "opus", "calls": 2, "cost_usd": 3.0, "unpriced_calls": 0},
                   {"model": "mini", "price_key": "mini", "calls": 2, "cost_usd": 1.5, "unpriced_calls": 0},
                   {"model": "local", "price_key": None, "calls": 1, "cost_usd": None, "unpriced_calls": 1}],
        "sessions": [
            {"title": "cheap", "agent": "codex", "project": "p", "path": "/x/cheap.jsonl", "cost_usd": 0.5,
             "unpriced_calls": 0, "calls": 9, "peak_fullness": 0.9, "compactions": 2, "cache_hit_rate": 0.5,
             "last_call": "2026-03-03T10:00:00"},
            {"title": "dear", "agent": "claude-code", "project": "q", "path": "/x/dear.jsonl", "cost_usd": 4.0,
             "unpriced_calls": 1, "calls": 3, "peak_fullness": 0.2, "compactions": 0, "cache_hit_rate": 0.9,
             "agent_cost_usd": 4.1, "last_call": "2026-03-01T10:00:00"}],
        "projects": [{"project": "q", "cost_usd": 4.0, "calls": 3}, {"project": "p", "cost_usd": 0.5, "calls": 9}],
        "tools": [{"tool": "Read", "results": 3, "result_tokens": 900, "sessions": 2, "largest": 500,
                   "tool_calls": 3, "cost_usd_of_calls": 0.25},
                  {"tool": "Bash", "results": 5, "result_tokens": 9000, "sessions": 1, "largest": 4000,
                   "tool_calls": 6, "cost_usd_of_calls": None}],
        "total": {"calls": 5, "cost_usd": 4.5, "unpriced_calls": 1, "prompt_tokens": 5000, "output_tokens": 10,
                  "cache_hit_rate": 0.8},
    }
    data.update(kw)
    return data


@pytest.fixture
def view(qtbot: Any) -> UsageView:
    w = UsageView()
    qtbot.addWidget(w)
    w.resize(900, 700)
    return w


def test_bars_stack_cost_by_model_per_day_with_empty_days_kept(view: UsageView) -> None:
    bars = list(view._bars)
    view.set_report(_report())
    assert view.days() == ["2026-03-01", "2026-03-02", "2026-03-03"]
    assert view.series() == ["opus", "mini", "local"]
    assert view.bar_totals() == pytest.approx([3.5, 0.0, 1.0])
    view.set_metric("tokens")
    assert view.bar_totals() == pytest.approx([5000, 0, 510])
    assert view._bars == bars  # the same plot items, updated
    view.set_report(_report(by_day_model=[], models=[], total={}))
    assert view.bar_totals() == [] and not any(b.isVisible() for b in view._bars)
    assert "No agent calls" in view.summary.text()


def test_many_models_stack_the_rest_as_other(view: UsageView) -> None:
    rows = [{"day": "2026-03-01", "model": f"m{i}", "cost_usd": 1.0, "tokens": 1} for i in range(MAX_MODELS + 3)]
    view.set_report(_report(by_day_model=rows, models=[{"model": r["model"]} for r in rows]))
    assert len(view.series()) == MAX_MODELS + 1 and view.series()[-1] == OTHER
    assert view.bar_totals() == pytest.approx([MAX_MODELS + 3])


def test_the_day_tooltip_breaks_the_day_down(view: UsageView) -> None:
    view.set_report(_report())
    tip = view.day_tooltip(2)
    assert tip.startswith("2026-03-03") and "$1.00+" in tip and "local: unknown" in tip and "mini: $1.00" in tip
    assert "no calls" in view.day_tooltip(1) and view.day_tooltip(9) == ""


def test_summary_says_lower_bound_updating_and_problems(view: UsageView) -> None:
    view.set_report(_report(updating=True, problem="cannot query"))
    text = view.summary.text()
    assert "$4.50+" in text and "5 calls" in text and "reading new session files" in text and "cannot query" in text
    assert usd_text(None, 2) == "unknown" and usd_text(None) == "" and usd_text(2.0, 1) == "$2.00+"


def test_tables_sort_by_number_and_a_double_click_opens_the_session(view: UsageView, qtbot: Any) -> None:
    view.set_report(_report())
    t = view.sessions
    assert [t.text(r, 0) for r in range(t.row_count())] == ["dear", "cheap"]  # by cost, largest first
    assert t.text(0, 4) == "$4.00+" and t.text(0, 5) == "$4.10" and t.text(0, 7) == "20 %"
    model = t.model()
    assert model.data(model.index(0, 4), Qt.ItemDataRole.TextAlignmentRole) == int(
        Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)  # numbers right-aligned
    assert model.data(model.index(0, 1), Qt.ItemDataRole.TextAlignmentRole) is None
    assert "/x/dear.jsonl" in model.data(model.index(0, 0), Qt.ItemDataRole.ToolTipRole)
    assert model.headerData(5, Qt.Orientation.Horizontal, Qt.ItemDataRole.ToolTipRole).startswith("The agent's own")
    t.sort_by(6, Qt.SortOrder.DescendingOrder)  # calls: 9 before 3 (numbers, not text)
    assert t.text(0, 0) == "cheap" and model.data(model.index(0, 0), PATH_ROLE) == "/x/cheap.jsonl"
    with qtbot.waitSignal(view.session_opened) as blocker:
        t.activated.emit(model.index(0, 3))
    assert blocker.args == ["/x/cheap.jsonl"]
    assert view.tools.text(0, 0) == "Bash"  # the most context first
    assert [view.tools.text(r, 5) for r in range(2)] == ["6", "3"]  # tool calls
    assert view.tools.text(1, 6) == usd_text(0.25) and view.tools.text(0, 6) == usd_text(None)  # their cost
    assert view.models.text(2, 6) == "no price"
    assert [view.projects.text(r, 0) for r in range(2)] == ["q", "p"]


def _sessions(n: int) -> list[dict[str, Any]]:
    return [{"title": f"s{i}", "agent": "codex", "project": f"p{i % 7}", "path": f"/x/s{i}.jsonl",
             "cost_usd": None if i % 10 == 3 else float(i % 50), "unpriced_calls": int(i % 10 == 3),
             "calls": i, "last_call": f"2026-03-{1 + i % 28:02d}T10:00:00"} for i in range(n)]


def test_no_value_sorts_last_either_way_and_ties_keep_the_reports_order(view: UsageView) -> None:
    view.set_report(_report(sessions=_sessions(40)))
    t = view.sessions
    for order in (Qt.SortOrder.DescendingOrder, Qt.SortOrder.AscendingOrder):
        t.sort_by(4, order)
        costs = [t.text(r, 4) for r in range(t.row_count())]
        assert costs[-4:] == ["unknown"] * 4 and "unknown" not in costs[:-4]
        assert [t.text(r, 0) for r in range(36, 40)] == ["s3", "s13", "s23", "s33"]
    assert t.text(0, 4) == format_usd(0.0)  # ascending: the cheapest first
    t.sort_by(2, Qt.SortOrder.AscendingOrder)  # by project (text): the report's order within a project
    p0 = [t.text(r, 0) for r in range(t.row_count()) if t.text(r, 2) == "p0"]
    assert p0 == [f"s{i}" for i in range(0, 40, 7)] and t.text(0, 2) == "p0"
    t.sort_by(2, Qt.SortOrder.DescendingOrder)  # stable both ways
    assert [t.text(r, 0) for r in range(t.row_count()) if t.text(r, 2) == "p0"] == p0 and t.text(0, 2) == "p6"
    t.sort_by(3, Qt.SortOrder.DescendingOrder)  # the last call (ISO text)
    assert t.text(0, 3) == "2026-03-28 10:00"


def test_a_refresh_keeps_the_sort_the_selection_and_the_scroll_position(view: UsageView, qtbot: Any) -> None:
    view.show()
    view.set_report(_report(sessions=_sessions(300)))
    t = view.sessions
    t.sort_by(6, Qt.SortOrder.AscendingOrder)  # calls, fewest first
    assert t.select_id("/x/s120.jsonl")
    bar = t.verticalScrollBar()
    bar.setValue(bar.maximum() // 2)
    where = bar.value()
    assert where > 0
    view.projects.sort_by(0, Qt.SortOrder.AscendingOrder)
    grown = _sessions(301)
    grown[120]["calls"] = 121  # the selected one moved a row
    view.set_report(_report(sessions=grown))
    assert t.horizontalHeader().sortIndicatorSection() == 6
    assert [t.text(r, 6) for r in range(3)] == ["0", "1", "2"]  # still by calls, fewest first
    assert t.selected_id() == "/x/s120.jsonl" and t.path(t.currentIndex().row()) == "/x/s120.jsonl"
    assert bar.value() == where
    assert view.projects.text(0, 0) == "p"  # projects still by name
    view.set_report(_report(sessions=_sessions(10)))  # the selected session is gone: nothing selected
    assert t.selected_id() == "" and t.row_count() == 10


def test_a_report_of_10000_sessions_fills_the_table(view: UsageView) -> None:
    view.show()
    view.set_report(_report(sessions=_sessions(10_000)))
    t = view.sessions
    assert t.row_count() == 10_000
    assert t.text(0, 4) == "$49.00" and t.text(9_999, 4) == "unknown"
    view.set_report(_report(sessions=_sessions(10_000)))  # again (a refresh): the same rows
    assert t.row_count() == 10_000


def test_the_date_range(view: UsageView, qtbot: Any) -> None:
    since, until = view.date_range()  # the last 30 days by default
    assert until == "" and since == (date.today() - timedelta(days=29)).isoformat()
    with qtbot.waitSignal(view.refresh_requested) as blocker:
        view.set_days(0)
    assert blocker.args == ["", "", False]
    with qtbot.waitSignal(view.refresh_requested) as blocker:
        view.preset.setCurrentIndex(0)  # the last 7 days
    assert blocker.args[0] == (date.today() - timedelta(days=6)).isoformat()
    with qtbot.waitSignal(view.refresh_requested) as blocker:
        view.refresh_button.click()
    assert blocker.args[2] is True  # Refresh reads new session files
    view.until_edit.setDate(view.until_edit.date().fromString("2026-03-02", "yyyy-MM-dd"))
    with qtbot.waitSignal(view.refresh_requested) as blocker:
        view.until_edit.editingFinished.emit()
    assert blocker.args[1] == "2026-03-02" and view.preset.currentText() == "Custom"


def test_palette(view: UsageView) -> None:
    view.set_report(_report(problem="x"))
    view.set_palette(DARK)
    assert DARK.error in view.summary.text()


def test_the_files_that_could_not_be_read_and_the_warnings_are_shown(view: UsageView, qtbot: Any) -> None:
    view.show()
    view.set_report(_report())
    assert view.notes.isHidden() and view.unreadable_list.isHidden()  # nothing to say: nothing shown
    unreadable = [{"path": "/h/.claude/projects/p/a.jsonl", "reason": "a.jsonl: not a regular file (FIFO): not read"},
                  {"path": "/h/.codex/sessions/b\\xff.jsonl", "reason": "ValueError: <b>bad</b>"}]
    warning = "the usage index in /d/usage is read-only (Read-only file system): 3 session file(s) changed"
    view.set_report(_report(unreadable=unreadable, warnings=[warning]))
    text = view.notes.text()
    assert not view.notes.isHidden() and "2 session files could not be read" in text and "read-only" in text
    assert "<b>bad</b>" not in view.notes.toolTip() and "a.jsonl" in view.notes.toolTip()  # drawn as text
    assert view.unreadable_list.isHidden()
    view.notes.linkActivated.emit("unreadable")  # "show": the list, path and reason each
    assert not view.unreadable_list.isHidden()
    assert view.unreadable_list.text().splitlines() == [f"{u['path']} — {u['reason']}" for u in unreadable]
    assert "hide" in view.notes.text()
    view.notes.linkActivated.emit("unreadable")
    assert view.unreadable_list.isHidden()
    view.set_report(_report())  # a later update read everything: the line goes
    assert view.notes.isHidden()
