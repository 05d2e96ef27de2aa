"""The Usage view: stacked bars per day and model (items made once), sortable tables, the date range."""

from __future__ import annotations

from typing import Any

import pytest
from PySide6.QtCore import QDate, Qt

from engine.usage.report import UsageReport
from widgets.formatting import format_usd
from widgets.theme import DARK
from widgets.usage_view import MAX_MODELS, OTHER, PATH_ROLE, UsageView, usd_text


def _report(**kw: Any) -> UsageReport:
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
    return UsageReport(**data)


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


def test_while_newer_figures_follow_the_summary_says_how_far_their_reading_has_come(view: UsageView) -> None:
    said = "reading session files: 3 of 164 (12.0 MB of 592.1 MB, 2 %)"
    view.set_report(_report(updating=True))
    assert "reading new session files…" in view.summary.text()
    view.set_progress(said)
    assert said in view.summary.text() and "reading new session files…" not in view.summary.text()
    view.set_report(_report(updating=False))  # the newer figures
    view.set_progress("reading session files: 164 of 164 (592.1 MB of 592.1 MB, 100 %)")  # (told late: not shown)
    assert "reading" not in view.summary.text()
    view.set_report(_report(updating=True))  # the next refresh: from its own start
    assert "reading new session files…" in view.summary.text() and said not in view.summary.text()


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
    from engine.usage.report import last_days

    since, until = view.date_range()  # the last 30 days by default: the engine's range, today (UTC) the last
    start, end = last_days(30)
    assert (since, until) == (start.isoformat(), end.isoformat()) and view.preset_days() == 30
    with qtbot.waitSignal(view.days_requested) as blocker:
        view.set_days(0)
    assert blocker.args == [0, False] and view.date_range() == ("", "")
    with qtbot.waitSignal(view.days_requested) as blocker:
        view.preset.setCurrentIndex(0)  # the last 7 days: asked as such, the engine makes the range
    assert blocker.args == [7, False]
    view.set_report(_report(since="2026-02-24", until="2026-03-02", first_day="2026-02-24", last_day="2026-03-02"))
    assert view.date_range() == ("2026-02-24", "2026-03-02")  # the range the engine made, shown
    with qtbot.waitSignal(view.days_requested) as blocker:
        view.refresh_button.click()
    assert blocker.args == [7, True]  # Refresh reads new session files
    with qtbot.waitSignal(view.refresh_requested, timeout=2000) as blocker:
        view.until_edit.setDate(QDate(2026, 3, 1))  # a date picked: asked for without Enter
    assert blocker.args == ["2026-02-24", "2026-03-01", False] and view.preset.currentText() == "Custom"
    with qtbot.assertNotEmitted(view.refresh_requested, wait=600):
        view.until_edit.editingFinished.emit()  # Enter on the same range: not asked again
    asked: list[list[Any]] = []
    view.refresh_requested.connect(lambda *a: asked.append(list(a)))
    view.since_edit.setDate(QDate(2026, 2, 20))  # typed digit by digit: asked once it settles
    view.since_edit.setDate(QDate(2026, 2, 21))
    qtbot.waitUntil(lambda: bool(asked), timeout=2000)
    qtbot.wait(100)
    assert asked == [["2026-02-21", "2026-03-01", False]]
    view.set_report(_report(since="2026-02-21", until="2026-03-01"))  # Custom: the boxes stay as the user set them
    assert view.date_range() == ("2026-02-21", "2026-03-01")
    with qtbot.waitSignal(view.refresh_requested, timeout=100) as blocker:  # (before the typing's settle time)
        view.until_edit.calendarWidget().clicked.emit(QDate(2026, 3, 2))  # a day clicked in the calendar: at once
    assert blocker.args == ["2026-02-21", "2026-03-02", False]


def test_the_bars_span_the_range_asked_not_only_its_days_with_calls(view: UsageView) -> None:
    view.set_report(_report(since="2026-02-27", until="2026-03-05", first_day="2026-02-27", last_day="2026-03-05"))
    assert view.days()[0] == "2026-02-27" and view.days()[-1] == "2026-03-05" and len(view.days()) == 7
    assert view.bar_totals() == pytest.approx([0, 0, 3.5, 0, 1.0, 0, 0])
    p = view.plot.getPlotItem()
    (x0, x1), _ = p.viewRange()
    assert x0 < 0 and x1 > 6  # every day of the range in view
    ticks = view._day_axis.tickStrings([0.0, 2.0, 6.0], 1.0, 1.0)
    assert ticks == ["02-27", "03-01", "03-05"]


def test_projects_are_shown_short_with_their_full_path_in_the_tooltip(view: UsageView) -> None:
    import os

    home = os.path.expanduser("~")
    full = f"{home}/a/work"
    other = "/srv/b/work"
    view.set_report(_report(projects=[{"project": full, "cost_usd": 4.0, "calls": 3},
                                      {"project": other, "cost_usd": 0.5, "calls": 9}],
                            sessions=[{"title": "t", "project": full, "path": "/x/t.jsonl", "cost_usd": 1.0}]))
    t = view.projects
    assert [t.text(r, 0) for r in range(2)] == ["~/a/work", "/srv/b/work"]  # two folders named "work": two rows
    model = t.model()
    assert model.data(model.index(0, 0), Qt.ItemDataRole.ToolTipRole) == full
    assert view.sessions.text(0, 2) == "~/a/work" and view.sessions.tooltip(0, 2) == full


def test_the_sort_arrow_points_up_when_the_smallest_come_first(view: UsageView) -> None:
    from PySide6.QtGui import QImage

    view.show()
    view.set_report(_report())
    header = view.sessions.horizontalHeader()

    def arrow_rows(order: Qt.SortOrder) -> list[int]:
        view.sessions.sort_by(6, order)
        header.repaint()
        image = header.grab().toImage().convertToFormat(QImage.Format.Format_RGB32)
        x0 = header.sectionViewportPosition(6) + header.sectionSize(6)  # the arrow: right of the title
        rows = [sum(1 for x in range(x0 - 16, x0 - 3) if image.pixelColor(x, y).lightness() < 220)
                for y in range(1, image.height() - 2)]  # its marked pixels, row by row (not the borders)
        return [c for c in rows if c]

    up = arrow_rows(Qt.SortOrder.AscendingOrder)
    down = arrow_rows(Qt.SortOrder.DescendingOrder)
    assert len(up) >= 2 and len(down) >= 2
    assert up[0] < up[-1]  # ascending: narrow at the top, wide at the bottom — an arrow pointing up
    assert down[0] > down[-1]


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


def test_files_read_in_part_are_told_apart_from_files_not_read(view: UsageView) -> None:
    view.show()
    unreadable = [{"path": "/h/a.jsonl", "reason": "not a regular file (FIFO): not read"},
                  {"path": "/h/b.jsonl", "partly": True,
                   "reason": "3 line(s) could not be read (line 7: not JSON); the rest is counted"}]
    view.set_report(_report(unreadable=unreadable))
    assert "1 session file could not be read · 1 session file read in part" in view.notes.text()
    view.set_report(_report(unreadable=unreadable[1:]))
    text = view.notes.text()
    assert "read in part" in text and "could not be read</span>" not in text
    view.notes.linkActivated.emit("unreadable")
    assert view.unreadable_list.text() == f"/h/b.jsonl — {unreadable[1]['reason']}"


def test_a_live_report_does_not_overwrite_a_date_being_typed(view: UsageView, qtbot: Any) -> None:
    view.set_report(_report(since="2026-02-01", until="2026-03-02"))  # the last 30 days, as the engine made them
    assert view.date_range() == ("2026-02-01", "2026-03-02")
    view.since_edit.setDate(QDate(2026, 2, 15))  # typing…
    view.set_report(_report(since="2026-02-01", until="2026-03-02"))  # a live refresh of the preset comes in
    assert view.date_range()[0] == "2026-02-15"
    with qtbot.waitSignal(view.refresh_requested, timeout=2000) as blocker:
        pass  # settled: asked for as a Custom range
    assert blocker.args == ["2026-02-15", "2026-03-02", False] and view.preset_days() == -1


def test_a_sessions_cost_tooltip_breaks_it_into_main_subagents_and_compaction(view: UsageView) -> None:
    """Issue 27: where the Usage view shows a session's cost, its parts are told (the index row's sums per kind of
    call, put in words by engine.usage.costs.SessionCost as the window's status bar puts them)."""
    parts = {"main_calls": 2, "main_cost_usd": 3.5, "main_unpriced": 0, "subagent_calls": 3,
             "subagents_cost_usd": 0.25, "subagents_unpriced": 1, "compaction_calls": 1,
             "compaction_cost_usd": 0.25, "compaction_unpriced": 0}
    report = _report()
    report.sessions[1].update(parts, calls=6)
    view.set_report(report)
    table = view.sessions
    assert table.model().headerData(4, Qt.Orientation.Horizontal) == "Cost"
    row = next(r for r in range(table.row_count()) if table.text(r, 0) == "dear")
    tip = table.tooltip(row, 4).splitlines()
    assert tip[0] == ("Cost $4.00+ at litellm's prices: main $3.50 (2 calls) · subagents $0.2500+ (3 calls) · "
                      "compaction $0.2500 (1 call)")
    assert tip[1].startswith("1 call(s) without a price are not counted")
    assert tip[-1].startswith("The agent's own cost: $4.10")
    cheap = next(r for r in range(table.row_count()) if table.text(r, 0) == "cheap")
    assert table.tooltip(cheap, 4) == ""  # a row without the parts claims none


def test_the_agents_cost_column_says_whose_files_hold_it(qtbot: Any) -> None:
    w = UsageView(cost_from="Claude Code and Pi")
    qtbot.addWidget(w)
    rows = w.sessions.rows
    tips = [rows.headerData(i, Qt.Orientation.Horizontal, Qt.ItemDataRole.ToolTipRole)
            for i in range(rows.columnCount())]
    assert "The agent's own cost, from its cost records (Claude Code and Pi)" in tips
